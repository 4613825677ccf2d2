"""The fold's bookkeeping: the records it writes to, ids, and telling its listener.

`SessionFold` (fold.py) is this plus the update handlers. Here: which record is written to (the
turn, the ambient record between turns, history records while `session/load` replays), the
part ids, the tool-call table, errors and raw parts, and the mutations sent to `emit`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from .fold_limits import TurnLimits
from .limits import DEFAULT_LIMITS, Budget, Limits, count
from .mutations import Mutation, PartUpdated, SessionChanged
from .result import TurnRecord
from .session_facts import SessionFacts
from .state import UNFINISHED, ErrorPart, Part, RawPart, ToolCallPart


class FoldCore:
    """The records and their bookkeeping; `emit` (if set) hears every change."""

    def __init__(
        self, emit: Callable[[Mutation], None] | None = None, limits: Limits = DEFAULT_LIMITS
    ) -> None:
        self.emit = emit
        self.limits = limits
        self.facts = SessionFacts(limits, self._changed)
        self.keep = TurnLimits(limits, self.new_id, self._updated_in)
        self.history: list[TurnRecord] = []
        self.ambient = TurnRecord(turn_id="ambient", budget=Budget.ambient(limits))
        self.turn: TurnRecord | None = None
        self.visible_output = False  # since the current turn (or attempt) began
        self._ids = itertools.count(1)
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
        return f"{prefix}{next(self._ids)}"

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
