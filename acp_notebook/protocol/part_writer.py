"""How the fold's handlers of the plans (`plans.py`), notices and compaction (`notes.py`),
messages between sessions and subagents' cards (`subagents.py`) and prompt suggestions
(`suggestions.py`) write parts into the record the
fold is writing: within its limits, counted when past them, each change told to its listener.

One object per `SessionFold` (`SessionFold.writer`), on the fold's public state only; the
handlers see it through the protocol each declares of what it needs. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from . import notes, plans, subagents, suggestions
from .limits import Limits, TurnLimits, count
from .mutations import Mutation, PartUpdated
from .state import Part, PlanEntry, PlanPart
from .turn import TurnRecord

#: The key each kind of part is found by (`find_part`).
_KEYS: dict[str, str] = {
    "plan": "plan_id",
    "compaction": "compaction_id",
    "subagent": "session_id",
    "message": "message_id",
}


class Folding(Protocol):
    """The fold, as the writer uses it (`SessionFold`)."""

    limits: Limits
    keep: TurnLimits[TurnRecord]
    visible_output: bool
    emit: Callable[[Mutation], None] | None

    @property
    def target(self) -> TurnRecord: ...

    def new_id(self, prefix: str) -> str: ...


class PartWriter:
    """Adds, finds and updates parts of the fold's current record (its turn, or `ambient`)."""

    def __init__(self, fold: Folding) -> None:
        self._fold = fold

    @property
    def visible_output(self) -> bool:
        return self._fold.visible_output

    @visible_output.setter
    def visible_output(self, value: bool) -> None:
        self._fold.visible_output = value

    def new_id(self, prefix: str) -> str:
        return self._fold.new_id(prefix)

    def target_turn_id(self) -> str:
        return self._fold.target.turn_id

    def add_part(self, part: Part, kind: str) -> bool:
        """Add `part` to the record, if it has room (a part, and the characters of what the
        part holds now); else count it as dropped (`kind`) and say False."""
        fold, record = self._fold, self._fold.target
        if record.budget.parts <= 0 or not fold.keep.spend(
            record, count(part.to_json(), fold.limits.turn_chars)
        ):
            fold.keep.drop(record, kind)
            return False
        record.budget.parts -= 1
        record.parts.append(part)
        self.updated(part)
        return True

    def updated(self, part: Part) -> None:
        self.updated_in(self._fold.target.turn_id, part)

    def updated_in(self, turn_id: str, part: Part) -> None:
        if self._fold.emit is not None:
            self._fold.emit(PartUpdated(turn_id, part))

    def find_part(self, kind: str, key: str) -> Any:
        """The latest part of this kind in the record whose id (plan, compaction, session) is
        `key`; None if there is none."""
        attr = _KEYS[kind]
        for part in reversed(self._fold.target.parts):
            if part.kind == kind and getattr(part, attr, None) == key:
                return part
        return None

    def last_part(self, kind: str) -> Any:
        """The latest part of this kind in the record; None if there is none."""
        for part in reversed(self._fold.target.parts):
            if part.kind == kind:
                return part
        return None

    def count_parts(self, kind: str) -> int:
        return sum(1 for part in self._fold.target.parts if part.kind == kind)

    def clip(self, value: str) -> str:
        """An agent's string, cut to the limit of any one value."""
        return value[: self._fold.limits.value_chars]

    def bounded(self, value: Any) -> Any:
        """An agent's JSON value, within the limit of any one value (as the fold keeps one)."""
        return self._fold.keep.bounded(self._fold.target, value)

    def entries(self, raw: Any) -> list[PlanEntry]:
        """A plan's entries (`plan_update`), within the plan limits; those past them counted."""
        entries, past = plans.read_entries(raw, self._fold.limits.plan_entries)
        return self.keep_entries(entries, past)

    def drop(self, kind: str, n: int = 1) -> None:
        self._fold.keep.drop(self._fold.target, kind, n)

    def plan_cap(self) -> int:
        return self._fold.limits.plan_entries

    def keep_entries(self, entries: list[PlanEntry], past: int) -> list[PlanEntry]:
        """A plan's entries within the characters left; `past` entries beyond the cap counted
        as a snapshot's are: the largest excess of one plan, not a sum over its updates."""
        record, keep = self._fold.target, self._fold.keep
        known = record.dropped.get("plan_entries", 0)
        if past > known:
            keep.drop(record, "plan_entries", past - known)
        return keep.bounded_entries(record, entries)

    @property
    def legacy_plan(self) -> PlanPart | None:
        return self._fold.target.plan

    @legacy_plan.setter
    def legacy_plan(self, part: PlanPart | None) -> None:
        self._fold.target.plan = part


#: The handlers of the update kinds folded through the writer, by `sessionUpdate`.
WRITTEN: dict[str, Callable[[PartWriter, dict[str, Any]], None]] = {
    "plan": plans.fold_plan,
    "plan_update": plans.fold_plan_update,
    "plan_removed": plans.fold_plan_removed,
    "notice": notes.fold_notice,
    "compaction_update": notes.fold_compaction,
    "compaction_summary_chunk": notes.fold_summary_chunk,
    "session_message_chunk": subagents.fold_session_message,
    "session_message": subagents.fold_session_message,
    "prompt_suggestions_update": suggestions.fold_suggestions,
}
