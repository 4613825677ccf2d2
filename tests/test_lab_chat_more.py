"""`%agent chat` in JupyterLab: Stop with a message queued, the chat shown again, two views.

Stop cancels the running turn; a message the user queued behind it was never sent, and goes back
to the input box after what is typed there (its @files attached again), not lost with the turn;
so does one whose @file was still being read at the Stop (it was sent after it, as a new turn).
The demo agent streams at its normal speed (the `lab` fixture): `/slow` takes about 20 s unless
stopped. Screenshots: test-artifacts/lab-chat-*.png.
"""

from __future__ import annotations

from typing import Any

import nbformat
import pytest

from acp_notebook.chat.widget import UNDRAWN
from tests.test_lab import POLL, READY, command, shoot
from tests.test_lab_chat import RECORD, idle, open_nb, run_cell, session_id, started_chat
from tests.test_lab_view import AGENT

# What these tests check is in the notebook each opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page, pytest.mark.timeout(240)]

BOX_VALUE = "() => document.querySelector('.acpnb-chat textarea.acpnb-chat-text').value"


def test_stop_gives_a_queued_message_back_to_the_input_box(page: Any, lab: Any) -> None:
    (lab[2] / "queued-attach.txt").write_text("a file for the queued message\n")
    open_nb(page, lab, "chat-queue.ipynb", "%agent chat -s queue")
    chat, box, turns = started_chat(page)
    box.type("/slow a long story")
    box.press("Enter")
    first = turns.nth(0)
    first.locator(".acpnb-thought, .acpnb-plan").first.wait_for(timeout=60_000)

    # Sent while the story streams: it waits behind it, with a file chosen from the completion.
    box.type("/plan read @queued-at")
    chat.locator(".acpnb-chat-complete").get_by_text("@queued-attach.txt").wait_for()
    box.press("Tab")
    box.press("Enter")
    turns.nth(1).locator(".acpnb-user", has_text="queued-attach.txt").wait_for()
    # Something typed but not sent yet, then Stop.
    box.type("/explain my draft")
    # Still running (it may be asking to edit): Stop is what ends it.
    assert first.get_attribute("data-state") in ("waiting", "streaming", "asking")
    chat.locator("button.acpnb-chat-stop").click()
    first.locator(".acpnb-alert", has_text="Cancelled").wait_for(timeout=20_000)
    # The queued message is back, after the draft; its turn left the log; nothing runs.
    page.wait_for_function(
        polling=POLL,
        expression=f"() => ({BOX_VALUE})().includes('@queued-attach.txt')",
        timeout=20_000,
    )
    assert page.evaluate(BOX_VALUE).rstrip() == "/explain my draft\n\n/plan read @queued-attach.txt"
    page.wait_for_function(
        polling=POLL,
        expression="() => document.querySelectorAll('.acpnb-chat-log .acpnb-turn').length === 1",
        timeout=20_000,
    )
    idle(page)
    shoot(page, "chat-queue-given-back")

    # Sent again: it reaches the agent (its second turn: the queued one never did), file and all.
    sent_again(page, box, turns, "queued-attach.txt")
    assert page.evaluate(BOX_VALUE) == ""


def sent_again(page: Any, box: Any, turns: Any, attached: str) -> None:
    """What was given back, sent again: the session's second turn, the draft and the file."""
    box.press("Enter")
    answer = turns.nth(1).locator(".acpnb-answer", has_text="Demo turn 2")
    answer.wait_for(timeout=60_000)
    idle(page)
    assert f"Attached: {attached}" in answer.inner_text()
    mine = turns.nth(1).locator(".acpnb-user").inner_text()
    assert "my draft" in mine and f"📎 {attached}" in mine, mine


# Run before the message: the chat's @file reads wait until the release cell lets them go.
HOLD_READS = """import threading
from acp_notebook.client import attachments
reading, release = threading.Event(), threading.Event()
unheld = attachments._read_regular
def held(*args):
    reading.set()
    release.wait(30)  # a failed test's held read ends soon
    return unheld(*args)
attachments._read_regular = held
print('reads held')"""
READING = "import asyncio\nprint('reading', await asyncio.to_thread(reading.wait, 60))"
STOP_DISABLED = "() => document.querySelector('button.acpnb-chat-stop').disabled"
RELEASE = "attachments._read_regular = unheld\nrelease.set()\nprint('released')"


