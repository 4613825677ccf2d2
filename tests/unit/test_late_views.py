"""The views of what ACP v1 gained late in 2026, from transcripts: subagents (sub-turn cards),
plans by id (Markdown, removed), notices, compaction, the tool's name. Every agent string stays
inert; a malformed or hostile saved part reads without raising, and nests only so deep."""

from __future__ import annotations

import json
from typing import Any

from acp_notebook.protocol.state import READ_DEPTH, RawPart, SubagentPart, part_from_json
from acp_notebook.protocol.turn import read_turn
from acp_notebook.render import render_html, render_markdown, render_text
from acp_notebook.run.printer import TurnPrinter

EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def child(state: str = "running", stop: str | None = None, **extra: Any) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "subagent",
        "id": "s1.card",
        "sessionId": "child-1",
        "title": "Explore " + EVIL,
        "description": "reads " + EVIL,
        "state": state,
        "parts": [
            {"type": "message", "id": "s1.m1", "role": "agent", "text": "child **says**"},
            {
                "type": "tool_call",
                "id": "s1.t2",
                "toolCallId": "k1",
                "title": "Read notes",
                "kind": "read",
                "status": "completed",
                "name": "read_file",
            },
            {
                "type": "permission",
                "id": "s1.p3",
                "toolCallId": "k1",
                "title": "Read notes",
                "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}],
                "outcome": "pending",
            },
        ],
        **extra,
    }
    if stop is not None:
        part["stopReason"] = stop
    return part


def turn(*parts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"turnId": "t1", "parts": list(parts), **extra}


NOTICE = {"type": "notice", "id": "n1", "severity": "warning", "title": "MCP " + EVIL}
COMPACTION = {
    "type": "compaction",
    "id": "c1",
    "compactionId": "x",
    "status": "completed",
    "summary": [{"type": "text", "text": "the *summary* " + EVIL}],
}
MD_PLAN = {"type": "plan", "id": "p", "entries": [], "planId": "p2", "markdown": "# Do " + EVIL}
ITEMS = [{"content": "step one", "priority": "high", "status": "pending"}]
REMOVED = {"type": "plan", "id": "q", "entries": ITEMS, "planId": "p1", "removed": True}


def test_a_subagent_is_a_card_of_its_own_parts_escaped() -> None:
    html = render_html(read_turn(turn(child(canCancel=True)), live=True))
    assert "<script" not in html and "<img" not in html
    assert "class=acpnb-subagent" in html and "Explore &lt;script&gt;" in html
    assert "◌</span> working" in html
    assert "<strong>says</strong>" in html  # the child's answer, Markdown as an answer's
    # Each child part is keyed by its id: the live view puts a request's buttons in it.
    assert "data-part=s1.p3" in html and "data-part=s1.t2" in html
    assert "tool <code>read_file</code>" in html  # the tool's own name in its card


def test_a_finished_subagent_says_how_it_ended() -> None:
    done = render_html(read_turn(turn(child("idle", "end_turn"))))
    assert "✓</span> done" in done
    cancelled = render_html(read_turn(turn(child("idle", "cancelled"))))
    assert "cancelled" in cancelled
    # Still said to be working when the turn was over: not finished.
    assert "not finished" in render_html(read_turn(turn(child("running"))))


def test_notice_compaction_and_plans_in_html() -> None:
    live = render_html(read_turn(turn(NOTICE, COMPACTION, MD_PLAN, REMOVED), live=True))
    assert "<script" not in live and "<img" not in live
    assert "acpnb-alert acpnb-warning" in live and "⚠ Notice: MCP &lt;script&gt;" in live
    assert "class=acpnb-compaction" in live and "<em>summary</em>" in live
    assert "<h1>Do &lt;script&gt;" in live  # the Markdown plan, rendered as an answer is
    assert "step one" not in live  # a removed plan is gone from the live view…
    record = render_html(read_turn(turn(NOTICE, COMPACTION, MD_PLAN, REMOVED)))
    assert "<code>p1</code> <span class=acpnb-muted>removed</span>" in record  # …not the record


