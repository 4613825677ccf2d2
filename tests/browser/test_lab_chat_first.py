"""`%agent chat` in JupyterLab, the first minutes of a person's use (issue 23, item 5).

Sending brings the log down to the message and follows the answer, even after the reader had
scrolled up (scrolling up again stops following, "jump to latest" follows again); a message
keeps its Shift+Enter line breaks, shown, saved and reopened; the chat has one Stop, whatever is
queued, and a queued message shows as queued with a way to take it back; the saved record is
lean (no Markdown copy, the record's compact stylesheet once), a few times its visible text. The
demo agent streams at its normal speed (the `lab` fixture). Screenshots:
test-artifacts/lab-chat-first-*.png.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import nbformat
import pytest

from acp_notebook.chat.record import chat_turns
from acp_notebook.render.style import RECORD_CSS
from tests.browser.test_lab import POLL, command, shoot
from tests.browser.test_lab_chat import FROM_BOTTOM, RECORD, idle, open_nb, run_cell, started_chat
from tests.browser.test_lab_chat_more import BOX_VALUE, SHUT_DOWN
from tests.browser.test_lab_view import AGENT
from tests.kernel.test_saved_size import saved_bytes, visible_text

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

MIME_CHAT = "application/vnd.acp-notebook.chat+json"

# Whether the element `el` is wholly inside the chat log's visible box (give or take a pixel).
IN_VIEW = """(el) => { const log = el.closest('.acpnb-chat-log');
  const a = el.getBoundingClientRect(), b = log.getBoundingClientRect();
  return a.height > 0 && a.top >= b.top - 1 && a.bottom <= b.bottom + 1; }"""
SCROLL_UP = "() => { document.querySelector('.acpnb-chat-log').scrollTop = 0; }"
SCROLL_TOP = "() => document.querySelector('.acpnb-chat-log').scrollTop"


def in_view(page: Any, locator: Any) -> None:
    page.wait_for_function(
        polling=POLL, expression=IN_VIEW, arg=locator.element_handle(), timeout=30_000
    )


def save(page: Any, lab: Any, name: str) -> nbformat.NotebookNode:
    command(page, "docmanager:save")
    page.wait_for_function(
        polling=POLL,
        expression="() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
        timeout=30_000,
    )
    return nbformat.read(lab[2] / name, as_version=4)


def record_of(nb: nbformat.NotebookNode) -> dict[str, Any]:
    (data,) = [o["data"] for o in nb.cells[0].outputs if MIME_CHAT in o.get("data", {})]
    return dict(data)


def test_sending_brings_the_log_down_to_the_message_and_the_answer(page: Any, lab: Any) -> None:
    open_nb(page, lab, "chat-scroll.ipynb", "%agent chat -s scroll")
    chat, box, turns = started_chat(page)
    jump = chat.locator("button.acpnb-chat-latest")
    for n in (1, 2):  # a log taller than its box
        box.type(f"/plan turn {n}")
        box.press("Enter")
        turns.nth(n - 1).locator(".acpnb-answer", has_text=f"Demo turn {n}").wait_for(
            timeout=60_000
        )
        idle(page)
    assert page.evaluate("() => document.querySelector('.acpnb-chat-log').scrollHeight") > (
        page.evaluate("() => document.querySelector('.acpnb-chat-log').clientHeight") + 200
    )

    # Scrolled up to read: the log stays there, and says there is more below.
    page.evaluate(SCROLL_UP)
    jump.wait_for()
    # Sent: the log comes down to the new message, then follows its answer to the end.
    box.type("/plan the third words")
    box.press("Enter")
    third = turns.nth(2)
    mine = third.locator(".acpnb-user", has_text="the third words")
    mine.wait_for()
    in_view(page, mine)
    answer = third.locator(".acpnb-answer", has_text="Demo turn 3")
    answer.wait_for(timeout=60_000)
    idle(page)
    page.wait_for_function(polling=POLL, expression=f"() => ({FROM_BOTTOM})() <= 30")
    jump.wait_for(state="hidden", timeout=10_000)  # hidden on the scroll event that follows
    shoot(page, "chat-first-sent-after-scrolling-up")

    # Scrolled up while a turn streams: it stops following (until "jump to latest").
    box.type("/slow a long story")
    box.press("Enter")
    fourth = turns.nth(3)
    fourth.locator(".acpnb-thought, .acpnb-plan").first.wait_for(timeout=60_000)
    page.evaluate(SCROLL_UP)
    jump.wait_for()
    # More arrives (the plan's next step, the answer): the log stays where the reader put it.
    fourth.locator(".acpnb-plan .acpnb-completed, .acpnb-answer").first.wait_for(timeout=60_000)
    assert page.evaluate(SCROLL_TOP) == 0
    jump.click()
    page.wait_for_function(polling=POLL, expression=f"() => ({FROM_BOTTOM})() <= 30")
    jump.wait_for(state="hidden", timeout=10_000)  # hidden on the scroll event that follows
    chat.locator("button.acpnb-chat-stop").click()
    fourth.locator(".acpnb-alert", has_text="Cancelled").wait_for(timeout=20_000)
    idle(page)
    page.wait_for_function(polling=POLL, expression=f"() => ({FROM_BOTTOM})() <= 30")


def test_a_message_keeps_its_line_breaks_shown_saved_and_reopened(page: Any, lab: Any) -> None:
    open_nb(page, lab, "chat-lines.ipynb", f"%agent chat --agent {AGENT} -s lines")
    _, box, turns = started_chat(page)
    box.type("line one <b>*not bold*</b>")
    box.press("Shift+Enter")
    box.type("line two")
    box.press("Shift+Enter")
    box.press("Shift+Enter")
    box.type("line four")
    said = "line one <b>*not bold*</b>\nline two\n\nline four"
    assert box.input_value() == said
    box.press("Enter")
    turns.nth(0).locator(".acpnb-answer", has_text="echo:").wait_for(timeout=60_000)
    idle(page)
    mine = turns.nth(0).locator(".acpnb-user")
    # Shown as typed, as text: each line on its own, the tags and stars as written.
    assert mine.inner_text().replace("👤 You", "").strip() == said
    assert mine.locator("b, em").count() == 0
    shoot(page, "chat-first-line-breaks")

    # The next message, then the notebook saved: each message with its lines, escaped.
    box.type("again")
    box.press("Shift+Enter")
    box.type("on two lines")
    box.press("Enter")
    turns.nth(1).locator(".acpnb-answer", has_text="echo:").wait_for(timeout=60_000)
    page.wait_for_function(
        polling=POLL, expression=f"() => ({RECORD})()?.turns === 2", timeout=30_000
    )
    idle(page)
    assert turns.nth(1).locator(".acpnb-user").inner_text().endswith("again\non two lines")
    data = record_of(save(page, lab, "chat-lines.ipynb"))
    html = data["text/html"]
    assert "line one &lt;b&gt;*not bold*&lt;/b&gt;<br>line two<br><br>line four" in html
    assert "again<br>on two lines" in html and "<b>*not" not in html
    assert f"You: {said}" in data["text/plain"]
    assert [t["parts"][0]["text"] for t in chat_turns(data[MIME_CHAT])] == [
        said,
        "again\non two lines",
    ]

    # Reopened without its kernel: the record shows the lines as they were typed.
    page.evaluate(SHUT_DOWN)
    page.reload()
    record = page.locator(".jp-Notebook .acpnb-chat-record")
    record.get_by_text("on two lines").first.wait_for(timeout=60_000)
    kept = record.locator(".acpnb-user").first.inner_text()
    assert kept.replace("👤 You", "").strip() == said, kept


# The buttons that say Stop in the chat, as the reader sees them.
STOPS = """() => Array.from(document.querySelectorAll('.acpnb-chat button'))
  .filter((b) => /stop/i.test(b.textContent) && b.offsetParent !== null).length"""


def test_one_stop_whatever_is_queued_and_a_queued_message_can_be_taken_back(
    page: Any, lab: Any
) -> None:
    open_nb(page, lab, "chat-one-stop.ipynb", "%agent chat -s onestop")
    chat, box, turns = started_chat(page)
    box.type("/slow a long story")
    box.press("Enter")
    first = turns.nth(0)
    first.locator(".acpnb-thought, .acpnb-plan").first.wait_for(timeout=60_000)
    assert page.evaluate(STOPS) == 1  # the chat's, not one more in the turn

    # Queued behind it: shown as queued, with a way to take it back; still one Stop.
    box.type("/plan the queued words")
    box.press("Enter")
    queued = turns.nth(1)
    queued.locator(".acpnb-user", has_text="the queued words").wait_for()
    page.wait_for_function(
        polling=POLL,
        expression="() => document.querySelectorAll('.acpnb-chat-log .acpnb-turn')[1]"
        "?.dataset.state === 'queued'",
        timeout=20_000,
    )
    assert "queued" in queued.locator(".acpnb-tv-state").inner_text()
    assert page.evaluate(STOPS) == 1
    shoot(page, "chat-first-queued")
    queued.locator("button.acpnb-tv-takeback").click()
    # Taken back: in the box again, its turn gone from the log; the story goes on.
    page.wait_for_function(
        polling=POLL,
        expression=f"() => ({BOX_VALUE})() === '/plan the queued words'",
        timeout=20_000,
    )
    page.wait_for_function(
        polling=POLL,
        expression="() => document.querySelectorAll('.acpnb-chat-log .acpnb-turn').length === 1",
        timeout=20_000,
    )
    assert first.get_attribute("data-state") in ("waiting", "streaming", "asking")
    assert page.evaluate(STOPS) == 1

    # The one Stop stops the story; the message taken back, sent again, is the next turn.
    chat.locator("button.acpnb-chat-stop").click()
    first.locator(".acpnb-alert", has_text="Cancelled").wait_for(timeout=20_000)
    idle(page)
    box.press("Enter")
    turns.nth(1).locator(".acpnb-answer", has_text="Demo turn 2").wait_for(timeout=60_000)
    idle(page)
    assert turns.count() == 2 and page.evaluate(STOPS) == 1  # disabled, not gone


#: A conversation of about 7,000 visible characters: the demo agent's turns answer each.
MESSAGES = [
    "/plan " + "Please look at the build and tell me why the tests are slow. " * 3,
    "/plan And then?\nWith a second line.\n\nAnd a third paragraph.",
    "/plan " + "What about the docs? " * 5,
    "/plan one more turn about the layers",
    "/plan the last one",
]
#: The saved record, at most: 3x its visible text and 2.5 KB a turn (issue 23), everything counted:
#: the chat's widget output and its record, whose transcripts (a cell's record counts its one
#: apart) are compact JSON strings (chat/record.py, `saved_turn`). It was 38.9 KB of 34.5 KB
#: allowed with them indented; 34.4 KB with them compact and the markup trimmed (the plan's
#: priority badges, each turn's math-off classes the chat's root has).
PER_TURN = 2_500


def by_part(cell: nbformat.NotebookNode) -> str:
    """Where the chat's saved bytes go, as nbformat writes them (for bench/README.md)."""
    record = [o for o in cell.outputs if MIME_CHAT in o.get("data", {})]
    chat = copy.deepcopy(cell)
    chat.outputs = [o for o in cell.outputs if o not in record]
    only = copy.deepcopy(cell)
    only.outputs = record
    envelope = saved_bytes(only, lambda mime: False)
    sizes = {m: saved_bytes(only, lambda x, m=m: x == m) - envelope for m in record[0]["data"]}
    css = len(RECORD_CSS.encode())
    return (
        f"the chat's widget output {saved_bytes(chat):,} B; its record's envelope {envelope:,} B, "
        f"text/html {sizes['text/html']:,} B ({css:,} B of it the stylesheet), text/plain "
        f"{sizes['text/plain']:,} B, the transcripts {sizes[MIME_CHAT]:,} B"
    )


