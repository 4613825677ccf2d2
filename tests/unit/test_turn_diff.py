"""The live turn view's kernel side, pure: which messages a turn's changes become (turn_diff).

Transcripts are fed as dicts (the shape `live_transcript` builds), read back like the view does.
"""

from __future__ import annotations

from typing import Any

from acp_notebook.protocol.turn import read_turn
from acp_notebook.render.agentmd import MAX_LIVE_PIECE, MarkdownStream
from acp_notebook.widgets.turn_diff import TurnDiff


def turn(*parts: dict[str, Any], live: bool = True, **extra: Any) -> Any:
    return read_turn(
        {
            "turnId": "t1",
            "agent": "demo",
            "success": None if live else True,
            "stopReason": None if live else "end_turn",
            "parts": list(parts),
            **extra,
        },
        live=live,
    )


def say(pid: str, text: str, role: str = "agent") -> dict[str, Any]:
    return {"type": "message", "id": pid, "role": role, "text": text}


def tool(pid: str, title: str, status: str = "in_progress") -> dict[str, Any]:
    return {"type": "tool_call", "id": pid, "toolCallId": pid, "title": title, "status": status}


def ops_of(ops: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in ops if o["op"] == kind]


def test_streaming_text_goes_as_deltas_then_once_as_html() -> None:
    diff = TurnDiff()
    first = diff.update(turn(say("m1", "Hello")))
    assert ops_of(first, "stream") == [
        {"op": "stream", "id": "m1", "after": "", "role": "agent", "text": "Hello"}
    ]
    assert ops_of(first, "tail")  # the footer, once
    assert ops_of(first, "md") == [
        {"op": "md", "id": "m1", "keep": 0, "add": "<p>Hello</p>", "freeze": 0}
    ]
    second = diff.update(turn(say("m1", "Hello, wor")))
    # The delta, and what changed of its HTML: nothing else.
    assert second == [
        {"op": "append", "id": "m1", "text": ", wor"},
        {"op": "md", "id": "m1", "keep": 8, "add": ", wor</p>", "freeze": 0},
    ]
    assert diff.update(turn(say("m1", "Hello, wor"))) == []  # nothing changed: no message
    # A tool call arrives: the message stops growing. Its final HTML is its Markdown as the
    # page drew it, but for its end: that end, and the page keeps it (no second copy of it).
    third = diff.update(turn(say("m1", "Hello, **world**"), tool("c1", "Read a.txt")))
    assert [o["op"] for o in third[:2]] == ["md", "settle"]
    assert third[0]["keep"] == len("<p>Hello, ")  # what the page's end and the final share
    assert third[0]["add"] == "<strong>world</strong></p>"
    assert third[1] == {"op": "settle", "id": "m1", "md": "Hello, **world**"}
    assert [(o["id"], o["after"]) for o in ops_of(third, "part")] == [("c1", "m1")]


def test_a_part_is_resent_only_when_it_changed() -> None:
    diff = TurnDiff()
    diff.update(turn(tool("c1", "Read a.txt"), tool("c2", "Read b.txt"), say("m1", "x")))
    ops = diff.update(
        turn(tool("c1", "Read a.txt", "completed"), tool("c2", "Read b.txt"), say("m1", "xy"))
    )
    assert [o["id"] for o in ops_of(ops, "part")] == ["c1"]  # c2 did not change
    assert ops_of(ops, "append") == [{"op": "append", "id": "m1", "text": "y"}]


def test_agent_html_is_escaped_and_links_are_not_javascript() -> None:
    diff = TurnDiff()
    hostile = "<img src=x onerror=alert(1)> [click](javascript:alert(1)) $x$"
    ops = diff.update(turn(say("m1", hostile), tool("c1", "<script>alert(1)</script>")))
    html = "".join(o["html"] for o in ops_of(ops, "part"))
    assert "<img" not in html and "<script" not in html
    assert "javascript:" not in html.replace("javascript:alert(1)", "")  # only as escaped text
    assert 'href="javascript' not in html
    # A streaming message is plain text: the page shows it with textContent.
    live = TurnDiff().update(turn(say("m1", hostile)))
    assert ops_of(live, "stream")[0]["text"] == hostile