def test_an_unknown_severity_is_shown_as_info_with_its_word() -> None:
    odd = {"type": "notice", "id": "n", "severity": "_vendor <b>", "title": "t"}
    html = render_html(read_turn(turn(odd)))
    assert "acpnb-alert acpnb-info" in html and "(_vendor &lt;b&gt;)" in html


def test_text_and_markdown_name_each_kind() -> None:
    record = turn(child("idle", "end_turn"), NOTICE, COMPACTION, MD_PLAN, REMOVED)
    text = render_text(read_turn(record))
    assert "🤖 subagent Explore" in text and "done" in text
    assert "  child **says**" in text and "  ✓ read: Read notes — completed" in text
    assert "⚠ Notice (warning): MCP" in text
    assert "🗜 context compacted" in text
    assert "Plan p2: # Do" in text and "Plan p1: removed" in text
    assert "• a" not in text  # no kind left as "a … part"
    md = render_markdown(read_turn(record))
    assert "<script" not in md and "<img" not in md
    assert "**Subagents**" in md and "🤖 **Explore" in md
    assert "⚠ Notice: **MCP" in md and "context compacted" in md
    assert "**Plan** <code>p1</code> (removed)" in md
    assert "kept in the transcript" not in md


def test_the_legacy_plan_is_not_a_plan_by_id() -> None:
    legacy = {"type": "plan", "id": "l", "entries": [{"content": "old", "status": "pending"}]}
    view = read_turn(turn(legacy, REMOVED))
    assert [e.content for e in view.plan] == ["old"]


def test_the_printer_tells_a_subagent_when_it_ends_whatever_the_snapshots() -> None:
    running = turn(child("running"))
    done = turn(child("idle", "end_turn"), NOTICE, success=True, stopReason="end_turn")
    every, last = TurnPrinter(), TurnPrinter()
    lines = [x.text for t in (running, done) for x in every.feed(t)]
    assert lines == [x.text for x in last.feed(done)]
    assert lines[0].startswith("🤖 subagent: Explore")
    assert "  ↳ ✓ read: Read notes — completed" in lines
    assert any(x.startswith("🤖 subagent: Explore") and x.endswith("— done") for x in lines[1:])
    assert any(x.startswith("⚠ Notice: MCP") for x in lines)


def test_a_saved_subagent_part_reads_whatever_it_holds() -> None:
    for junk in ({}, {"parts": "x"}, {"parts": [1, None, {"type": 3}]}, {"usage": "lots"}):
        part = part_from_json({"type": "subagent", "id": "s", **junk})
        assert isinstance(part, SubagentPart)
    deep: dict[str, Any] = {"type": "subagent", "id": "leaf", "sessionId": "c", "parts": []}
    for n in range(50):  # a hostile notebook nests cards 50 deep: read to a depth, then data
        deep = {"type": "subagent", "id": f"s{n}", "sessionId": "c", "parts": [deep]}
    top = part_from_json(deep)
    depth = 0
    while isinstance(top, SubagentPart):
        (top,) = top.parts
        depth += 1
    assert depth == READ_DEPTH and isinstance(top, RawPart)
    json.dumps(part_from_json(deep).to_json())  # and it writes back as JSON


def test_status_says_what_system_prompt_the_session_was_opened_with() -> None:
    from acp_notebook.notebook.command_docs import status_doc

    shown = status_doc({"session": "s", "system_prompt": "In a <b>notebook</b>."}).bundle()
    assert "system prompt: appended: In a <b>notebook</b>." in shown["text/plain"]
    assert "<b>notebook" not in shown["text/html"]
    assert "system prompt: none" in status_doc({"session": "s"}).bundle()["text/plain"]


def test_status_says_what_a_cell_run_again_does() -> None:
    from acp_notebook.notebook.command_docs import status_doc

    forks = status_doc({"session": "s", "forks": True, "story": 3}).bundle()["text/plain"]
    assert "cells run again: take their turn's place (forks; 3 cells in the story)" in forks
    plain = status_doc({"session": "s", "forks": False, "story": 0}).bundle()["text/plain"]
    assert "cells run again: added at the end (the agent cannot fork)" in plain
    assert "cells run again" not in status_doc({"session": "s"}).bundle()["text/plain"]
