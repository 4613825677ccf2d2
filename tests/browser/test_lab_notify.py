"""Done and waiting (issue 23, item 9): a turn that ran 10 s or more ends, or starts waiting for
a decision, while the person cannot see its view (the page hidden, the cell scrolled out of
view): JupyterLab's notification says so (the acp-notebook extension shows the view's notice,
labextension/src/notify.ts), and the browser's too when the page is hidden and notifications
are allowed. In sight, nothing is said. Turns are scripted (tests/agents/scripted).

The page's visibility is emulated (`document.visibilityState` overridden); the browser's
notifications are a stub that records them, with the permission granted.
"""

from __future__ import annotations

import os
from typing import Any

import nbformat
import pytest

from tests.blocking import open_fifo_ends, raised_within
from tests.browser.test_lab import POLL, open_notebook, output
from tests.browser.test_lab_view import cell, done, shoot
from tests.nb_util import new_nb

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

# The view's notices as it sends them (the events the extension listens to), and the browser's
# notifications (a stub: granted, recorded).
CATCH = """() => {
  window.__notices = [];
  window.__shown = [];
  if (!window.__caught) {
    window.__caught = true;
    window.addEventListener('acp-notebook:notify', (e) => {
      const { element, ...rest } = e.detail || {};
      window.__notices.push(rest);
    });
  }
  window.__realNotification ??= window.Notification;
  window.Notification = class {
    static permission = 'granted';
    constructor(title, options) { window.__shown.push([title, (options || {}).body || '']); }
  };
}"""

# The page hidden (true) or shown again (false: the document's own properties back).
HIDDEN = """(hidden) => {
  if (hidden) {
    Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'});
    Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
  } else {
    delete document.visibilityState;
    delete document.hidden;
    if (window.__realNotification) window.Notification = window.__realNotification;
  }
}"""


def edit(i: int) -> dict[str, Any]:
    return {"permission": {"toolCallId": f"e{i}", "title": f"Edit notes_{i}.md", "kind": "edit"}}


def start(page: Any, lab: Any, name: str, *cells: Any) -> None:
    """Opens a notebook of `cells` (sources of code cells, or cells), catches its notices."""
    nb = new_nb()
    nb.cells = [nbformat.v4.new_code_cell(c) if isinstance(c, str) else c for c in cells]
    nbformat.write(nb, lab[2] / name)
    open_notebook(page, lab, name)
    page.evaluate(CATCH)


def run_all(page: Any) -> None:
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def toast(page: Any, text: str) -> Any:
    return page.locator(".Toastify__toast", has_text=text)


def test_a_hidden_page_is_told_the_agent_waits_and_then_that_the_long_turn_ended(
    page: Any, lab: Any
) -> None:
    steps = [{"say": "looking"}, edit(1), {"sleep": 10}, {"say": "all edited"}]
    start(page, lab, "notify-hidden.ipynb", cell(*steps, session="notify-h"))
    page.evaluate(HIDDEN, True)
    try:
        run_all(page)
        asking = toast(page, "The agent waits for your decision (notify-hidden.ipynb)")
        asking.wait_for(timeout=60_000)
        assert asking.locator("button", has_text="Show").count() == 1
        notices = page.evaluate("() => window.__notices")
        assert [(n["kind"], n["message"], n["path"]) for n in notices] == [
            ("warning", "The agent waits for your decision", "notify-hidden.ipynb")
        ]
        assert page.evaluate("() => window.__shown") == [
            ["The agent waits for your decision", "notify-hidden.ipynb"]
        ]
        shoot(page, "notify-waiting")
        out = output(page)
        out.locator("button.acpnb-permission-option", has_text="Allow once").click()
        asking.wait_for(state="detached")  # decided: the notice that asked goes
        ended = toast(page, "The agent's turn is done after 1")  # 10 s and more
        ended.wait_for(timeout=60_000)
        done(page)
        shown = page.evaluate("() => window.__shown")
        assert len(shown) == 2 and shown[1][0].startswith("The agent's turn is done after 1")
    finally:
        page.evaluate(HIDDEN, False)


TALL = "\n\n".join(f"A line of the notes, number {i}." for i in range(120))


def test_a_cell_out_of_view_is_told_the_agent_waits_and_show_goes_back_to_it(
    page: Any, lab: Any
) -> None:
    """In sight, a request says nothing; scrolled away, the next one is told, and the notice's
    Show brings the cell's view back in sight. A turn under 10 s says nothing when it ends."""
    fifo = lab[2] / "notify.fifo"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    steps = [edit(1), {"wait_fifo": str(fifo)}, edit(2), {"say": "both edited"}]
    tall = nbformat.v4.new_markdown_cell(TALL)
    start(page, lab, "notify-away.ipynb", cell(*steps, session="notify-a"), tall)
    run_all(page)
    out = output(page)
    first = out.locator(".acpnb-perm", has_text="Edit notes_1.md")
    first.locator("button.acpnb-permission-option", has_text="Allow once").click()
    assert page.evaluate("() => window.__notices") == []  # asked in sight: nothing said
    first.locator("button.acpnb-permission-option").first.wait_for(state="detached")
    # The end of the long second cell in view, the turn's view far above it.
    last = page.locator(".jp-Notebook .jp-Cell").nth(1).get_by_text("number 119")
    last.scroll_into_view_if_needed()
    page.wait_for_function(
        polling=POLL,
        expression="""() => { const v = document.querySelector('.jp-Notebook .acpnb-tv');
          const box = document.querySelector('.jp-Notebook').getBoundingClientRect();
          return v && v.getBoundingClientRect().bottom < box.top; }""",
    )
    assert raised_within(lambda: fifo.write_text("go"), open_fifo_ends(fifo), 30) is None
    asking = toast(page, "The agent waits for your decision (notify-away.ipynb)")
    asking.wait_for(timeout=60_000)
    assert page.evaluate("() => window.__shown") == []  # the page is shown: JupyterLab's only
    asking.locator("button", has_text="Show").click()
    second = out.locator(".acpnb-perm", has_text="Edit notes_2.md")
    allow = second.locator("button.acpnb-permission-option", has_text="Allow once")
    page.wait_for_function(
        polling=POLL,
        expression="""(b) => { const r = b.getBoundingClientRect();
          const box = document.querySelector('.jp-Notebook').getBoundingClientRect();
          return r.top >= box.top && r.bottom <= box.bottom; }""",
        arg=allow.element_handle(),
    )
    allow.click()
    done(page)
    notices = page.evaluate("() => window.__notices")
    assert [n["message"] for n in notices if "message" in n] == [
        "The agent waits for your decision"
    ]
