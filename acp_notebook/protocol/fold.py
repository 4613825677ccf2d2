"""The session fold: `session/update` payloads in, session and turn state out. Pure, no I/O.

Merge rules (ACP v1): chunks append to the current message, and a new `messageId` (or, without
ids, any other part in between) starts a new one; `tool_call_update` patches by id, replacing
`content` and `locations` whole, and creates the call if the id is unknown; `plan`,
`config_option_update` and `available_commands_update` are whole snapshots; in
`session_info_update` an omitted field is unchanged and `null` clears it; usage cost is cumulative.
Kinds newer than the schema are kept as `RawPart`s, never dropped.

Text chunks are the hot path (thousands a turn): they are folded from the raw dict without model
validation. Everything else is validated with the official SDK's schema models, leniently.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from . import schema
from .mutations import Delta, Mutation, PartUpdated, SessionChanged
from .result import TurnRecord
from .state import (
    UNFINISHED,
    ErrorPart,
    MessagePart,
    Part,
    PermissionPart,
    PlanEntry,
    PlanPart,
    RawPart,
    Role,
    ToolCallPart,
    Usage,
)

_CHUNK_ROLES: dict[str, Role] = {
    "agent_message_chunk": "agent",
    "agent_thought_chunk": "thought",
    "user_message_chunk": "user",
}
_CHANNEL = {"agent": "text", "thought": "thought", "user": "user"}
# Updates that change what the user sees of a turn; others (usage, commands...) are ambient.
AMBIENT_KINDS = frozenset({"available_commands_update", "current_mode_update",
                           "config_option_update", "session_info_update", "usage_update"})


class SessionFold:
    """Session-wide state plus the turn being written to.

    Updates that arrive outside a turn (after `session/new`, between turns, late after a cancel)
    go to `ambient`, a record that is never lost; `session/load` replays go to history records.
    """

    def __init__(self, emit: Callable[[Mutation], None] | None = None) -> None:
        self.emit = emit
        self.current_mode_id: str | None = None
        self.modes: list[dict[str, Any]] = []
        self.config_options: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self.info: dict[str, Any] = {}  # title, updatedAt, _meta as last patched
        self.usage: Usage | None = None
        self.history: list[TurnRecord] = []
        self.ambient = TurnRecord(turn_id="ambient")
        self.turn: TurnRecord | None = None
        self.visible_output = False  # since the current turn (or attempt) began
        self._ids = itertools.count(1)
        self._replaying = False

    # -- turn lifecycle -------------------------------------------------------------------------

    @property
    def target(self) -> TurnRecord:
        return self.turn if self.turn is not None else self.ambient

    def begin_turn(self, turn_id: str, prompt: list[dict[str, Any]]) -> TurnRecord:
        self.turn = TurnRecord(turn_id=turn_id, prompt=prompt, usage_at_start=self.usage)
        self.visible_output = False
        return self.turn

    def end_turn(self) -> TurnRecord | None:
        record, self.turn = self.turn, None
        if record is not None:
            self.history.append(record)
        return record

    def begin_replay(self) -> None:
        """`session/load` is about to replay the conversation: fold it into history records."""
        self._replaying = True
        self.turn = None

    def end_replay(self) -> None:
        self._replaying = False
        if self.turn is not None and self.turn.replay:
            self.end_turn()

    def mark_cancelled(self) -> None:
        """After `session/cancel`: unfinished tool calls show as cancelled (late updates apply)."""
        self.mark_unfinished("cancelled")

    def mark_unfinished(self, status: str) -> None:
        """Give the target's unfinished tool calls `status` (`failed` when the agent died)."""
        record = self.target
        for call in record.tool_calls.values():
            if call.status in UNFINISHED:
                call.status = status
                self._updated(call)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    # -- updates ---------------------------------------------------------------------------------

    def apply(self, update: Any) -> None:
        """Fold one `params.update` object. Never raises on bad input: it becomes a `RawPart`."""
        if type(update) is not dict:
            self._raw("?", update, "update is not an object")
            return
        kind = update.get("sessionUpdate")
        role = _CHUNK_ROLES.get(kind) if type(kind) is str else None
        if role is not None:
            content = update.get("content")
            if type(content) is dict and content.get("type") == "text":
                text = content.get("text")
                if type(text) is str:
                    self._chunk(role, text, update.get("messageId"))
                    return
            self._chunk_block(role, update)
            return
        handler = _HANDLERS.get(kind) if type(kind) is str else None
        if handler is None:
            self._raw(str(kind), update, None)
            return
        try:
            handler(self, update)
        except schema.ValidationError as exc:
            self._raw(str(kind), update, schema.describe(exc))

    def _chunk(self, role: Role, text: str, message_id: Any) -> None:
        if self._replaying and role == "user":
            self._replay_user_turn()
        record = self.turn if self.turn is not None else self.ambient
        parts = record.parts
        last = parts[-1] if parts else None
        if (last is None or type(last) is not MessagePart or last.role != role
                or (message_id is not None and last.message_id != message_id)):
            last = MessagePart(self.new_id("m"), role,
                               message_id if type(message_id) is str else None)
            parts.append(last)
            last._buf.write(text)
            if role != "user":
                self.visible_output = True
            if self.emit is not None:
                self.emit(PartUpdated(record.turn_id, last))
            return
        last._buf.write(text)
        if self.emit is not None:
            self.emit(Delta(record.turn_id, last.part_id, _CHANNEL[role], text))  # type: ignore[arg-type]

    def _chunk_block(self, role: Role, update: dict[str, Any]) -> None:
        """A chunk carrying an image, audio or resource: validated, kept as a block."""
        try:
            chunk = schema.validate_update(update)
        except schema.ValidationError as exc:
            self._raw(str(update.get("sessionUpdate")), update, schema.describe(exc))
            return
        block = schema.dump(chunk.content)
        if block.get("type") == "text":  # e.g. annotations made the fast path bail out
            self._chunk(role, block.get("text", ""), update.get("messageId"))
            return
        self._chunk(role, "", update.get("messageId"))
        message = self.target.parts[-1]
        assert isinstance(message, MessagePart)
        message.blocks.append(block)
        self._updated(message)

    def _replay_user_turn(self) -> None:
        """In a replay, each user message begins a new historical turn."""
        last = self.turn.parts[-1] if self.turn is not None and self.turn.parts else None
        if isinstance(last, MessagePart) and last.role == "user":
            return
        if self.turn is not None:
            self.end_turn()
        self.turn = TurnRecord(turn_id=self.new_id("history-"), replay=True)

    # -- tool calls and permissions --------------------------------------------------------------

    def tool_call(self, tool_call_id: str) -> ToolCallPart:
        # An unknown id, in an update or a permission request, creates the call (the spec).
        record = self.target
        call = record.tool_calls.get(tool_call_id)
        if call is None:
            call = ToolCallPart(self.new_id("t"), tool_call_id)
            record.tool_calls[tool_call_id] = call
            record.parts.append(call)
        return call

    def _tool_call(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(update)
        call = self.tool_call(model.tool_call_id)
        _patch_tool_call(call, model, set(model.model_fields_set) | {"title"})
        self.visible_output = True
        self._updated(call)

    def _tool_call_update(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(update)
        call = self.tool_call(model.tool_call_id)
        before = _input_text(call.raw_input)
        _patch_tool_call(call, model, model.model_fields_set)
        self.visible_output = True
        after = _input_text(call.raw_input)
        if after != before and self.emit is not None and after.startswith(before):
            self.emit(Delta(self.target.turn_id, call.part_id, "tool_input", after[len(before):]))
        self._updated(call)

    def add_permission(self, tool_call: Any, options: list[dict[str, Any]]) -> PermissionPart:
        """Record a permission request; its `toolCall` is merged into the tool-call state."""
        title = ""
        call_id = "?"
        if isinstance(tool_call, dict) and isinstance(tool_call.get("toolCallId"), str):
            try:
                model = schema.validate_tool_call_update(tool_call)
            except schema.ValidationError:
                model = None
            call = self.tool_call(tool_call["toolCallId"])
            if model is not None:
                _patch_tool_call(call, model, model.model_fields_set)
            title, call_id = call.title, call.tool_call_id
            self._updated(call)
        part = PermissionPart(self.new_id("p"), call_id, title, options)
        self.target.parts.append(part)
        self.visible_output = True
        self._updated(part)
        return part

    def resolve_permission(self, part: PermissionPart, option_id: str | None, by: str) -> None:
        part.outcome = "selected" if option_id is not None else "cancelled"
        part.option_id = option_id
        part.decided_by = by
        self._updated(part)

    # -- snapshots -------------------------------------------------------------------------------

    def _plan(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(update)
        record = self.target
        entries = [PlanEntry(e.content, _value(e.priority), _value(e.status))
                   for e in model.entries]
        if record.plan is None:
            record.plan = PlanPart(self.new_id("plan"))
            record.parts.append(record.plan)
        record.plan.entries = entries
        self.visible_output = True
        self._updated(record.plan)

    def _commands(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(update)
        self.commands = [schema.dump(c) for c in model.available_commands]
        self._changed("commands")

    def _mode(self, update: dict[str, Any]) -> None:
        if "currentModeId" not in update and isinstance(update.get("modeId"), str):
            # The docs' example says modeId; the schema says currentModeId. Accept both.
            update = {**update, "currentModeId": update["modeId"]}
        model = schema.validate_update(update)
        self.current_mode_id = model.current_mode_id
        self._changed("mode")

    def _config(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(update)
        self.config_options = [schema.dump(o) for o in model.config_options]
        self._changed("config_options")

    def _info(self, update: dict[str, Any]) -> None:
        schema.validate_update(update)
        for key in ("title", "updatedAt", "_meta"):
            if key in update:
                if update[key] is None:
                    self.info.pop(key, None)
                else:
                    self.info[key] = update[key]
        self._changed("info")

    def _usage(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(update)
        cost = model.cost
        self.usage = Usage(model.used, model.size,
                           cost.amount if cost is not None else None,
                           cost.currency if cost is not None else None)
        self._changed("usage")

    def set_modes(self, modes: Any) -> None:
        """From a session/new, load or resume response (`modes` is optional legacy state)."""
        if isinstance(modes, dict):
            self.modes = [m for m in modes.get("availableModes") or [] if isinstance(m, dict)]
            if isinstance(modes.get("currentModeId"), str):
                self.current_mode_id = modes["currentModeId"]
            self._changed("mode")

    def set_config_options(self, options: Any) -> None:
        if isinstance(options, list):
            self.config_options = [o for o in options if isinstance(o, dict)]
            self._changed("config_options")

    # -- errors and unknowns ---------------------------------------------------------------------

    def add_error(self, message: str, level: str = "error") -> ErrorPart:
        part = ErrorPart(self.new_id("e"), message, "warning" if level == "warning" else "error")
        self.target.parts.append(part)
        self._updated(part)
        return part

    def _raw(self, kind: str, update: Any, problem: str | None) -> None:
        part = RawPart(self.new_id("r"), kind, update, problem)
        self.target.parts.append(part)
        self._updated(part)

    def _updated(self, part: Part) -> None:
        if self.emit is not None:
            self.emit(PartUpdated(self.target.turn_id, part))

    def _changed(self, name: str) -> None:
        if self.emit is not None:
            self.emit(SessionChanged(name))


def _patch_tool_call(call: ToolCallPart, model: Any, present: set[str]) -> None:
    # A present field replaces the old value (content and locations whole); absent = unchanged.
    if "title" in present and model.title is not None:
        call.title = model.title
    if "kind" in present and model.kind is not None:
        call.tool_kind = _value(model.kind)
    if "status" in present and model.status is not None:
        call.status = _value(model.status)
    if "content" in present:
        call.content = [schema.dump(c) for c in model.content or []]
    if "locations" in present:
        call.locations = [schema.dump(loc) for loc in model.locations or []]
    if "raw_input" in present:
        call.raw_input = model.raw_input
    if "raw_output" in present:
        call.raw_output = model.raw_output
    if "field_meta" in present:
        call.meta = model.field_meta


def _value(x: Any) -> str:
    return str(getattr(x, "value", x))


def _input_text(raw: Any) -> str:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    return json.dumps(raw, sort_keys=True, ensure_ascii=False)


_HANDLERS: dict[str, Callable[[SessionFold, dict[str, Any]], None]] = {
    "tool_call": SessionFold._tool_call,
    "tool_call_update": SessionFold._tool_call_update,
    "plan": SessionFold._plan,
    "available_commands_update": SessionFold._commands,
    "current_mode_update": SessionFold._mode,
    "config_option_update": SessionFold._config,
    "session_info_update": SessionFold._info,
    "usage_update": SessionFold._usage,
}