def test_stop_gives_back_a_message_whose_file_was_still_being_read(page: Any, lab: Any) -> None:
    """Stop came while the message's @file was read (it was in no turn yet): once read, it goes
    back to the box like a queued message; it was sent after the Stop, as a new turn."""
    (lab[2] / "held-attach.txt").write_text("a file read while the turn is stopped\n")
    open_nb(page, lab, "chat-held.ipynb", "%agent chat -s held", HOLD_READS, READING, RELEASE)
    cells = page.locator(".jp-Notebook .jp-Cell")

    def run(index: int, says: str) -> None:
        run_cell(page, index)
        cells.nth(index).locator(".jp-OutputArea-output", has_text=says).wait_for(timeout=60_000)

    chat, box, turns = started_chat(page)
    run(1, "reads held")
    box.type("/slow a long story")
    box.press("Enter")
    first = turns.nth(0)
    first.locator(".acpnb-thought, .acpnb-plan").first.wait_for(timeout=60_000)
    started_in = session_id(chat)

    # Sent while the story streams, with a file: its read is held, so it is in no turn yet.
    box.type("/plan read @held-at")
    chat.locator(".acpnb-chat-complete").get_by_text("@held-attach.txt").wait_for()
    box.press("Tab")
    box.press("Enter")
    run(2, "reading True")
    box.type("/explain my draft")
    assert first.get_attribute("data-state") in ("waiting", "streaming", "asking")
    chat.locator("button.acpnb-chat-stop").click()
    first.locator(".acpnb-alert", has_text="Cancelled").wait_for(timeout=20_000)
    idle(page)
    # No turn runs, but a message is loading: Stop can still take it back.
    page.wait_for_function(polling=POLL, expression=f"() => !({STOP_DISABLED})()")
    # The stopped turn is over: read now, the message would start a turn at once. It is back.
    run(3, "released")
    page.wait_for_function(
        polling=POLL,
        expression=f"() => ({BOX_VALUE})().includes('@held-attach.txt')",
        timeout=20_000,
    )
    assert page.evaluate(BOX_VALUE).rstrip() == "/explain my draft\n\n/plan read @held-attach.txt"
    assert turns.count() == 1
    idle(page)
    assert turns.count() == 1
    page.wait_for_function(polling=POLL, expression=STOP_DISABLED)  # nothing runs or loads
    shoot(page, "chat-held-given-back")

    # Sent again: the session's second turn (the held message never reached the agent).
    sent_again(page, box, turns, "held-attach.txt")
    assert turns.count() == 2 and session_id(chat) == started_in


def test_the_chat_run_again_shows_the_conversation_so_far(page: Any, lab: Any) -> None:
    open_nb(page, lab, "chat-again.ipynb", "%agent chat -s again")
    run_cell(page, 0)
    box = page.locator(".acpnb-chat textarea.acpnb-chat-text")
    box.wait_for()
    turns = page.locator(".acpnb-chat .acpnb-chat-log .acpnb-turn")
    box.type("/plan the first words")
    box.press("Enter")
    turns.nth(0).locator(".acpnb-answer", has_text="Demo turn 1").wait_for(timeout=60_000)
    idle(page)

    # The same cell again: a new chat on the same session, in place of the first.
    old = box.element_handle()
    run_cell(page, 0)
    page.wait_for_function(
        polling=POLL, expression="(el) => !el.isConnected", arg=old, timeout=60_000
    )
    box.wait_for()
    # It opens with the conversation so far: the user's message and the turn, as they ended.
    first = turns.nth(0)
    first.locator(".acpnb-answer", has_text="Demo turn 1").wait_for(timeout=30_000)
    assert "the first words" in first.locator(".acpnb-user").inner_text()
    assert first.get_attribute("data-state") == "done"
    assert first.locator("button.acpnb-tv-stop").is_hidden()
    shoot(page, "chat-run-again")

    # And goes on: the agent's second turn, after the first, both in the record it saves.
    box.type("/plan the second words")
    box.press("Enter")
    turns.nth(1).locator(".acpnb-answer", has_text="Demo turn 2").wait_for(timeout=60_000)
    assert turns.count() == 2
    page.wait_for_function(
        polling=POLL, expression=f"() => ({RECORD})()?.turns === 2", timeout=30_000
    )
    idle(page)
    command(page, "docmanager:save")
    page.wait_for_function(
        polling=POLL,
        expression="() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
        timeout=30_000,
    )
    nb = nbformat.read(lab[2] / "chat-again.ipynb", as_version=4)
    (html,) = [
        o["data"]["text/html"]
        for o in nb.cells[0].outputs
        if "acpnb-chat-record" in o.get("data", {}).get("text/html", "")
    ]
    assert html.index("the first words") < html.index("the second words"), html[:2000]