def test_text_that_does_not_extend_what_was_sent_restarts_the_stream() -> None:
    diff = TurnDiff()
    diff.update(turn(say("m1", "sk-abc")))
    ops = diff.update(turn(say("m1", "••••")))  # a mask recognised a key after all
    assert ops_of(ops, "stream")[0]["text"] == "••••"
    assert not ops_of(ops, "append")


def test_thoughts_stream_and_removed_parts_are_removed() -> None:
    diff = TurnDiff()
    ops = diff.update(turn(say("th", "hmm", role="thought")))
    assert ops_of(ops, "stream")[0]["role"] == "thought"
    ops = diff.update(turn(say("m2", "answer")))
    assert ops_of(ops, "remove") == [{"op": "remove", "id": "th"}]


def test_snapshot_resends_everything_and_the_end_sends_final_html() -> None:
    diff = TurnDiff()
    diff.update(turn(tool("c1", "Read"), say("m1", "Hi")))
    snap = diff.snapshot(turn(tool("c1", "Read"), say("m1", "Hi")))
    assert snap[0] == {"op": "reset"}
    assert {o["op"] for o in snap[1:]} == {"part", "stream", "md", "tail"}
    final = diff.update(turn(tool("c1", "Read"), say("m1", "Hi"), live=False))
    assert ops_of(final, "settle") == [{"op": "settle", "id": "m1"}]  # drawn so: kept
    assert "running" not in ops_of(final, "tail")[0]["html"]


def test_bytes_of_a_long_streamed_answer_stay_near_its_size() -> None:
    diff = TurnDiff()
    text = ""
    for i in range(2000):
        text += f"word{i} "
        diff.update(turn(say("m1", text)))
    diff.update(turn(say("m1", text), live=False))
    # Deltas once, the growing paragraph's HTML as it grows (its new words and `</p>` at each
    # redraw; once as a whole when it outgrows what is drawn live, `MAX_LIVE_PIECE`), the final
    # HTML once: a few times the text, not the ~2000 redraws of it.
    assert diff.bytes < 3 * len(text) + 6 * 2000 + MAX_LIVE_PIECE


def test_an_answer_carries_its_markdown_once_for_the_copy_button() -> None:
    diff = TurnDiff()
    # Streamed, then done: the page holds the very text it streamed, so no second copy is sent.
    diff.update(turn(say("m1", "Costs **$5**")))
    done = ops_of(diff.update(turn(say("m1", "Costs **$5**"), tool("c1", "Read"))), "part")
    assert "md" not in done[0]
    # Arrived whole (never streamed), or changed after streaming: its Markdown goes with it.
    whole = diff.update(
        turn(say("m1", "Costs **$6**"), tool("c1", "Read"), say("m2", "a"), say("m3", "`b`"))
    )
    sent = {o["id"]: o.get("md") for o in ops_of(whole, "part")}
    assert sent == {"m1": "Costs **$6**", "m2": "a"}
    # Thoughts and the user's words have no copy button: no Markdown sent for them.
    diff = TurnDiff()
    ops = diff.update(
        turn(say("t", "hm", role="thought"), say("u", "hi", role="user"), say("m", "x"))
    )
    assert [o.get("md") for o in ops_of(ops, "part")] == [None, None]
    # A snapshot (a page that reconnected) sends every answer's Markdown again.
    snap = diff.snapshot(turn(say("a", "one"), say("b", "two"), tool("c", "Read")))
    assert [o.get("md") for o in ops_of(snap, "part")] == ["one", "two", None]


def test_a_growing_answer_sends_only_the_markdown_the_page_lacks() -> None:
    diff = TurnDiff()
    diff.update(turn(say("m1", "Costs **$5**")))  # streamed: the page holds it
    grown = ops_of(
        diff.update(turn(say("m1", "Costs **$5** and more"), tool("c1", "Read"))), "settle"
    )
    assert (grown[0]["md"], grown[0]["md_from"]) == (" and more", len("Costs **$5**"))
    # Not a continuation of what the page holds: the whole text, no md_from.
    changed = ops_of(diff.update(turn(say("m1", "Other"), tool("c1", "Read"))), "part")
    assert changed[0]["md"] == "Other" and "md_from" not in changed[0]


