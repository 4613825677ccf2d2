"""JupyterLab's interrupt button (■) during a `%%agent` turn: the turn ends as cancelled, the cell
says so in one line, and Run All stops there; the same while the agent is still starting.
Screenshots: test-artifacts/lab-interrupt*.png."""

from __future__ import annotations

import shlex
import subprocess
from typing import Any

import pytest

from tests.agents.script import agent_command
from tests.browser.test_lab import POLL, open_and_run, output, shoot
from tests.nb_util import process_gone
from tests.polling import wait_until

# What these tests check is in the notebook each opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

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
    page.wait_for_function(
        polling=POLL, expression="() => !document.querySelector('.jp-Notebook .acpnb-running')"
    )
    shoot(page, "interrupt")
    # Run All stopped at the interrupted cell.
    assert output(page, 1).count() == 0


def test_interrupt_during_the_agents_start_shows_one_line(page: Any, lab: Any) -> None:
    """The interrupt while the agent still starts (it never answers initialize): one line, the
    "starting agent" view gone, the agent process stopped, Run All stopped."""
    marker = "scripted-interrupted-start-5c1d"
    agent = shlex.quote(
        shlex.join(agent_command("--hang-method", "initialize", "--agent-name", marker))
    )
    open_and_run(
        page,
        lab,
        "interrupt-start.ipynb",
        f"%%agent --agent {agent} --session never\nhello",
        "print('the next cell ran')",
    )
    out = output(page)
    out.locator(".acpnb-tv .acpnb-tv-state", has_text="starting agent").wait_for()
    pids = wait_until(lambda: _pids(marker), 30, "the agent process")
    page.locator(INTERRUPT).click()
    error = out.filter(has_text="TurnInterrupted")
    try:
        error.wait_for(timeout=20_000)
    except Exception:
        # Seen in CI: nothing changed after the click. That was the kernel losing the signal
        # (ipykernel's handler did not wake its loop: notebook/interrupts.py, tested without a
        # browser in test_interrupt_idle.py), and a second click was lost too. Kept for a click
        # lost in a toolbar redraw: say what the cell showed, then interrupt once more.
        shoot(page, "interrupt-start-missed")
        print("[interrupt-start] no answer to the first interrupt; the cell showed:")
        print(page.locator(".jp-Notebook .jp-Cell").first.inner_text())
        page.locator(INTERRUPT).click()
        error.wait_for(timeout=30_000)
    assert error.inner_text().strip().splitlines() == [
        "TurnInterrupted: the agent's start was cancelled by the kernel's interrupt"
    ]
    assert out.locator(".acpnb-tv").count() == 0
    wait_until(lambda: all(process_gone(p) for p in pids), 15, "the agent process to end")
    shoot(page, "interrupt-start")
    assert output(page, 1).count() == 0


def _pids(marker: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]