def test_a_cells_turn_on_the_chats_session_shows_in_the_chat(page: Any, lab: Any) -> None:
    """A `%%agent -s X` cell run while a chat on X is open: its turn shows in the chat's log as
    the chat's own do (the user's message, the answer), and the chat goes on in that session."""
    open_nb(
        page,
        lab,
        "chat-cell.ipynb",
        f"%agent chat --agent {AGENT} -s shared",
        f"%%agent --agent {AGENT} --session shared\nhello from the cell",
    )
    chat, box, turns = started_chat(page)
    before = session_id(chat)
    run_cell(page, 1)
    first = turns.nth(0)
    first.locator(".acpnb-answer", has_text="echo: hello from the cell").wait_for(timeout=60_000)
    assert "hello from the cell" in first.locator(".acpnb-user").inner_text()
    idle(page)
    box.type("and now from the chat")
    box.press("Enter")
    turns.nth(1).locator(".acpnb-answer", has_text="echo: and now from the chat").wait_for(
        timeout=60_000
    )
    assert turns.count() == 2 and session_id(chat) == before
    # Both in the chat's record, the cell's turn once.
    page.wait_for_function(
        polling=POLL, expression=f"() => ({RECORD})()?.turns === 2", timeout=30_000
    )
    shoot(page, "chat-cell-turn")


SHUT_DOWN = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.shutdown()"


def saved_record(page: Any, lab: Any, name: str) -> str:
    """The chat's record HTML as saved (the page saves the notebook first)."""
    command(page, "docmanager:save")
    page.wait_for_function(
        polling=POLL,
        expression="() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
        timeout=30_000,
    )
    nb = nbformat.read(lab[2] / name, as_version=4)
    (html,) = [
        o["data"]["text/html"]
        for o in nb.cells[0].outputs
        if "acpnb-chat-record" in o.get("data", {}).get("text/html", "")
    ]
    return str(html)


def test_two_views_of_one_chat_keep_an_unfinished_turn_once(page: Any, lab: Any) -> None:
    open_nb(page, lab, "chat-twice.ipynb", "%agent chat -s twice")
    run_cell(page, 0)
    page.locator(".acpnb-chat textarea.acpnb-chat-text").wait_for()
    # The cell's output shown a second time (JupyterLab's "Create New View for Cell Output").
    page.evaluate(
        """async () => { const panel = window.jupyterapp.shell.currentWidget;
        panel.content.activeCellIndex = 0;
        await window.jupyterapp.commands.execute('notebook:create-output-view'); }"""
    )
    page.wait_for_function(
        polling=POLL,
        expression="() => document.querySelectorAll("
        "'.acpnb-chat textarea.acpnb-chat-text').length === 2",
        timeout=30_000,
    )
    box = page.locator(".jp-Notebook .acpnb-chat textarea.acpnb-chat-text")
    box.type("/slow a story told twice")
    box.press("Enter")
    # Both views draw the turn; the kernel goes while it streams.
    page.wait_for_function(
        polling=POLL,
        expression="""() => Array.from(document.querySelectorAll('.acpnb-chat-log .acpnb-tv'))
          .filter((v) => v.querySelector('.acpnb-thought, .acpnb-plan')).length === 2""",
        timeout=60_000,
    )
    page.evaluate(SHUT_DOWN)
    record = page.locator(".jp-Notebook .acpnb-chat-record")
    record.get_by_text("this turn did not finish").first.wait_for(timeout=30_000)
    shoot(page, "chat-two-views-lost")
    html = saved_record(page, lab, "chat-twice.ipynb")
    # One copy of the view (the demo agent quotes the prompt: its words are there twice).
    assert html.count('class="acpnb-turn acpnb-tv ') == 1, html
    assert html.count("this turn did not finish") == 1
    assert record.locator(".acpnb-tv").count() == 1