def test_a_streaming_answer_is_drawn_as_markdown_each_finished_block_sent_once() -> None:
    """The page's HTML, rebuilt from the `md` operations as the page does, is at every update
    the Markdown of the text so far, and at the end the HTML of the final record; a finished
    block's HTML goes once (it is never in an `add` again after it was frozen)."""
    text = "Some **bold** words.\n\n> a quote\n\n- one\n- two\n\n```py\nx = 1\n```\n\nThe end.\n"
    diff = TurnDiff()
    frozen, held, sent = "", "", 0
    for end in [*range(1, len(text), 3), len(text)]:
        for op in ops_of(diff.update(turn(say("m1", text[:end]))), "md"):
            assert op["keep"] <= len(held)
            now = held[: op["keep"]] + op["add"]
            frozen, held = frozen + now[: op["freeze"]], now[op["freeze"] :]
            sent += len(op["add"])
        blocks, tail = MarkdownStream().feed(text[:end])
        assert frozen + held == "".join(blocks) + tail
    assert frozen.startswith("<p>Some <strong>bold</strong> words.</p><blockquote>")
    # At the end, what the page drew is the record's HTML: kept, not sent again.
    assert diff.update(turn(say("m1", text), live=False))[0] == {"op": "settle", "id": "m1"}
    final = TurnDiff().update(turn(say("m1", text), live=False))[0]["html"]
    assert final == f"<div class=acpnb-answer>{frozen + held}</div>"
    assert sent < 2 * len(frozen + held)  # each block about once, not once per update


def page_md(held: tuple[str, str], op: dict[str, Any]) -> tuple[str, str]:
    """The page's (frozen, held) HTML of a streaming message after an `md` operation, as
    turn_view.js's `markdown` applies it."""
    frozen, tail = held
    assert op["keep"] <= len(tail)
    now = tail[: op["keep"]] + op["add"]
    return frozen + now[: op["freeze"]], now[op["freeze"] :]


def test_a_block_that_finishes_without_changing_the_html_still_moves_the_pages_end() -> None:
    """A line end that finishes a block changes no HTML (the growing end drew it so already),
    but the page must fix that block as the kernel does: else the next `keep` counts from
    another start and the page's text garbles."""
    diff = TurnDiff()
    page = ("", "")
    for text in ("para1\n\npara2", "para1\n\npara2\n\n", "para1\n\npara2\n\nmore"):
        for op in ops_of(diff.update(turn(say("m1", text))), "md"):
            page = page_md(page, op)
        blocks, tail = MarkdownStream().feed(text)
        assert "".join(page) == "".join(blocks) + tail


def test_a_thought_settles_with_its_summary_and_a_masked_answer_goes_whole() -> None:
    """A thought's card keeps its drawn text and takes the final summary; an answer whose
    drawn blocks are not the final ones (a key masked in one since) is sent whole as HTML."""
    diff = TurnDiff()
    diff.update(turn(say("t", "I think\n\nso", role="thought")))
    ops = diff.update(turn(say("t", "I think\n\nso", role="thought"), say("m", "x")))
    settle = ops_of(ops, "settle")[0]
    assert settle["id"] == "t" and "Thoughts" in settle["summary"] and "md" not in settle
    assert not [o for o in ops_of(ops, "part") if o["id"] == "t"]
    diff = TurnDiff()
    diff.update(turn(say("m", "key sk-abc here\n\nand more\n\nstill")))
    ops = diff.update(turn(say("m", "key •••• here\n\nand more\n\nstill"), tool("c", "R")))
    assert not ops_of(ops, "settle")
    whole = ops_of(ops, "part")[0]
    assert whole["id"] == "m" and "key •••• here" in whole["html"]
