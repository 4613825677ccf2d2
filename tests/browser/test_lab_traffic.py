"""What a turn view costs on the wire in JupyterLab (issue 23, item 12), and the view's module and
stylesheet, sent once a page, drawing every view: two at once, after a reload, in a fresh page.

The bytes are the frames the page's websockets received, by message type (the kernel's
messages, as JupyterLab's server relays them). Each test has a page of its own: what is
measured is a page's first view and the views after it. The figures are printed for
bench/README.md (`-s -n 0`). What a steady stream costs is counted on the wire itself, between
the page and the server (`wire_proxy.py`): the package turns on the server's websocket
compression (`jupyter-config/jupyter_server_config.d/`).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections import Counter
from typing import Any

import nbformat
import pytest

from acp_notebook.protocol.turn import TurnResult
from tests.browser.test_lab import POLL, READY, open_notebook
from tests.browser.test_lab_markdown import STREAM_AGENT
from tests.browser.test_lab_view import MIME_TURN, cell, save, tool
from tests.browser.wire_proxy import WireProxy
from tests.nb_util import new_nb
from tests.polling import wait_until

pytestmark = [pytest.mark.browser]

#: Issue 23, item 12: after the first view on a page, what a turn view costs whatever its turn.
FIXED = 10_000
#: ... and what it costs for its turn's transcript (besides the record, sent once).
PER_TRANSCRIPT = 1.5

# The turn: a short answer, a tool call, more answer, in two seconds (a short turn of a
# person's day: the page draws its view meanwhile).
SHORT = (
    {"say": "Let me look at the notes first."},
    {"sleep": 1},
    tool(1, text="line one\nline two\n"),
    {"sleep": 1},
    {"say": " The notes say **two** things: line one, and line two. That is all."},
)


def kind(payload: Any) -> str:
    """What a frame is: its message type, the view's differences (`diff`) and its module
    (`module`, loader.js's answer) told apart from the other comm messages."""
    raw = payload if isinstance(payload, bytes) else payload.encode()
    found = re.search(rb'"msg_type": ?"(\w+)"', raw)
    name = found.group(1).decode() if found else "other"
    if name == "comm_msg" and b'"module": "' in raw:
        return "module"
    if name == "comm_msg" and b'"ops": [' in raw:
        return "diff"
    return name


class Wire:
    """The bytes the page received, by `kind`, on every websocket it opens from now on."""

    def __init__(self, page: Any) -> None:
        self.bytes: Counter[str] = Counter()
        self.count: Counter[str] = Counter()
        page.on("websocket", lambda ws: ws.on("framereceived", self._seen))

    def _seen(self, payload: Any) -> None:
        name = kind(payload)
        self.bytes[name] += len(payload)
        self.count[name] += 1

    def take(self) -> tuple[Counter[str], Counter[str]]:
        """What was received since the last `take` (bytes, messages)."""
        out = self.bytes.copy(), self.count.copy()
        self.bytes.clear()
        self.count.clear()
        return out


RUN_CELL = """(i) => { const nb = window.jupyterapp.shell.currentWidget.content;
  nb.activeCellIndex = i; window.jupyterapp.commands.execute('notebook:run-cell'); }"""

# Cell i ran and its record replaced its view (the prompt says its number once the kernel's
# execute_reply came).
RECORDED = """(i) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
  return !!c && !!c.querySelector('.acpnb-turn') && !c.querySelector('.acpnb-tv')
    && /\\[\\d+\\]/.test(c.querySelector('.jp-InputPrompt')?.textContent || ''); }"""


def run_cell(page: Any, wire: Wire, i: int) -> tuple[Counter[str], Counter[str]]:
    """Runs cell `i` alone, until its execute_reply reached the page: what that cost."""
    wire.take()
    page.evaluate(RUN_CELL, i)
    page.wait_for_function(RECORDED, arg=i, polling=POLL, timeout=60_000)
    return wire.take()


def transcript_of(nb: dict[str, Any], i: int) -> int:
    """The transcript of cell `i`'s turn as `TurnResult.to_json()` writes it (bench/README.md's
    measure of a turn)."""
    record = next(o["data"] for o in nb["cells"][i]["outputs"] if MIME_TURN in o.get("data", {}))
    return len(json.dumps(TurnResult.from_json(record[MIME_TURN]).to_json()))


#: What a turn view sends itself: its widget's state and close, its differences, the display
#: of the view and of the record in its place (and the module, once a page). The cell's own
#: messages (execute_input and _reply, status, stream) and the server's events are not the view's.
VIEW = ("comm_open", "comm_msg", "comm_close", "display_data", "diff", "update_display_data")


def test_after_the_first_view_a_turn_view_costs_its_transcript(page: Any, lab: Any) -> None:
    """Two short turns on a fresh page: the first brings the view's module, once; the second
    costs at most 10 KB besides 1.5x its transcript and its record."""
    name = "traffic.ipynb"
    nbformat.write(new_nb(cell(*SHORT), cell(*SHORT)), lab[2] / name)
    wire = Wire(page)
    open_notebook(page, lab, name)
    turns = [run_cell(page, wire, 0), run_cell(page, wire, 1)]
    nb = save(page, lab, name)
    for i, (sent, n) in enumerate(turns):
        transcript = transcript_of(nb, i)
        view = sum(sent[k] for k in VIEW)
        print(
            f"turn {i + 1}: the view {view} bytes for a {transcript}-byte transcript "
            f"({view / transcript:.1f}x): the record {sent['update_display_data']}, the "
            f"differences {sent['diff']} in {n['diff']} messages, the module {sent['module']}; "
            f"the page received {sum(sent.values())} in all: {dict(sent)}"
        )
    # The module and stylesheet once a page: asked by the first view, not by the second.
    assert turns[0][1]["module"] == 1
    sent, n = turns[1]
    assert n["module"] == 0
    transcript = transcript_of(nb, 1)
    record = sent["update_display_data"]
    fixed = sum(sent[k] for k in VIEW) - record - sent["diff"]
    assert fixed <= FIXED, f"a turn view's fixed cost: {fixed} bytes ({dict(sent)})"
    view = fixed + sent["diff"] + record
    assert view <= FIXED + PER_TRANSCRIPT * transcript + record, dict(sent)


def test_a_steady_stream_costs_on_the_wire_at_most_its_transcript(page: Any, lab: Any) -> None:
    """A turn streaming 100 small Markdown chunks a second for 5 s (bench/stream_agent.py, the
    paint benchmark's stream): its view draws them at up to 60 messages a second, each mostly the
    same Jupyter envelope, which the server's compressed websocket sends as a few bytes. Counted
    on the wire, everything the kernel's websocket carried to the page during the turn (not only
    the view's) is at most 10 KB besides 1.5x the transcript and the record (uncompressed)."""
    base, token, root = lab
    proxy = WireProxy(base)
    try:
        agent = shlex.join([sys.executable, str(STREAM_AGENT)])
        head = f"%%agent --agent {shlex.quote(agent)} --session steady\n"
        name = "steady.ipynb"
        # The first turn brings the module and stylesheet (once a page); the second is measured.
        nbformat.write(new_nb(head + "5 100 md", head + "500 100 md"), root / name)
        wire = Wire(page)
        open_notebook(page, (proxy.base, token, root), name)
        socket = wait_until(proxy.kernel_socket, 30, "the page's kernel websocket")
        assert socket.negotiated(b"permessage-deflate"), socket.response[:600]
        run_cell(page, wire, 0)
        before = socket.down
        sent, n = run_cell(page, wire, 1)
        on_wire = socket.down - before
    finally:
        proxy.close()
    nb = save(page, lab, name)
    transcript = transcript_of(nb, 1)
    record = sent["update_display_data"]
    frames = sum(sent.values())
    print(
        f"\na steady stream, 500 chunks at 100 a second: a {transcript}-byte transcript, "
        f"{n['diff']} view messages; the kernel's websocket carried {frames} bytes "
        f"({frames / transcript:.2f}x; the record {record}), {on_wire} on the wire "
        f"({on_wire / transcript:.2f}x): {dict(sent)}"
    )
    assert n["diff"] >= 50  # it streamed: the view drew the text as it came
    assert on_wire <= FIXED + PER_TRANSCRIPT * transcript + record, (on_wire, dict(sent))


def two_views(page: Any, *, clicked: int = -1) -> None:
    """Both cells' views are drawn, live, each with its permission buttons (but the one of
    cell `clicked`, whose turn ended)."""
    for i in range(2):
        out = page.locator(".jp-Notebook .jp-Cell").nth(i).locator(".jp-OutputArea-output")
        if i == clicked:
            out.locator(".acpnb-answer", has_text=f"turn {i} allowed").first.wait_for()
            continue
        out.locator(".acpnb-tv .acpnb-running", has_text="waiting for you").wait_for()
        out.locator(".acpnb-tv button.acpnb-permission-option", has_text="Allow once").wait_for()


def allow(page: Any, i: int) -> None:
    """Cell `i`'s turn is allowed from its view's button, and goes on to its end."""
    out = page.locator(".jp-Notebook .jp-Cell").nth(i).locator(".jp-OutputArea-output")
    out.locator(".acpnb-tv button.acpnb-permission-option", has_text="Allow once").click()
    out.locator(".acpnb-answer", has_text=f"turn {i} allowed").first.wait_for()


def test_two_views_draw_and_work_after_a_reload_and_in_a_fresh_page(
    page: Any, lab: Any, browser: Any
) -> None:
    """The module, asked once a page, serves both views of the page; a reloaded page and a
    fresh one ask again and draw both; their buttons reach the kernel."""
    name = "two-views.ipynb"
    cells = [
        cell(
            {"permission": {"toolCallId": f"p{i}", "title": f"Edit notes_{i}.md", "kind": "edit"}},
            {"say": f"turn {i} allowed"},
            session=f"two-{i}",
        ).replace("%%agent ", "%%agent --background ", 1)
        for i in range(2)
    ]
    nbformat.write(new_nb(*cells), lab[2] / name)
    wire = Wire(page)
    open_notebook(page, lab, name)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    two_views(page)
    assert wire.take()[1]["module"] == 1  # two views, one copy of the module on the page
    save(page, lab, name)  # the views' outputs, for the page loaded again
    page.reload()
    page.wait_for_function(polling=POLL, expression=READY, timeout=60_000)
    two_views(page)
    assert wire.take()[1]["module"] == 1
    allow(page, 0)
    two_views(page, clicked=0)
    save(page, lab, name)

    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        fresh = context.new_page()
        fresh.set_default_timeout(30_000)
        fresh_wire = Wire(fresh)
        open_notebook(fresh, lab, name)
        two_views(fresh, clicked=0)
        assert fresh_wire.take()[1]["module"] == 1
        allow(fresh, 1)
        # The other page hears the kernel too: its view of cell 1 ends there as well.
        page.locator(".jp-Notebook .jp-Cell").nth(1).locator(
            ".acpnb-answer", has_text="turn 1 allowed"
        ).first.wait_for()
    finally:
        context.close()
