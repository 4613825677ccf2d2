"""What a person sees in JupyterLab: headless Chromium driven by Playwright.

A private JupyterLab server (own config, settings, runtime and workspace dirs, a token; the `lab`
fixture of tests/conftest.py, one per test session) runs the project's kernel; the demo agent
streams at its normal speed. Screenshots go to
test-artifacts/lab-*.png (gitignored). See shared/reference/jupyter-test-recipe.md.

Without /usr/bin/chromium (or the playwright package) the tests skip, except in CI (env CI set),
where a missing browser is a failure.
"""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest

from tests.nb_util import new_nb

ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"

# What these tests check is in the notebook each opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page]


READY = """() => { const w = window.jupyterapp?.shell.currentWidget;
  const k = w?.sessionContext?.session?.kernel;
  return !!(w?.sessionContext?.isReady && k?.connectionStatus === 'connected'
            && k.status === 'idle'); }"""

# Records every distinct state of the first cell's output while it changes: a partial answer is
# then observed from the page's own events, not by racing the stream with polls.
OBSERVE = """() => {
  window.__snaps = [];
  window.__observer?.disconnect();  // a page shared by tests (lab_page) observes once
  const take = () => {
    const out = document.querySelector('.jp-Notebook .jp-Cell .jp-OutputArea');
    if (!out) return;
    const answers = out.querySelectorAll('.acpnb-answer');
    const snap = {answer: answers.length ? answers[answers.length - 1].innerText : '',
                  running: !!out.querySelector('.acpnb-running')};
    const last = window.__snaps[window.__snaps.length - 1];
    if (!last || last.answer !== snap.answer || last.running !== snap.running)
      window.__snaps.push(snap);
  };
  window.__observer = new MutationObserver(take);
  window.__observer.observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


# The turn ended and its record replaced the live view (which says "done" a moment before: its
# hidden Stop button is still in the page until the record comes).
RECORD_ONLY = "() => !document.querySelector('.jp-Notebook .acpnb-running, .jp-Notebook .acpnb-tv')"


# Closes every document of the page's JupyterLab, shutting down its kernel (a closed notebook's
# kernel would run on), unsaved. Bounded: false if that did not finish in 20 s.
CLOSE_ALL = """async () => {
  const close = async () => {
    for (const w of Array.from(window.jupyterapp.shell.widgets('main'))) {
      await w.sessionContext?.shutdown();
      if (w.context) w.context.model.dirty = false;
      w.dispose();
    }
    return true;
  };
  const late = new Promise(r => setTimeout(() => r(false), 20000));
  return await Promise.race([close().catch(() => false), late]);
}"""


#: How often a page function waited for is run, in ms. Playwright's default runs it at every
#: animation frame, 60 times a second, for as long as a test waits: a fifth of Chromium's CPU in
#: the browser tests (test_lab_view*.py: 27 -> 22 s of the renderer's CPU).
POLL = 100

#: Runs a JupyterLab command and waits for it, returning nothing: Playwright copies what a page
#: function returns to Python whole, and `docmanager:open` resolves to the notebook's widget,
#: 4.4 MB as JSON (about 2 s of this process's CPU a test, and more in Chromium and the driver).
COMMAND = "async ([id, args]) => { await window.jupyterapp.commands.execute(id, args); }"


def command(page, name: str, args: dict | None = None) -> None:
    page.evaluate(COMMAND, [name, args or {}])


def open_notebook(page, lab, name: str) -> None:
    """Show the server's notebook `name` in the page, its kernel idle.

    A page already running this server's JupyterLab (a module's shared `lab_page`) closes what
    it shows and opens the notebook in place: booting JupyterLab again costs ~4 s of CPU, three
    times what opening a notebook does. A page elsewhere, or one that could not close (a dialog
    left open by a failed test), loads JupyterLab with the notebook."""
    base, token, _ = lab
    in_place = (
        page.url.startswith(f"{base}/")
        and page.evaluate("() => !!window.jupyterapp && !document.querySelector('.jp-Dialog')")
        and page.evaluate(CLOSE_ALL)
    )
    if in_place:
        page.wait_for_function(
            polling=POLL, expression="() => !document.querySelector('.jp-Notebook')"
        )
        command(page, "docmanager:open", {"path": name})
    else:
        page.goto(f"{base}/doc/tree/{name}?token={token}&reset")
    page.wait_for_function(polling=POLL, expression=READY, timeout=60_000)


def open_and_run(page, lab, name: str, *cells: str) -> None:
    nbformat.write(new_nb(*cells), lab[2] / name)
    open_notebook(page, lab, name)
    page.evaluate(OBSERVE)
    # Not awaited: a command that waits for a kernel dialog would hang page.evaluate.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def output(page, index: int = 0):
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output")


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"lab-{name}.png"), full_page=True)


def test_turn_streams_asks_permission_and_edits(page, lab) -> None:
    root = lab[2]
    notes = root / "demo_notes.md"
    if notes.exists():
        notes.unlink()
    open_and_run(
        page, lab, "turn.ipynb", "%%agent\nPlease add a line about JupyterLab to the notes."
    )
    out = output(page)

    # The edit waits for a person: its options are buttons, and the turn is still running.
    allow = out.locator("button.acpnb-permission-option", has_text="Allow").filter(
        has_not_text="Always"
    )
    allow.wait_for()
    assert out.locator(".acpnb-running").count() == 1
    assert out.locator("button.acpnb-permission-option").count() == 4
    out.locator("details.acpnb-tool", has_text="Edit demo_notes.md").first.wait_for()
    assert page.get_by_text("Loading widget").count() == 0
    shoot(page, "permission")
    allow.click()

    # The turn ends: the record replaces the live view, the controls are gone.
    done = out.locator(".acpnb-answer", has_text="a walk through a coding-agent turn")
    done.wait_for()
    page.wait_for_function(polling=POLL, expression=RECORD_ONLY)
    edit = out.locator("details.acpnb-tool", has_text="Edit demo_notes.md")
    badge = edit.first.locator("summary > b")  # completed: the badge's own colour, no class
    assert badge.inner_text() == "✓ completed" and badge.get_attribute("class") is None
    assert out.locator(".acpnb-chosen", has_text="Allow").count() >= 1
    # Stop and permission buttons were closed (the record's copy buttons are the page's own)
    assert out.locator("button:not(.acpnb-tv-copy)").count() == 0
    assert "JupyterLab" in notes.read_text()  # written through the client, as allowed

    snaps = page.evaluate("() => window.__snaps")
    final = snaps[-1]["answer"]
    assert not snaps[-1]["running"] and "coding-agent turn" in final
    partial = {s["answer"] for s in snaps if s["running"] and 0 < len(s["answer"]) < len(final)}
    assert len(partial) >= 2, f"no partial answer was shown while streaming: {snaps}"
    assert page.get_by_text("Loading widget").count() == 0
    out.locator(".acpnb-answer").last.scroll_into_view_if_needed()
    shoot(page, "turn")


def test_stop_button_cancels_a_slow_turn(page, lab) -> None:
    open_and_run(
        page,
        lab,
        "stop.ipynb",
        "%%agent --session slow\n/slow tell me a long story",
        "print('next cell ran after', _.stop_reason)",
    )
    out = output(page)
    stop = out.locator(".acpnb-controls button", has_text="Stop")
    stop.wait_for()
    out.locator(".acpnb-running").wait_for()
    out.locator(".acpnb-thought, .acpnb-plan").first.wait_for()  # something streamed
    started = time.monotonic()
    stop.click()

    out.locator(".acpnb-alert", has_text="Cancelled").wait_for()
    page.wait_for_function(polling=POLL, expression=RECORD_ONLY)
    assert time.monotonic() - started < 15  # not the ~20 s the slow turn takes
    assert out.locator("button:not(.acpnb-tv-copy)").count() == 0
    # Run All went on: the next cell waited for the turn, which ended as cancelled, not failed.
    output(page, 1).filter(has_text="next cell ran after cancelled").wait_for()
    assert (
        page.locator(
            ".jp-Notebook [data-mime-type='application/vnd.jupyter.stderr']", has_text="TurnFailed"
        ).count()
        == 0
    )
    shoot(page, "stop")
