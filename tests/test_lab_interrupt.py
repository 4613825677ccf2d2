"""JupyterLab's interrupt button (■) during a `%%agent` turn: the turn ends as cancelled, the cell
says so in one line, and Run All stops there. Screenshot: test-artifacts/lab-interrupt.png."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_lab import open_and_run, output, shoot

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

INTERRUPT = ".jp-NotebookPanel-toolbar [data-jp-item-name='interrupt'] button"


def test_interrupt_button_shows_one_line_and_stops_the_run(page: Any, lab: Any) -> None:
    open_and_run(
        page,
        lab,
        "interrupt.ipynb",
        "%%agent --session interrupted\n/slow tell me a long story",
        "print('the next cell ran')",
    )
    out = output(page)
    out.locator(".acpnb-thought, .acpnb-plan").first.wait_for()  # the turn streams
    page.locator(INTERRUPT).click()

    error = out.filter(has_text="TurnInterrupted")
    error.wait_for(timeout=30_000)
    shown = error.inner_text().strip()
    assert shown.splitlines() == [
        "TurnInterrupted: the turn was cancelled by the kernel's interrupt "
        "(the agent was sent session/cancel)"
    ], shown
    out.locator(".acpnb-alert", has_text="Cancelled").wait_for()  # the record says how it ended
    page.wait_for_function("() => !document.querySelector('.jp-Notebook .acpnb-running')")
    shoot(page, "interrupt")
    # Run All stopped at the interrupted cell.
    assert output(page, 1).count() == 0