def test_a_turn_that_ended_before_its_record_arrived_is_kept(page: Any, lab: Any) -> None:
    open_nb(
        page,
        lab,
        "chat-unsaved.ipynb",
        "%agent chat -s unsaved",
        # The page never gets the turn's piece of the record (as if the kernel went first).
        "chat = _\nchat.keeper.add = lambda turn: None\nprint('held back')",
    )
    run_cell(page, 0)
    box = page.locator(".acpnb-chat textarea.acpnb-chat-text")
    box.wait_for()
    run_cell(page, 1)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
    cell.locator(".jp-OutputArea-output", has_text="held back").wait_for()
    box.type("/plan words that ended")
    box.press("Enter")
    turn = page.locator(".acpnb-chat-log .acpnb-turn").nth(0)
    turn.locator(".acpnb-answer", has_text="Demo turn 1").wait_for(timeout=60_000)
    idle(page)
    assert turn.get_attribute("data-state") == "done"
    assert page.evaluate(RECORD)["turns"] == 0
    page.evaluate(SHUT_DOWN)
    # The record keeps the turn as the view showed it: finished, not said to be unfinished.
    record = page.locator(".jp-Notebook .acpnb-chat-record")
    kept = record.locator(".acpnb-tv", has_text="words that ended")
    kept.get_by_text("Demo turn 1").first.wait_for(timeout=30_000)
    assert kept.get_attribute("data-state") == "done"
    assert kept.locator("button").count() == 0
    html = saved_record(page, lab, "chat-unsaved.ipynb")
    assert html.count('class="acpnb-turn acpnb-tv ') == 1 and "did not finish" not in html
    # Its text: the answer's heading, quote and paragraphs on lines of their own (textContent
    # ran them together: "…coding-agent turnwords that ended").
    nb = nbformat.read(lab[2] / "chat-unsaved.ipynb", as_version=4)
    (plain,) = [
        o["data"]["text/plain"]
        for o in nb.cells[0].outputs
        if "acpnb-chat-record" in o.get("data", {}).get("text/html", "")
    ]
    assert "a coding-agent turn\n" in plain and "turnwords" not in plain, plain


def test_a_dead_chat_reads_well_in_an_untrusted_notebook(page: Any, lab: Any) -> None:
    base, token, root = lab
    open_nb(page, lab, "chat-untrusted.ipynb", "%agent chat -s untrusted")
    run_cell(page, 0)
    box = page.locator(".acpnb-chat textarea.acpnb-chat-text")
    box.wait_for()
    box.type("/plan words kept")
    box.press("Enter")
    page.wait_for_function(
        polling=POLL, expression=f"() => ({RECORD})()?.turns === 1", timeout=60_000
    )
    idle(page)
    command(page, "docmanager:save")
    page.wait_for_function(
        polling=POLL,
        expression="() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
        timeout=30_000,
    )
    # Opened elsewhere after an edit: not trusted, so no widget is drawn and no <style> kept.
    nb = nbformat.read(root / "chat-untrusted.ipynb", as_version=4)
    nb.cells[0].source += "\n# edited elsewhere"
    nbformat.write(nb, root / "chat-untrusted-copy.ipynb")
    page.goto(f"{base}/doc/tree/chat-untrusted-copy.ipynb?token={token}&reset")
    page.wait_for_function(polling=POLL, expression=READY, timeout=60_000)
    cell = page.locator(".jp-Notebook .jp-Cell").first
    cell.get_by_text("Demo turn 1").first.wait_for(timeout=60_000)
    assert not page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets[0].model.trusted"
    )
    # The chat's own output is a sentence saying what follows, not a token.
    texts = cell.locator(".jp-OutputArea-output").all_inner_texts()
    assert texts[0].strip() == UNDRAWN, texts[0]
    assert "acpnb-chat-" not in cell.inner_text()
    assert "words kept" in texts[1]
    shoot(page, "chat-untrusted")
