"""Forks per cell in JupyterLab, which sends each cell's id: a `%%agent` cell run again takes its
turn's place in the conversation. The demo agent forks (`sessionCapabilities.fork`) and numbers
its turns from the conversation it has ("Demo turn N"), so the number each answer shows is how
many turns the agent had before it, plus one."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.test_lab import POLL, RECORD_ONLY, output
from tests.browser.test_lab_chat import open_nb, run_cell

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

CELLS = ("%%agent --session f\n/plan the first step", "%%agent --session f\n/plan the next one")


def answered(page: Any, index: int, turn: int, again: bool = False) -> None:
    """Cell `index`, just run (`again`: run before, its old output replaced first), shows the
    answer of the agent's turn number `turn`."""
    out = output(page, index)
    if again:
        out.locator(".acpnb-running").wait_for(timeout=60_000)
    out.locator(".acpnb-answer", has_text=f"Demo turn {turn}:").wait_for(timeout=60_000)
    page.wait_for_function(polling=POLL, expression=RECORD_ONLY, timeout=60_000)


def test_a_cell_run_again_takes_its_turns_place(page: Any, lab: Any) -> None:
    open_nb(page, lab, "forks.ipynb", *CELLS)
    run_cell(page, 0)
    answered(page, 0, 1)
    run_cell(page, 1)
    answered(page, 1, 2)
    # The second cell again: the agent has the first turn only, not both (no "Demo turn 3").
    run_cell(page, 1)
    answered(page, 1, 2, again=True)
    # The first cell again, then the second: each has the history it had the first time.
    run_cell(page, 0)
    answered(page, 0, 1, again=True)
    run_cell(page, 1)
    answered(page, 1, 2, again=True)
    assert page.get_by_text("cannot fork").count() == 0
    assert page.get_by_text("could not fork").count() == 0