def test_the_saved_chat_is_a_few_times_its_visible_text(page: Any, lab: Any) -> None:
    open_nb(page, lab, "chat-size.ipynb", "%agent chat -s size")
    run_cell(page, 0)
    box = page.locator(".acpnb-chat textarea.acpnb-chat-text")
    box.wait_for()
    for n, message in enumerate(MESSAGES, 1):
        box.fill(message)
        box.press("Enter")
        page.wait_for_function(
            polling=POLL, expression=f"() => ({RECORD})()?.turns === {n}", timeout=60_000
        )
    idle(page)
    nb = save(page, lab, "chat-size.ipynb")
    data = record_of(nb)
    assert "text/markdown" not in data  # no third copy of the text
    visible = len(visible_text(data["text/html"]).encode())
    cell = nb.cells[0]
    saved = saved_bytes(cell)  # the chat's outputs: its widget's and its record
    turns = len(MESSAGES)
    print(
        f"\nchat of {turns} turns: {visible:,} B visible, {saved:,} B saved, "
        f"{saved / visible:.2f}x; allowed {3 * visible + PER_TURN * turns:,} B; {by_part(cell)}"
    )
    assert 6_000 < visible < 8_500, visible
    assert saved <= 3 * visible + PER_TURN * turns, (saved, visible)
    # It reads on: the next message joins the record, which still holds each turn once.
    box.fill("/plan after the save")
    box.press("Enter")
    page.wait_for_function(
        polling=POLL, expression=f"() => ({RECORD})()?.turns === {turns + 1}", timeout=60_000
    )
    idle(page)
    data = record_of(save(page, lab, "chat-size.ipynb"))
    assert data["text/html"].count("data-turn-id=") == turns + 1
    assert "text/markdown" not in data and "after the save" in json.dumps(data[MIME_CHAT])
