"""`%agent chat` in JupyterLab, as a person uses it: type, Enter, Shift+Enter, Stop, send again.

JupyterLab sends widget messages over kernel subshells (another thread, another event loop);
before the chat handed its clicks to the kernel's loop, Stop mid-turn showed "... is bound to a
different event loop" and the agent's connection, and with it the session, was lost. The demo
agent streams at its normal speed (the `lab` fixture): `/slow` takes about 20 s unless stopped,
`/plan` a few seconds and asks no permission. Screenshots: test-artifacts/lab-chat-*.png.
"""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any

import nbformat
import pytest

from acp_notebook.chat.record import chat_turns
from tests.browser.test_lab import POLL, READY, command, open_notebook, shoot
from tests.nb_util import new_nb

# What these tests check is in the notebook each opens, not in a fresh browser context (each
# test loads JupyterLab again where its subject is a reopened notebook).
pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

RUN_CELL = """(index) => { const panel = window.jupyterapp.shell.currentWidget;
  panel.content.activeCellIndex = index;
  window.jupyterapp.commands.execute('notebook:run-cell'); }"""

# How far the chat's log is from its bottom, in pixels.
FROM_BOTTOM = """() => { const log = document.querySelector('.acpnb-chat-log');
  return log.scrollHeight - log.scrollTop - log.clientHeight; }"""


def open_nb(page: Any, lab: Any, name: str, *cells: str) -> None:
    nbformat.write(new_nb(*cells), lab[2] / name)
    open_notebook(page, lab, name)


def run_cell(page: Any, index: int) -> None:
    page.evaluate(RUN_CELL, index)  # not awaited: see test_lab.open_and_run


def started_chat(page: Any) -> tuple[Any, Any, Any]:
    """Runs the notebook's first cell (a `%agent chat`): the chat, its input box (once shown)
    and the locator of its turns."""
    run_cell(page, 0)
    chat = page.locator(".acpnb-chat")
    box = chat.locator("textarea.acpnb-chat-text")
    box.wait_for()
    return chat, box, chat.locator(".acpnb-chat-log .acpnb-turn")


def session_id(chat: Any) -> str:
    status = chat.locator(".widget-html", has_text="session").last.inner_text()
    found = re.search(r"session (\S+)", status)
    assert found, status
    return found[1]


def idle(page: Any) -> None:
    """No turn of the chat runs (its view and the chat's status say so)."""
    page.wait_for_function(
        polling=POLL,
        expression="() => !document.querySelector('.acpnb-chat .acpnb-running')",
        timeout=60_000,
    )


def said_once(turn: Any, end: str) -> None:
    """A finished turn's footer says how it ended and how long it took once, not twice."""
    footer = turn.locator("footer").inner_text()
    assert len(re.findall(rf"\b{end}\b", footer)) == 1, footer
    assert len(re.findall(r"\d\.\d\s*s\b", footer)) == 1, footer


