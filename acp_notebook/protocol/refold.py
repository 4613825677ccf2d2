"""A recorded turn folded again, as a live turn is: what a replay serves and draws. Pure.

A transcript read from a notebook (a replay, `ACP_NOTEBOOK_REPLAY`) is hostile input: a 25.7 MB
recording of 200,000 parts, drawn as it was read, made a 72.5 MB output. A live turn cannot get
there: the fold keeps at most `Limits` of it (parts, text, tool calls, content items, diffs,
values) and counts what it left out. So a recorded turn is fed through the same fold: each part
becomes the update (or request) that makes it (a message its chunks, a tool call its
`tool_call`, the plan its `plan`), or, for what has no update (a permission, an elicitation, an
error, a raw part), the fold's own way to add it; the result is `finish`ed as a live turn's is,
with the recorded ending (stop reason, error, usage, ids) bounded too. What the limits left out
is told as in a live turn (a warning part, `dropped`), with what the recording says it left out.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .coerce import dicts, integer, mapping, number, opt_text, text
from .elicitation import ElicitationPart
from .fold import SessionFold
from .limits import DEFAULT_LIMITS, DROPPED_NOTE, Limits, bounded, token_counts
from .state import (
    ErrorPart,
    MessagePart,
    PermissionPart,
    PlanPart,
    RawPart,
    ToolCallPart,
    Usage,
    part_from_json,
)
from .turn import TurnResult, finish, session_title

_CHUNKS = {"agent": "agent_message_chunk", "thought": "agent_thought_chunk"}
#: Kinds of what `dropped` may name, and how many: a recording's own counts are kept, bounded
#: (a name is a word: the warning formats it).
_MAX_DROPPED_KINDS = 40
_DROPPED_KIND = re.compile(r"[a-z_]{1,40}")


def refold(transcript: Any, limits: Limits = DEFAULT_LIMITS) -> TurnResult:
    """The turn `transcript` records, within `limits` as a live turn would be; never raises."""
    t = mapping(transcript)
    fold = SessionFold(limits=limits)
    prompt, _ = bounded(dicts(t.get("prompt")), limits.value_chars)
    record = fold.begin_turn(text(t.get("turnId"))[:200], prompt)
    raw_parts = t.get("parts")
    parts = raw_parts if isinstance(raw_parts, list) else []
    # What the live fold left out, as the recording says: told with what this one leaves out.
    for key, value in list(mapping(t.get("dropped")).items())[:_MAX_DROPPED_KINDS]:
        n = integer(value)
        if isinstance(key, str) and _DROPPED_KIND.fullmatch(key) and n is not None and n > 0:
            fold.keep.drop(record, key, n)
    _stand_ins(fold, t, parts)
    for item in parts:
        if not isinstance(item, dict):
            continue
        if record.budget.parts <= 0 and item.get("type") != "message":
            # The fold would only count it: counted here, without validating each of them.
            fold.keep.drop(record, "parts")
            continue
        part = part_from_json(item)
        before = len(record.parts)
        _feed(fold, part)
        if _is_note(part) and record.dropped_note is not None:
            record.dropped_note.part_id = part.part_id[:200]
        elif len(record.parts) == before + 1 and type(record.parts[-1]) is type(part):
            # The part it made keeps the recorded id: an honest recording replays as it was.
            record.parts[-1].part_id = part.part_id[:200]
    fold.end_turn()
    tokens = token_counts(t.get("tokens"), limits)
    output, _ = bounded(t.get("output"), limits.value_chars)
    error = opt_text(t.get("error"))
    result = finish(
        record,
        stop_reason=_short(t.get("stopReason"), 200),
        error=error[: limits.value_chars] if error else None,
        usage=Usage.from_json(t.get("usage")),
        session_id=_short(t.get("sessionId"), 1000),
        agent=_short(t.get("agent"), 1000),
        tokens=tokens,
        output=output,
        output_json=output,
        over_budget=t.get("overBudget") is True,
        title=session_title({"title": t.get("title")}),
        model=_short(t.get("model"), 80),
    )
    terminals, _ = bounded(dicts(t.get("terminals"))[: limits.list_items], limits.value_chars)
    options = t.get("cellOptions")
    success = t.get("success")
    return dataclasses.replace(
        result,
        # As recorded: the replayed turn succeeded or failed as it did then.
        success=success if isinstance(success, bool) else False,
        cost=number(t.get("cost")),
        duration=number(t.get("duration")) or 0.0,
        terminals=tuple(terminals),
        cell_options=text(options)[: limits.value_chars] if isinstance(options, str) else None,
    )


def _stand_ins(fold: SessionFold, t: dict[str, Any], parts: list[Any]) -> None:
    """The top-level thoughts, plan and answer where the parts lack them (`read_turn` draws them
    so): fed first, in the order a turn produces them."""
    kinds = {(p.get("type"), p.get("role")) for p in parts if isinstance(p, dict)}
    if ("message", "thought") not in kinds and isinstance(t.get("thoughts"), str):
        _chunk(fold, "thought", t["thoughts"], None)
    if ("plan", None) not in kinds and isinstance(t.get("plan"), list) and t["plan"]:
        fold.apply({"sessionUpdate": "plan", "entries": t["plan"]})
    if ("message", "agent") not in kinds and isinstance(t.get("text"), str):
        _chunk(fold, "agent", t["text"], None)


def _feed(fold: SessionFold, part: Any) -> None:
    if isinstance(part, MessagePart):
        for run, block in part.pieces():  # each block where it came in the text
            _chunk(fold, part.role, run, part.message_id)
            if block is not None:
                fold.apply(_update(part.role, block, part.message_id))
    elif isinstance(part, ToolCallPart):
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": part.tool_call_id,
            "title": part.title,
            "kind": part.tool_kind,
            "status": part.status,
            "content": part.content,
            "locations": part.locations,
        }
        if part.raw_input is not None:
            update["rawInput"] = part.raw_input
        if part.raw_output is not None:
            update["rawOutput"] = part.raw_output
        fold.apply(update)
    elif isinstance(part, PlanPart):
        fold.apply({"sessionUpdate": "plan", "entries": [e.to_json() for e in part.entries]})
    elif isinstance(part, PermissionPart):
        _permission(fold, part)
    elif isinstance(part, ElicitationPart):
        fold.add_recorded_elicitation(part)
    elif isinstance(part, ErrorPart):
        if not _is_note(part):  # the fold tells the counts again, the recorded ones with them
            fold.add_error(part.message, part.level)
    elif isinstance(part, RawPart):
        fold.add_raw(part.update_kind, part.raw, part.problem)


def _chunk(fold: SessionFold, role: str, body: str, message_id: str | None) -> None:
    if body:
        fold.apply(_update(role, {"type": "text", "text": body}, message_id))


def _update(role: str, block: dict[str, Any], message_id: str | None) -> dict[str, Any]:
    # A role the fold does not give (a hand-made transcript's) is drawn as agent text.
    kind = _CHUNKS.get(role, "user_message_chunk" if role == "user" else _CHUNKS["agent"])
    update: dict[str, Any] = {"sessionUpdate": kind, "content": block}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def _permission(fold: SessionFold, recorded: PermissionPart) -> None:
    known = recorded.tool_call_id in fold.target.tool_calls
    asked = fold.add_permission(
        {"toolCallId": recorded.tool_call_id} if known else None, recorded.options
    )
    if not known:
        asked.title = recorded.title[:200]
    if recorded.outcome != "pending":
        fold.resolve_permission(asked, recorded.option_id, recorded.decided_by or "")
        asked.outcome = recorded.outcome[:40]


def _is_note(part: Any) -> bool:
    """The warning a fold writes of what it left out (`TurnLimits.tell_dropped`)."""
    return isinstance(part, ErrorPart) and part.message.startswith(DROPPED_NOTE)


def _short(value: Any, limit: int) -> str | None:
    return (opt_text(value) or "")[:limit] or None
