"""The kernel reads busy for the whole of a `%%agent` turn in JupyterLab (issue 23, item 2): in
`kernel.status`, in the session's status, in the status bar and the favicon, from the cell's
start to its end, then idle; and the clicks on the permission buttons and on Stop still work.

Before, the page took the busy and idle of other requests answered during the turn as the
kernel's status: its own subshell requests (made at the first widget message, deleted when the
last comm of a subshell closed) and the widget messages. It showed idle a moment into the first
turn of a kernel, for the rest of it (measured: idle 4.4 s of a 5.7 s turn). Now the kernel
gives each widget message its own pair and says busy again after it (notebook/kernel_status.py),
and the JupyterLab extension (labextension/src/status.ts) keeps both kinds of requests from
setting the page's status. Screenshot: test-artifacts/lab-busy.png.
"""

from __future__ import annotations

import time
from typing import Any

import nbformat
import pytest

from tests.browser.test_lab import POLL, open_notebook, output, shoot
from tests.nb_util import new_nb

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

# Records, for the current notebook, every change of its session's status (statusChanged) and,
# at every animation frame, what the page shows: the session's status, `kernel.status`, whether
# a cell runs ([*]), the status bar's kernel status and the favicon. Only changes are kept.
RECORD = """() => {
  window.__busyStop?.();
  const panel = window.jupyterapp.shell.currentWidget;
  const ctx = panel.sessionContext;
  const kernel = ctx.session.kernel;
  const log = window.__busy = {changed: [], frames: []};
  const started = performance.now();
  const bar = () => {
    const m = /\\|\\s*(\\w+)/.exec(
      document.querySelector('#jp-main-statusbar .jp-StatusBar-Left')?.textContent ?? '');
    return m ? m[1] : '';
  };
  const icon = () => {
    const href = document.querySelector('link[rel="icon"]')?.getAttribute('href') ?? '';
    return href.includes('busy') ? 'busy' : 'idle';
  };
  const sample = (why) => {
    const running = panel.content.widgets.some(c => c.model.executionState === 'running');
    const live = !!panel.node.querySelector('.acpnb-running');  // the turn's live view
    return {t: performance.now() - started, why, session: ctx.kernelDisplayStatus,
            kernel: kernel.status, running, live, bar: bar(), icon: icon()};
  };
  const onStatus = (_, status) => log.changed.push({...sample('status'), status});
  ctx.statusChanged.connect(onStatus);
  let last = '';
  let stop = false;
  const frame = () => {
    if (stop) return;
    const s = sample('frame');
    const key = `${s.session}|${s.kernel}|${s.running}|${s.live}|${s.bar}|${s.icon}`;
    if (key !== last) { log.frames.push(s); last = key; }
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  window.__busyStop = () => { stop = true; ctx.statusChanged.disconnect(onStatus); };
}"""

# The cell at `index` ran and the kernel is idle again, as the status bar says.
SETTLED = """(index) => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cell = panel.content.widgets[index].model;
  return cell.executionState === 'idle' && cell.executionCount !== null
    && panel.sessionContext.session.kernel.status === 'idle'
    && /\\|\\s*Idle/.test(document.querySelector('#jp-main-statusbar')?.textContent ?? '');
}"""


def run_cell(page: Any, index: int) -> None:
    page.evaluate(RECORD)
    # Not awaited: the command resolves when the cell has run.
    page.evaluate(
        """(index) => { const app = window.jupyterapp;
          app.shell.currentWidget.content.activeCellIndex = index;
          app.commands.execute('notebook:run-cell'); }""",
        index,
    )


def settled(page: Any, index: int) -> dict[str, list[dict[str, Any]]]:
    page.wait_for_function(polling=POLL, arg=index, expression=SETTLED, timeout=60_000)
    log: dict[str, list[dict[str, Any]]] = page.evaluate(
        "() => { window.__busyStop(); return window.__busy; }"
    )
    return log


def changes(samples: list[dict[str, Any]], key: str) -> list[Any]:
    seen: list[Any] = []
    for sample in samples:
        if not seen or seen[-1] != sample[key]:
            seen.append(sample[key])
    return seen


def assert_busy_throughout(log: dict[str, list[dict[str, Any]]]) -> None:
    """One busy, then one idle, in every place the page shows the status: the status changed
    twice in the whole turn, the idle once the turn had ended, and no frame showed idle from
    the first busy to it (the cell shows [*] a moment before the kernel starts it)."""
    assert [c["status"] for c in log["changed"]] == ["busy", "idle"], log["changed"]
    busy, idle = log["changed"]
    assert busy["live"] is False and idle["live"] is False  # not yet, and no longer, shown
    frames = log["frames"]
    for key in ("session", "kernel"):
        assert changes(frames, key)[-2:] == ["busy", "idle"], (key, frames)
        assert changes(frames, key).count("busy") == 1, (key, frames)
    assert changes(frames, "bar")[-2:] == ["Busy", "Idle"], frames
    assert changes(frames, "bar").count("Busy") == 1, frames
    assert changes(frames, "icon")[-2:] == ["busy", "idle"], frames
    during = [f for f in frames if busy["t"] <= f["t"] < idle["t"]]
    assert any(f["live"] for f in during), frames  # the turn's view was seen, all of it busy
    assert all(f["session"] == "busy" == f["kernel"] for f in during), frames
    assert all(f["session"] == "busy" for f in frames if f["live"]), frames
    assert frames[-1]["session"] == "idle" and not frames[-1]["running"]


def test_the_kernel_reads_busy_for_the_whole_turn_and_clicks_work(page: Any, lab: Any) -> None:
    root = lab[2]
    (root / "demo_notes.md").unlink(missing_ok=True)
    name = "busy.ipynb"
    nbformat.write(
        new_nb(
            "%%agent --session busy\nPlease add a line about JupyterLab to the notes.",
            "%%agent --session busy-slow\n/slow tell me a long story",
        ),
        root / name,
    )
    open_notebook(page, lab, name)

    # A turn that streams, then asks to edit: the Allow click during the turn is heard.
    run_cell(page, 0)
    out = output(page)
    allow = out.locator("button.acpnb-permission-option", has_text="Allow").filter(
        has_not_text="Always"
    )
    allow.wait_for()
    assert page.evaluate("() => window.__busy.frames.at(-1)")["bar"] == "Busy"
    shoot(page, "busy")
    allow.click()
    out.locator(".acpnb-answer", has_text="a walk through a coding-agent turn").wait_for()
    log = settled(page, 0)
    assert_busy_throughout(log)
    assert "JupyterLab" in (root / "demo_notes.md").read_text()  # the click was heard

    # A slow turn: the Stop click during the turn ends it, long before its ~20 s.
    run_cell(page, 1)
    out = output(page, 1)
    stop = out.locator(".acpnb-controls button", has_text="Stop")
    stop.wait_for()
    out.locator(".acpnb-thought, .acpnb-plan").first.wait_for()  # something streamed
    started = time.monotonic()
    stop.click()
    out.locator(".acpnb-alert", has_text="Cancelled").wait_for()
    log = settled(page, 1)
    assert time.monotonic() - started < 15
    assert_busy_throughout(log)