def test_chat_enter_sends_stop_cancels_and_the_session_goes_on(page: Any, lab: Any) -> None:
    open_nb(
        page,
        lab,
        "chat.ipynb",
        "%agent chat -s c",
        "%%agent --session c --out after\n/plan from a cell",
        "print('cell session', after.session_id)",
    )
    chat, box, turns = started_chat(page)
    send = chat.locator("button.acpnb-chat-send")

    # Empty input cannot be sent: the button is off and Enter does nothing.
    assert send.is_disabled()
    box.press("Enter")
    box.fill("   ")
    assert send.is_disabled()
    box.press("Enter")
    assert turns.count() == 0 and box.input_value() == "   "

    # Shift+Enter is a newline (not JupyterLab's run-cell); Enter sends.
    box.fill("")
    box.type("/plan first line")
    box.press("Shift+Enter")
    box.type("second line")
    assert box.input_value() == "/plan first line\nsecond line"
    assert send.is_enabled()
    box.press("Enter")
    first = turns.nth(0)
    first.locator(".acpnb-user", has_text="second line").wait_for()  # the user's own message
    assert "first line" in first.locator(".acpnb-user").inner_text()
    assert box.input_value() == ""
    first.locator(".acpnb-answer", has_text="Demo turn 1").wait_for(timeout=60_000)
    assert (
        page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea-output").count() == 0
    )
    started_in = session_id(chat)
    idle(page)
    said_once(first, "done")
    shoot(page, "chat-answer")

    # A long turn, stopped mid-way: it ends as cancelled, and nothing went wrong.
    box.type("/slow tell me a long story")
    box.press("Enter")
    second = turns.nth(1)
    second.locator(".acpnb-thought, .acpnb-plan").first.wait_for()  # something streamed
    stop = chat.locator("button.acpnb-chat-stop")  # the chat's (each turn has its own too)
    assert stop.is_enabled()
    stop.click()
    second.locator(".acpnb-alert", has_text="Cancelled").wait_for(timeout=20_000)
    idle(page)
    said_once(second, "cancelled")
    shoot(page, "chat-stopped")
    assert page.get_by_text("different event loop").count() == 0
    assert (
        page.locator(".jp-Notebook [data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    )

    # The next message continues the same session.
    box.type("/plan again")
    box.press("Enter")
    third = turns.nth(2)
    third.locator(".acpnb-user", has_text="again").wait_for()
    third.locator(".acpnb-answer", has_text="Demo turn 3").wait_for(timeout=60_000)
    assert session_id(chat) == started_in
    # The log followed the new output down.
    assert page.evaluate(FROM_BOTTOM) <= 30

    # Scrolled up by the user, then a message sent: the log comes down to it and its answer
    # (scrolling up while a turn streams: tests/browser/test_lab_chat_first.py).
    page.evaluate("() => { document.querySelector('.acpnb-chat-log').scrollTop = 0; }")
    box.type("/plan fourth")
    box.press("Enter")
    turns.nth(3).locator(".acpnb-answer", has_text="Demo turn 4").wait_for(timeout=60_000)
    idle(page)
    page.wait_for_function(polling=POLL, expression=f"() => ({FROM_BOTTOM})() <= 30")
    shoot(page, "chat")

    # And a cell on the same --session name continues it too.
    run_cell(page, 1)
    page.locator(".jp-Notebook .jp-Cell").nth(1).locator(
        ".acpnb-answer", has_text="Demo turn 5"
    ).wait_for(timeout=60_000)
    run_cell(page, 2)
    said = page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-OutputArea-output")
    said.filter(has_text="cell session").wait_for()
    assert said.inner_text().split()[-1] == started_in
    assert page.get_by_text("different event loop").count() == 0


WIDGET = "application/vnd.jupyter.widget-view+json"
MIME_CHAT = "application/vnd.acp-notebook.chat+json"


def test_chat_menus_completion_attachment_and_the_saved_conversation(page: Any, lab: Any) -> None:
    root = lab[2]
    (root / "chat-attach.txt").write_text("a file for the chat\n")
    open_nb(page, lab, "chat-more.ipynb", "%agent chat -s more")
    chat, box, turns = started_chat(page)

    # The demo agent offers modes and a model: a menu each, and a choice reaches the agent.
    mode = chat.locator(".acpnb-chat-picker-mode select")
    model = chat.locator(".acpnb-chat-picker-config", has_text="Model").locator("select")
    mode.wait_for()
    assert mode.locator("option").all_inner_texts() == ["Ask", "Code"]
    mode.select_option(label="Ask")
    model.select_option(label="Demo Thorough")
    status = chat.locator(".widget-html", has_text="session").last
    page.wait_for_function(
        polling=POLL,
        expression="() => /mode ask/.test(document.querySelector('.acpnb-chat').innerText)",
        timeout=20_000,
    )
    assert "mode ask" in status.inner_text()

    # `/` lists the agent's commands with their descriptions; Escape closes, Enter inserts.
    listing = chat.locator(".acpnb-chat-complete")
    box.click()
    box.type("/")
    listing.wait_for()
    assert listing.get_by_text("Only make a plan, run nothing").count() == 1
    assert "/slow" in listing.inner_text()
    shoot(page, "chat-commands")
    box.press("Escape")
    assert listing.is_hidden() and box.input_value() == "/"
    box.type("pl")
    listing.wait_for()
    assert listing.locator(".acpnb-chat-item").all_inner_texts()[0].startswith("/plan")
    box.press("Enter")
    assert box.input_value() == "/plan " and listing.is_hidden()
    assert turns.count() == 0  # Enter chose the command; it sent nothing

    # `@` lists the workspace's files; ArrowDown/Tab choose one, attached when sent.
    box.type("read @chat-att")
    listing.get_by_text("@chat-attach.txt").wait_for()
    shoot(page, "chat-files")
    box.press("Tab")
    assert box.input_value() == "/plan read @chat-attach.txt "
    box.press("Enter")
    answer = turns.nth(0).locator(".acpnb-answer", has_text="Demo turn 1")
    answer.wait_for(timeout=60_000)
    idle(page)
    said = answer.inner_text()
    assert "Attached: chat-attach.txt" in said, said  # a file part, not only text
    # The user's message names the file by its workspace path, not by this machine's.
    mine = turns.nth(0).locator(".acpnb-user").inner_text()
    assert "chat-attach.txt" in mine and "file:" not in mine and str(root) not in mine, mine
    assert "mode ask" in said and "demo-thorough" in said, said
    # While the chat is live its record (the next output) is hidden: no second copy.
    record = page.locator(".jp-Notebook .acpnb-chat-record")
    assert record.count() == 1 and record.is_hidden()
    shoot(page, "chat-attached")

    # Back to Code mode, a turn that edits asks first: the buttons are inside its card.
    mode.select_option(label="Code")
    page.wait_for_function(
        polling=POLL,
        expression="() => /mode code/.test(document.querySelector('.acpnb-chat').innerText)",
        timeout=20_000,
    )
    box.type("please add a line to the notes")
    box.press("Enter")
    card = turns.nth(1).locator(".acpnb-perm")
    # The demo agent's name for it (the button reads as the agent names the option).
    allow = card.get_by_role("button", name="Allow", exact=True)
    allow.wait_for(timeout=60_000)
    # The log followed the turn down to the question (nobody scrolled it up).
    page.wait_for_function(polling=POLL, expression=f"() => ({FROM_BOTTOM})() <= 30", timeout=5_000)
    shoot(page, "chat-permission")
    allow.click()
    turns.nth(1).locator(".acpnb-answer", has_text="Demo turn 2").wait_for(timeout=60_000)
    idle(page)
    assert "mode code" in turns.nth(1).locator(".acpnb-answer").inner_text()

    # The kernel shuts down mid-turn: the dead chat leaves its place to the conversation's
    # record, which keeps what the unfinished turn showed and says it did not finish.
    box.type("/slow a story cut short")
    box.press("Enter")
    turns.nth(2).locator(".acpnb-thought, .acpnb-plan").first.wait_for(timeout=60_000)
    page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.shutdown()"
    )
    record.get_by_text("Demo turn 1").first.wait_for(timeout=30_000)
    assert "read @chat-attach.txt" in record.inner_text()
    cut = record.locator(".acpnb-tv", has_text="a story cut short")
    assert cut.get_by_text("this turn did not finish").count() == 1
    assert cut.locator("button, .acpnb-running").count() == 0
    cut.scroll_into_view_if_needed()
    shoot(page, "chat-lost-mid-turn")
    save_and_check(page, lab, "chat-more.ipynb")
    page.reload()
    reopened = page.locator(".jp-Notebook .acpnb-chat-record")
    reopened.get_by_text("Demo turn 1").first.wait_for(timeout=60_000)
    assert "read @chat-attach.txt" in reopened.inner_text()
    assert "a story cut short" in reopened.inner_text()
    assert "this turn did not finish" in reopened.inner_text()
    assert page.get_by_text("model not found").count() == 0
    shoot(page, "chat-reopened")


def save_and_check(page: Any, lab: Any, name: str) -> None:
    """Saved: no widget output left, the conversation's record in the cell, once."""
    command(page, "docmanager:save")
    page.wait_for_function(
        polling=POLL,
        expression="() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
        timeout=30_000,
    )
    nb = nbformat.read(lab[2] / name, as_version=4)
    bundles = [o.get("data", {}) for o in nb.cells[0].outputs]
    assert not any(WIDGET in b for b in bundles), bundles
    html = [b["text/html"] for b in bundles if "acpnb-chat-record" in b.get("text/html", "")]
    assert len(html) == 1 and html[0].count("<style>") == 1
    assert "Demo turn 1" in html[0] and "Demo turn 2" in html[0]
    # An `@file` is saved as its workspace path: no path of this machine in the notebook.
    (chat,) = [b[MIME_CHAT] for b in bundles if MIME_CHAT in b]
    mine = json.dumps([turn["parts"][0] for turn in chat_turns(chat)])
    assert "chat-attach.txt" in mine and "file:" not in mine and str(lab[2]) not in mine


# The chat's record in the page's notebook model: its turns and its size (JSON characters).
RECORD = """() => { const cells = window.jupyterapp.shell.currentWidget.context.model.cells;
  for (const cell of cells) for (let i = 0; i < cell.outputs.length; i++) {
    const data = cell.outputs.get(i).data;
    if (data['MIME']) return {turns: data['MIME'].turns.length, size: JSON.stringify(data).length};
  }
  return null; }""".replace("MIME", MIME_CHAT)


def test_a_turn_sends_what_it_adds_and_the_chat_reopens_without_its_kernel(
    page: Any, lab: Any
) -> None:
    base, token, root = lab
    record_bytes = [0]

    def on_socket(ws: Any) -> None:
        def seen(payload: Any) -> None:
            raw = payload if isinstance(payload, bytes) else payload.encode()
            # The record whole (a display update) or a turn's piece (a message to the chat).
            if (b'"update_display_data"' in raw and b"acpnb-chat-record" in raw) or (
                b'"comm_msg"' in raw and b'"pieces"' in raw
            ):
                record_bytes[0] += len(raw)

        ws.on("framereceived", seen)

    page.on("websocket", on_socket)
    open_nb(page, lab, "chat-long.ipynb", "%agent chat -s long")
    run_cell(page, 0)
    box = page.locator(".acpnb-chat textarea.acpnb-chat-text")
    box.wait_for()
    sent, added, size = [], [], 0
    for n in range(1, 5):
        before = record_bytes[0]
        box.type(f"/plan step {n}")
        box.press("Enter")
        # The turn is in the record the page holds (what it will save).
        page.wait_for_function(
            polling=POLL, expression=f"() => ({RECORD})()?.turns === {n}", timeout=60_000
        )
        record = page.evaluate(RECORD)
        sent.append(record_bytes[0] - before)
        added.append(record["size"] - size)
        size = record["size"]
    print(f"record bytes sent per turn: {sent}; record characters added per turn: {added}")
    # A turn costs what it adds to the record, not the whole conversation again (before: the
    # fourth turn sent the four turns' records).
    for n in range(1, 4):
        assert sent[n] <= 1.5 * added[n] + 2_000, (sent, added)
    assert sent[3] <= 1.3 * sent[1], sent
    page.remove_listener("websocket", on_socket)  # the page goes on to other tests
    idle(page)

    # Saved while the chat is live: the widget's output and the record are in the file.
    command(page, "docmanager:save")
    page.wait_for_function(
        polling=POLL,
        expression="() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
        timeout=30_000,
    )
    nb = nbformat.read(root / "chat-long.ipynb", as_version=4)
    bundles = [o.get("data", {}) for o in nb.cells[0].outputs]
    assert any(WIDGET in b for b in bundles)
    assert [len(b[MIME_CHAT]["turns"]) for b in bundles if MIME_CHAT in b] == [4]
    # The page is left, then the kernel is lost while nobody looks; the notebook is reopened.
    page.goto("about:blank")
    auth = {"Authorization": f"token {token}"}
    with urllib.request.urlopen(urllib.request.Request(f"{base}/api/sessions", headers=auth)) as r:
        (session,) = [s for s in json.load(r) if s["path"].endswith("chat-long.ipynb")]
    urllib.request.urlopen(
        urllib.request.Request(
            f"{base}/api/sessions/{session['id']}", headers=auth, method="DELETE"
        ),
        timeout=30,
    ).close()
    page.goto(f"{base}/doc/tree/chat-long.ipynb?token={token}&reset")
    page.wait_for_function(polling=POLL, expression=READY, timeout=60_000)
    record = page.locator(".jp-Notebook .acpnb-chat-record")
    record.get_by_text("Demo turn 4").first.wait_for(timeout=60_000)
    assert record.is_visible()
    # The widget cannot be drawn (its model died with the kernel), and that is not shown.
    error = page.get_by_text("model not found")
    error.wait_for(state="attached", timeout=30_000)
    assert not error.is_visible()
    shoot(page, "chat-reopened-lost")
