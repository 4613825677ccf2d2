"""A `tool_call` or `tool_call_update` applied to the call it names (ACP v1 merge rules).

A field present in the update replaces the old value (`content` and `locations` whole); an
absent one leaves it. Pure: the caller validated the update and bounds the result.
"""

from __future__ import annotations

import json
from typing import Any

from . import schema
from .state import ToolCallPart


def patch_tool_call(
    call: ToolCallPart, model: Any, present: set[str], raw: dict[str, Any] | None = None
) -> None:
    """Patch `call` with the fields of `model` (a validated update) named in `present`, and of
    `raw` (the update as sent) what the SDK's model does not read (`_patch_newer`)."""
    if "title" in present and model.title is not None:
        call.title = model.title
    if "kind" in present and model.kind is not None:
        call.tool_kind = enum_value(model.kind)
        call.stated_kinds.add(call.tool_kind)
    if "status" in present and model.status is not None:
        call.status = enum_value(model.status)
    if "content" in present:
        call.content = [schema.dump(c) for c in model.content or []]
        call.shown_types.update(
            t for t in ("diff", "terminal") if any(c.get("type") == t for c in call.content)
        )
    if "locations" in present:
        call.locations = [schema.dump(loc) for loc in model.locations or []]
    if "raw_input" in present:
        call.raw_input = model.raw_input
    if "raw_output" in present:
        call.raw_output = model.raw_output
    if "field_meta" in present:
        call.meta = model.field_meta
    if raw is not None:
        _patch_newer(call, raw, "content" in present)


def _patch_newer(call: ToolCallPart, raw: dict[str, Any], content: bool) -> None:
    """What ACP added after the SDK the project pins (0.12.1): the tool's `name` (2026-09-17),
    and content that links a session (`{"type": "session", "sessionId"}`, a subagent's)."""
    name = raw.get("name")
    if type(name) is str:
        call.name = name[:200] or None
    items = raw.get("content")
    if content and type(items) is list:
        call.content += [
            {"type": "session", "sessionId": item["sessionId"][:1000]}
            for item in items[:100]
            if type(item) is dict
            and item.get("type") == "session"
            and type(item.get("sessionId")) is str
        ]


def enum_value(x: Any) -> str:
    """An enum member's value, or the thing itself, as text."""
    return str(getattr(x, "value", x))


def input_text(raw: Any) -> str:
    """A tool call's raw input as text, to tell what streamed since the last update."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    return json.dumps(raw, sort_keys=True, ensure_ascii=False)
