"""Regression tests for two ways the fold split what the agent meant as one part (issue 11)."""

from __future__ import annotations

from typing import Any

from acp_notebook.protocol.fold import SessionFold
from acp_notebook.protocol.state import MessagePart, PermissionPart, ToolCallPart
from acp_notebook.protocol.turn import TurnRecord


def _chunk(kind: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def _turn(*updates: dict[str, Any]) -> tuple[SessionFold, TurnRecord]:
    fold = SessionFold()
    record = fold.begin_turn("turn-1", [])
    for update in updates:
        fold.apply(update)
    return fold, record


def _messages(record: TurnRecord) -> list[MessagePart]:
    return [p for p in record.parts if isinstance(p, MessagePart)]


def test_chunks_of_one_message_id_stay_one_message_across_a_thought_and_a_tool_call() -> None:
    _, record = _turn(
        _chunk("agent_message_chunk", "The answer is ", "msg-1"),
        _chunk("agent_thought_chunk", "checking", "th-1"),
        {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Look it up"},
        _chunk("agent_message_chunk", "forty-two.", "msg-1"),
    )
    agent = record.messages("agent")
    assert [m.text for m in agent] == ["The answer is forty-two."]
    assert record.joined("agent") == "The answer is forty-two."
    assert [type(p).__name__ for p in record.parts] == [
        "MessagePart",
        "MessagePart",
        "ToolCallPart",
    ]


def test_a_new_message_id_still_starts_a_new_message() -> None:
    _, record = _turn(
        _chunk("agent_message_chunk", "one", "a"),
        _chunk("agent_message_chunk", "two", "b"),
        _chunk("agent_message_chunk", " more", "a"),
    )
    assert [m.text for m in _messages(record)] == ["one more", "two"]


def test_chunks_without_ids_still_split_at_another_part() -> None:
    _, record = _turn(
        _chunk("agent_message_chunk", "before"),
        _chunk("agent_thought_chunk", "hmm"),
        _chunk("agent_message_chunk", "after"),
    )
    assert [m.text for m in record.messages("agent")] == ["before", "after"]


def test_an_image_chunk_joins_its_message_by_id() -> None:
    image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    _, record = _turn(
        _chunk("agent_message_chunk", "see:", "m"),
        _chunk("agent_thought_chunk", "drawing"),
        {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": image},
    )
    (message,) = record.messages("agent")
    assert message.text == "see:"
    assert [b["type"] for b in message.blocks] == ["image"]


def _ask(fold: SessionFold, call_id: str, title: str, raw_input: Any) -> PermissionPart:
    options = [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]
    tool_call = {"toolCallId": call_id, "title": title, "kind": "execute", "rawInput": raw_input}
    return fold.add_permission(tool_call, options)


def test_a_permission_under_a_placeholder_id_becomes_the_card_of_the_real_call() -> None:
    # fast-agent asks before it announces the call, naming it "pending", then announces it.
    fold, record = _turn()
    asked = _ask(fold, "pending", "shell/run", {"cmd": "ls"})
    fold.resolve_permission(asked, "allow", "user")
    for update in (
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "real-7",
            "title": "shell/run",
            "status": "pending",
            "rawInput": {"cmd": "ls"},
        },
        {"sessionUpdate": "tool_call_update", "toolCallId": "real-7", "status": "completed"},
    ):
        fold.apply(update)
    calls = [p for p in record.parts if isinstance(p, ToolCallPart)]
    assert [(c.tool_call_id, c.status) for c in calls] == [("real-7", "completed")]
    assert list(record.tool_calls) == ["real-7"]
    assert asked.tool_call_id == "real-7"


def test_a_permission_for_an_unannounced_call_that_never_comes_is_shown_alone() -> None:
    fold, record = _turn()
    _ask(fold, "pending", "shell/run", {"cmd": "ls"})
    fold.apply({"sessionUpdate": "tool_call", "toolCallId": "x", "title": "Other", "rawInput": 1})
    calls = {c.tool_call_id: c.title for c in record.tool_calls.values()}
    assert calls == {"pending": "shell/run", "x": "Other"}


def test_a_call_the_agent_updates_under_its_own_id_is_never_re_keyed() -> None:
    # An agent that announces a call only through the permission request, then updates it by
    # that id, owns the id: a later call of the same title is a second call.
    fold, record = _turn()
    _ask(fold, "c1", "Edit a.py", None)
    fold.apply({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"})
    fold.apply({"sessionUpdate": "tool_call", "toolCallId": "c2", "title": "Edit a.py"})
    assert list(record.tool_calls) == ["c1", "c2"]
    assert record.tool_calls["c1"].status == "completed"
