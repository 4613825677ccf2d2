"""The session fold: `session/update` payloads in, session and turn state out. Pure, no I/O.

Merge rules (ACP v1): chunks append to the current message; a chunk with a `messageId` joins
the message of that id even when a thought or a tool call came in between, and a new id (or,
without ids, any other part in between) starts a new one; `tool_call_update` patches by id,
replacing `content` and `locations` whole, and creates the call if the id is unknown; `plan`,
`config_option_update` and `available_commands_update` are whole snapshots; in
`session_info_update` an omitted field is unchanged and `null` clears it; usage cost is cumulative.
Kinds newer than the schema are kept as `RawPart`s, never dropped.

Text chunks are the hot path (thousands a turn): they are folded from the raw dict without model
validation. Everything else is validated with the official SDK's schema models, leniently.

Everything kept is bounded (`Limits`): parts, text, tool calls, content items, diffs, plan entries
and any other value per turn; what is left out is counted in the record's `dropped` and told in a
warning part, the turn's first.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable
from typing import Any

from ..errors import ElicitationError
from . import elicitation, schema, subagents
from .elicitation import ElicitationPart
from .limits import DEFAULT_LIMITS, Budget, Limits, TurnLimits, count, cut_content, excess
from .mutations import Delta, Mutation, PartUpdated, SessionChanged
from .part_writer import WRITTEN, PartWriter
from .session_facts import SessionFacts
from .state import (
    UNFINISHED,
    ErrorPart,
    MessagePart,
    Part,
    PermissionPart,
    RawPart,
    Role,
    ToolCallPart,
)
from .tool_patch import input_text, patch_tool_call
from .turn import TurnRecord

_CHUNK_ROLES: dict[str, Role] = {
    "agent_message_chunk": "agent",
    "agent_thought_chunk": "thought",
    "user_message_chunk": "user",
}
_CHANNEL = {"agent": "text", "thought": "thought", "user": "user"}


class SessionFold:
    """Session-wide state plus the turn being written to; `emit` (if set) hears every change.

    Updates that arrive outside a turn (after `session/new`, between turns, late after a cancel)
    go to `ambient`, a record that is never lost; `session/load` replays go to history records.
    """

    def __init__(
        self,
        emit: Callable[[Mutation], None] | None = None,
        limits: Limits = DEFAULT_LIMITS,
        id_prefix: str = "",  # a subagent's fold: part ids of its own (`subagents.py`)
    ) -> None:
        self.emit = emit
        self.limits = limits
        self.facts = SessionFacts(limits, self._changed)
        self.keep: TurnLimits[TurnRecord] = TurnLimits(limits, self.new_id, self._updated_in)
        self.history: list[TurnRecord] = []
        self.ambient = TurnRecord(turn_id="ambient", budget=Budget.ambient(limits))
        self.turn: TurnRecord | None = None
        self.visible_output = False  # since the current turn (or attempt) began
        self._ids = itertools.count(1)
        self._prefix = id_prefix
        #: How the later kinds' handlers (`part_writer.WRITTEN`) add parts to the record.
        self.writer = PartWriter(self)
        #: The subagents announced on this session (each folded by a `SessionFold` of its own).
        self.children = subagents.Subagents(self.writer, self.make_child, limits.subagents)
        #: The tool calls the client made itself (`SessionFold.client_call`), by id, and the
        #: record each is in. Ownership is kept here, not read from the id: whatever the agent
        #: sends about one of these ids is refused (`refused`).
        self._client_calls: dict[str, TurnRecord] = {}
        self._refusals_told: set[str] = set()
        self._replaying = False
        self._replay_budget = Budget.of(limits)  # one turn's worth for a whole replay

    # -- turn lifecycle -------------------------------------------------------------------------

    @property
    def target(self) -> TurnRecord:
        return self.turn if self.turn is not None else self.ambient

    def begin_turn(self, turn_id: str, prompt: list[dict[str, Any]]) -> TurnRecord:
        self.turn = TurnRecord(
            turn_id=turn_id,
            prompt=prompt,
            usage_at_start=self.facts.usage,
            budget=Budget.of(self.limits),
        )
        self.visible_output = False
        return self.turn

    def end_turn(self) -> TurnRecord | None:
        record, self.turn = self.turn, None
        if record is not None:
            self.keep.tell_dropped(record)
            self.history.append(record)
        return record

    def begin_replay(self) -> None:
        """`session/load` is about to replay the conversation: fold it into history records."""
        self._replaying = True
        self.turn = None
        self._replay_budget = Budget.of(self.limits)

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
        return f"{self._prefix}{prefix}{next(self._ids)}"

    def make_child(
        self, prefix: str, parent: subagents.Subagents[SessionFold], emit: Callable[[object], None]
    ) -> SessionFold:
        """The fold of a subagent announced on this session: its own ids, smaller limits."""
        child = SessionFold(emit, self.limits.for_child(), prefix)
        child.children = parent.nested(child.writer, child.make_child)
        return child

    # -- tool calls ------------------------------------------------------------------------------

    def tool_call(self, tool_call_id: str) -> ToolCallPart:
        """The call with this id; an unknown id, in an update or a permission request, creates
        it (the spec). Past the limits, a call that is in no record (its updates are dropped)."""
        record = self.target
        call = record.tool_calls.get(tool_call_id)
        if call is None:
            call = ToolCallPart(self.new_id("t"), tool_call_id)
            if len(record.tool_calls) >= self.limits.tool_calls or record.budget.parts <= 0:
                self.keep.drop(record, "tool_calls")
                return call
            record.budget.parts -= 1
            record.tool_calls[tool_call_id] = call
            record.parts.append(call)
        return call

    def _kept(self, call: ToolCallPart) -> bool:
        return self.target.tool_calls.get(call.tool_call_id) is call

    def refused(self, what: str, tool_call_id: Any) -> bool:
        """Whether `tool_call_id` names a tool call of the client's own, which the agent may
        not change nor ask about (its `what` is then refused, and the turn says so, once per
        call). What the person is shown and asked about is what the client will do."""
        if type(tool_call_id) is not str or tool_call_id not in self._client_calls:
            return False
        if tool_call_id not in self._refusals_told:
            self._refusals_told.add(tool_call_id)
            self.add_error(
                f"the agent sent a {what[:40]} for a tool call of the client's own "
                f"({tool_call_id}): refused, its card shows only what the client did",
                "warning",
            )
        return True

    # -- errors and unknowns ---------------------------------------------------------------------

    def add_error(self, message: str, level: str = "error") -> ErrorPart:
        """Record an error (or warning); past the parts limit it is counted, not kept."""
        record = self.target
        part = ErrorPart(
            self.new_id("e"),
            message[: self.limits.value_chars],
            "warning" if level == "warning" else "error",
        )
        if record.budget.parts <= 0:
            self.keep.drop(record, "errors")
            return part
        record.budget.parts -= 1
        record.parts.append(part)
        self._updated(part)
        return part

    def add_raw(self, kind: str, update: Any, problem: str | None = None) -> None:
        """Keep what could not be folded as a `RawPart`, bounded (a recorded one, read again)."""
        self._raw(kind, update, problem)

    def _raw(self, kind: str, update: Any, problem: str | None) -> None:
        record = self.target
        if record.budget.parts <= 0:
            self.keep.drop(record, "unknown_updates")
            return
        update = self.keep.bounded(record, update)
        if not self.keep.spend(record, count(update, self.limits.value_chars)):
            return
        record.budget.parts -= 1
        part = RawPart(self.new_id("r"), kind[:200], update, problem)
        record.parts.append(part)
        self._updated(part)

    def _updated_in(self, record: TurnRecord, part: Part) -> None:
        if self.emit is not None:
            self.emit(PartUpdated(record.turn_id, part))

    def _updated(self, part: Part) -> None:
        if self.emit is not None:
            self.emit(PartUpdated(self.target.turn_id, part))

    def _changed(self, name: str) -> None:
        if self.emit is not None:
            self.emit(SessionChanged(name))

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
        written = WRITTEN.get(kind) if handler is None and type(kind) is str else None
        if handler is None and written is None:
            self._raw(str(kind), update, None)
            return
        try:
            if handler is not None:
                handler(self, update)
            elif written is not None:
                written(self.writer, update)
        except schema.ValidationError as exc:
            self._raw(str(kind), update, schema.describe(exc))
        except ValueError as exc:  # not what the spec says it is (`notes.NotFolded`)
            self._raw(str(kind), update, str(exc)[:200])

    def _chunk(self, role: Role, text: str, message_id: Any) -> None:
        if self._replaying and role == "user":
            self._replay_user_turn()
        record = self.turn if self.turn is not None else self.ambient
        budget = record.budget
        budget.text -= len(text)
        if budget.text < 0:
            text = self._text_over(record, text)
            if not text:
                return
        parts = record.parts
        last = parts[-1] if parts else None
        if (
            last is None
            or type(last) is not MessagePart
            or last.role != role
            or (message_id is not None and last.message_id != message_id)
        ):
            known = (
                record.by_message_id.get((role, message_id)) if type(message_id) is str else None
            )
            if known is not None:
                last = known
            elif budget.parts <= 0:
                self._chunk_past_cap(record, role, text)
                return
            else:
                self._new_message(record, role, message_id, text)
                return
        last.append(text)
        if self.emit is not None:
            self.emit(Delta(record.turn_id, last.part_id, _CHANNEL[role], text))  # type: ignore[arg-type]

    def _new_message(self, record: TurnRecord, role: Role, message_id: Any, text: str) -> None:
        record.budget.parts -= 1
        named = message_id if type(message_id) is str else None
        message = MessagePart(self.new_id("m"), role, named)
        if named is not None:
            record.by_message_id[(role, named)] = message
        record.parts.append(message)
        message.append(text)
        if role != "user":
            self.visible_output = True
        if self.emit is not None:
            self.emit(PartUpdated(record.turn_id, message))

    def _text_over(self, record: TurnRecord, text: str) -> str:
        """The text budget ran out in this chunk: keep what still fits, count the rest."""
        room = max(record.budget.text + len(text), 0)
        record.budget.text = 0
        self.keep.drop(record, "text_chars", len(text) - room)
        return text[:room]

    def _chunk_past_cap(self, record: TurnRecord, role: Role, text: str) -> None:
        """No part left: the text joins the last message of its role (kept, not interleaved)."""
        if role not in record.overflow:
            record.overflow[role] = next(
                (p for p in reversed(record.parts) if type(p) is MessagePart and p.role == role),
                None,
            )
        target = record.overflow[role]
        if target is None:
            # Not kept: its characters go back to the budget (`_chunk` took them), which tells
            # what the turn holds (the headless live view's share: display/live_meter.py).
            record.budget.text += len(text)
            self.keep.drop(record, "text_chars", len(text))
            return
        self.keep.drop(record, "parts")
        target.append(text)
        if self.emit is not None:
            self.emit(Delta(record.turn_id, target.part_id, _CHANNEL[role], text))  # type: ignore[arg-type]

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
        message_id = update.get("messageId")
        self._chunk(role, "", message_id)
        record = self.target
        named = record.by_message_id.get((role, message_id)) if type(message_id) is str else None
        message = named or (record.parts[-1] if record.parts else None)
        if not isinstance(message, MessagePart) or message.role != role:
            self.keep.drop(record, "parts")  # no part was left for it
            return
        if len(message.blocks) >= self.limits.content_items:
            self.keep.drop(record, "blocks")
            return
        block = self.keep.bounded(record, block)
        if not self.keep.spend(record, count(block, self.limits.value_chars)):
            return
        message.add_block(block)
        self._updated(message)

    def _replay_user_turn(self) -> None:
        """In a replay, each user message begins a new historical turn."""
        last = self.turn.parts[-1] if self.turn is not None and self.turn.parts else None
        if isinstance(last, MessagePart) and last.role == "user":
            return
        if self.turn is not None and self._replay_budget.parts <= 0:
            return  # no part left for a new turn: the text joins the current one's (counted)
        if self.turn is not None:
            self.end_turn()
        self.turn = TurnRecord(
            turn_id=self.new_id("history-"), replay=True, budget=self._replay_budget
        )

    # -- tool calls and permissions --------------------------------------------------------------

    def _tool_call(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(cut_content(update, self.limits))
        if self.refused("tool_call", model.tool_call_id):
            return
        self._claim_asked_only(model)
        call = self.tool_call(model.tool_call_id)
        if not self._kept(call):
            return
        patch_tool_call(call, model, set(model.model_fields_set) | {"title"}, update)
        self.keep.bound_call(self.target, call, excess(update, self.limits))
        self.visible_output = True
        self._updated(call)

    def _tool_call_update(self, update: dict[str, Any]) -> None:
        model = schema.validate_update(cut_content(update, self.limits))
        if self.refused("tool_call_update", model.tool_call_id):
            return
        self.target.asked_only.pop(model.tool_call_id, None)  # its own id: a real call
        call = self.tool_call(model.tool_call_id)
        if not self._kept(call):
            return
        before = input_text(call.raw_input)
        patch_tool_call(call, model, model.model_fields_set, update)
        self.keep.bound_call(self.target, call, excess(update, self.limits))
        self.visible_output = True
        after = input_text(call.raw_input)
        if after != before and self.emit is not None and after.startswith(before):
            self.emit(Delta(self.target.turn_id, call.part_id, "tool_input", after[len(before) :]))
        self._updated(call)

    def _claim_asked_only(self, model: Any) -> None:
        """A call announced under a new id may be one a permission request already showed under
        a placeholder id: the same title and input make it that card, re-keyed, not a second."""
        record = self.target
        record.asked_only.pop(model.tool_call_id, None)
        if model.tool_call_id in record.tool_calls or not record.asked_only:
            return
        for old_id, call in record.asked_only.items():
            same_input = model.raw_input is None or call.raw_input == model.raw_input
            if call.title == (model.title or "") and same_input:
                del record.asked_only[old_id]
                del record.tool_calls[old_id]
                call.tool_call_id = model.tool_call_id
                record.tool_calls[model.tool_call_id] = call
                for part in record.parts:
                    if isinstance(part, PermissionPart) and part.tool_call_id == old_id:
                        part.tool_call_id = model.tool_call_id
                return

    def add_permission(self, tool_call: Any, options: list[dict[str, Any]]) -> PermissionPart:
        """Record a permission request; its `toolCall` is merged into the tool-call state."""
        title = ""
        call_id = "?"
        if isinstance(tool_call, dict) and isinstance(tool_call.get("toolCallId"), str):
            try:
                model = schema.validate_tool_call_update(tool_call)
            except schema.ValidationError:
                model = None
            known = tool_call["toolCallId"] in self.target.tool_calls
            call = self.tool_call(tool_call["toolCallId"])
            if not known and self._kept(call):
                self.target.asked_only[call.tool_call_id] = call
            if model is not None and self._kept(call):
                patch_tool_call(call, model, model.model_fields_set, tool_call)
                self.keep.bound_call(self.target, call, 0)
            title, call_id = call.title, call.tool_call_id
            if self._kept(call):
                self._updated(call)
        record = self.target
        options = self.keep.bounded(record, options[: self.limits.content_items])
        part = PermissionPart(self.new_id("p"), call_id, title, options)
        self._add_asked(record, part, "permissions")
        return part

    # -- the client's own tool calls -------------------------------------------------------------

    def client_call(
        self, kind: str, title: str, content: list[dict[str, Any]]
    ) -> ToolCallPart | None:
        """A tool call the client makes itself (a kernel tool's run), as a card of the turn, with
        room kept for its permission request (`add_client_permission`). None if the turn cannot
        keep both whole (past its limits): the client must not ask about what it cannot show.

        Its id is drawn at random and the fold records it as the client's: the agent cannot
        guess it, nor make a call that the client takes for its own, and whatever it sends for
        it is refused (`refused`). The client changes it by the part (`client_update`), never
        by looking its id up."""
        record = self.target
        size = count([title, content], self.limits.turn_chars)
        full = len(record.tool_calls) >= self.limits.tool_calls
        if full or record.budget.parts < 2 or size > record.budget.chars:
            return None
        call_id = f"acpnb-{secrets.token_hex(16)}"
        while call_id in record.tool_calls:  # the agent's, if it ever guessed 128 bits
            call_id = f"acpnb-{secrets.token_hex(16)}"
        call = ToolCallPart(self.new_id("t"), call_id, title, kind, content=content, by_client=True)
        call.stated_kinds.add(kind)
        call.size = size
        record.budget.chars -= size
        record.budget.parts -= 2  # the card and its permission request
        record.tool_calls[call_id] = call
        record.parts.append(call)
        self._client_calls[call_id] = record
        self.visible_output = True
        self._updated_in(record, call)
        return call

    def client_update(self, call: ToolCallPart, status: str, content: list[dict[str, Any]]) -> None:
        """The client's call, `status` now and showing `content` (which goes on with the content
        it showed when it was asked, that the turn keeps: only what follows may be left out)."""
        record = self._client_calls.get(call.tool_call_id)
        if record is None or record.tool_calls.get(call.tool_call_id) is not call:
            return
        record.budget.chars += call.size
        size = count([call.title, content], self.limits.turn_chars)
        if size > record.budget.chars:
            shown = len(call.content)  # what it asked with stays; the rest is a sentence
            note = "[the rest was left out: the turn is past its size limit]"
            content = [
                *content[:shown],
                {"type": "content", "content": {"type": "text", "text": note}},
            ]
            size = count([call.title, content], self.limits.turn_chars)
        call.status, call.content, call.size = status, content, size
        record.budget.chars -= size
        self._updated_in(record, call)

    def add_client_permission(
        self, call: ToolCallPart, options: list[dict[str, Any]]
    ) -> PermissionPart:
        """The client's permission request about its own `call`, in the room `client_call` kept:
        its title is the call's, nothing of the agent's is merged in."""
        part = PermissionPart(self.new_id("p"), call.tool_call_id, call.title, options)
        record = self._client_calls.get(call.tool_call_id, self.target)
        self.visible_output = True
        record.parts.append(part)
        self._updated_in(record, part)
        return part

    def _add_asked(self, record: TurnRecord, part: Part, kind: str) -> None:
        """A request from the agent joins the turn (past the parts cap, or past the turn's
        characters: asked all the same, but only counted, as `kind`).

        Charged to the turn's characters as a tool call is: a permission's options (up to
        `value_chars` each) and a recorded elicitation were kept outside that budget, 5,000
        requests of a megabyte each kept whole, in the kernel and in the saved notebook."""
        self.visible_output = True
        if record.budget.parts <= 0 or not self.keep.spend(
            record, count(part.to_json(), self.limits.turn_chars)
        ):
            self.keep.drop(record, kind)
            return
        record.budget.parts -= 1
        record.parts.append(part)
        self._updated(part)

    def add_elicitation(self, params: Any) -> ElicitationPart:
        """Record an `elicitation/create` (`ElicitationError` if it cannot be read: the caller
        answers invalid params, and the record says what was refused)."""
        record = self.target
        try:
            part = elicitation.read_request(params, self.new_id("e"))
        except ElicitationError as exc:
            self.add_error(f"the agent asked for input in a way this client cannot show: {exc}")
            raise
        self._add_asked(record, part, "elicitations")
        return part

    def add_recorded_elicitation(self, part: ElicitationPart) -> None:
        """An elicitation read back from a transcript (a replay): bounded as one asked now."""
        record = self.target
        # As `elicitation.read_request` reads a live one: a recorded message of a megabyte was
        # kept whole (500 times what the agent could have had shown), a URL no live one could be.
        part.message = part.message[: elicitation.MAX_TEXT]
        part.url = part.url if len(part.url) <= elicitation.MAX_TEXT else ""
        part.content = self.keep.bounded(record, part.content)
        self._add_asked(record, part, "elicitations")

    def resolve_elicitation(
        self, part: ElicitationPart, action: str, content: dict[str, Any] | None, by: str
    ) -> None:
        part.outcome, part.content, part.decided_by = action, content, by
        self._updated(part)

    def resolve_permission(self, part: PermissionPart, option_id: str | None, by: str) -> None:
        part.outcome = "selected" if option_id is not None else "cancelled"
        part.option_id = option_id
        part.decided_by = by
        self._updated(part)

    def _usage(self, update: dict[str, Any]) -> None:
        problem = self.facts.usage_update(update)
        if problem is not None:
            self._raw("usage_update", update, problem)


_HANDLERS: dict[str, Callable[[SessionFold, dict[str, Any]], None]] = {
    "tool_call": SessionFold._tool_call,
    "tool_call_update": SessionFold._tool_call_update,
    "subagent_update": lambda fold, u: fold.children.announce(u),
    # An older adapter's draft (2026-08) of the same: mapped to it (`subagents.from_draft`).
    "subagent_spawned": lambda fold, u: fold.children.announce(subagents.from_draft(u)),
    "subagent_state_update": lambda fold, u: fold.children.announce(subagents.from_draft(u)),
    "available_commands_update": lambda fold, u: fold.facts.commands_update(u),
    "current_mode_update": lambda fold, u: fold.facts.mode_update(u),
    "config_option_update": lambda fold, u: fold.facts.config_update(u),
    "session_info_update": lambda fold, u: fold.facts.info_update(u),
    "usage_update": SessionFold._usage,
}
