"""How the fold holds a turn to its `Limits`: what is cut, what is counted, and the note that
tells the user.

Everything the fold keeps passes through here: values cut to `value_chars`, diffs over
`diff_chars` replaced by a sentence, plans cut by entries and size, tool calls charged to the
turn's character budget. What is left out is counted in the record's `dropped`; the record's
first part (a warning, made at the first drop so it never splits a streaming message) says what.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .limits import Limits, bounded, count
from .result import TurnRecord
from .state import ErrorPart, Part, PlanEntry, ToolCallPart

#: What each `dropped` key counts, for the warning part.
#: How the warning of what a turn left out begins (a replay knows it by this: `refold`).
DROPPED_NOTE = "The agent sent more than the client keeps"
_DROPPED_WORDS = {
    "text_chars": "characters of text past the {text_chars:,}-character limit",
    "parts": "parts past the {parts:,}-part limit (their text joined the previous message of "
    "its kind)",
    "plan_entries": "plan entries past the {plan_entries:,}-entry limit",
    "tool_calls": "tool call updates past the {tool_calls:,}-call limit",
    "content_items": "tool call content items past the {content_items:,}-item limit",
    "diffs": "diffs over {diff_chars:,} characters",
    "value_chars": "characters of values over {value_chars:,} characters",
    "turn_chars": "characters of tool calls, blocks and updates past the turn's "
    "{turn_chars:,}-character limit",
    "permissions": "permission requests not recorded (past the parts limit)",
    "unknown_updates": "unknown or invalid updates past the parts limit",
    "errors": "errors past the parts limit",
    "blocks": "content blocks past the {content_items:,}-block limit",
}


class TurnLimits:
    """The cutting and counting, for one fold: `new_id` names the warning part, `updated`
    tells the fold's listener a record's part changed."""

    def __init__(
        self,
        limits: Limits,
        new_id: Callable[[str], str],
        updated: Callable[[TurnRecord, Part], None],
    ) -> None:
        self.limits = limits
        self.new_id = new_id
        self.updated = updated

    def bounded(self, record: TurnRecord, value: Any) -> Any:
        kept, dropped = bounded(value, self.limits.value_chars)
        if dropped:
            self.drop(record, "value_chars", dropped)
        return kept

    def spend(self, record: TurnRecord, size: int) -> bool:
        """Take `size` characters from the record's budget, or count them dropped."""
        if size > record.budget.chars:
            self.drop(record, "turn_chars", size)
            return False
        record.budget.chars -= size
        return True

    def drop(self, record: TurnRecord, what: str, n: int = 1) -> None:
        """Count what the limits left out; the record's first part says so."""
        before = record.dropped.get(what, 0)
        record.dropped[what] = before + n
        if record.dropped_note is None:
            # First in the record, so a note never splits a message the agent is streaming.
            record.dropped_note = ErrorPart(self.new_id("e"), "", "warning")
            record.parts.insert(0, record.dropped_note)
        if (before + n).bit_length() > before.bit_length():
            # Told again when a count passes a power of two (and exactly at the end of the
            # turn), not for every dropped chunk.
            self.tell_dropped(record)

    def tell_dropped(self, record: TurnRecord) -> None:
        note = record.dropped_note
        if note is None:
            return
        fields = {name: getattr(self.limits, name) for name in self.limits.__slots__}
        counted = [(n, _DROPPED_WORDS.get(k, k)) for k, n in record.dropped.items() if n]
        note.message = (
            DROPPED_NOTE
            + "; left out: "
            + "; ".join(f"{n:,} {words.format(**fields)}" for n, words in counted)
            + "."
        )
        self.updated(record, note)

    def bound_call(self, record: TurnRecord, call: ToolCallPart, cut_items: int) -> None:
        """Hold a patched call to the limits: items, diff and value sizes, the turn's budget."""
        limits = self.limits
        if cut_items:
            self.drop(record, "content_items", cut_items)
        call.title = self.bounded(record, call.title)
        call.content = [self.bounded(record, self.bounded_diff(record, i)) for i in call.content]
        call.locations = self.bounded(record, call.locations[: limits.content_items])
        call.raw_input = self.bounded(record, call.raw_input)
        call.raw_output = self.bounded(record, call.raw_output)
        call.meta = self.bounded(record, call.meta)
        size = sum(
            count(v, limits.turn_chars)
            for v in (call.title, call.content, call.locations, call.raw_input, call.raw_output)
        )
        old, call.size = call.size, 0
        record.budget.chars += old
        if self.spend(record, size):
            call.size = size
        else:  # over the turn's budget: the call keeps its title, kind and status only
            call.content, call.locations, call.raw_input, call.raw_output = [], [], None, None

    def bounded_diff(self, record: TurnRecord, item: dict[str, Any]) -> dict[str, Any]:
        if item.get("type") != "diff":
            return item
        size = sum(len(v) for v in (item.get("oldText"), item.get("newText")) if isinstance(v, str))
        if size <= self.limits.diff_chars:
            return item
        self.drop(record, "diffs")
        path = str(item.get("path", ""))[:1000]
        return {
            "type": "content",
            "content": {
                "type": "text",
                "text": (
                    f"[the diff of {path} was left out: {size:,} characters, over the "
                    f"{self.limits.diff_chars:,}-character limit]"
                ),
            },
        }

    def bounded_entries(self, record: TurnRecord, entries: list[PlanEntry]) -> list[PlanEntry]:
        """The whole plan within `value_chars`: entries past it are dropped, long ones cut."""
        room = self.limits.value_chars
        out = []
        for entry in entries:
            size = len(entry.content) + len(entry.priority) + len(entry.status) + 40
            if size > room:
                if room > 1000:
                    kept = entry.content[: room - 1000]
                    self.drop(record, "value_chars", len(entry.content) - len(kept))
                    out.append(PlanEntry(kept + "…", entry.priority[:100], entry.status[:100]))
                self.drop(record, "plan_entries", len(entries) - len(out))
                return out
            room -= size
            out.append(entry)
        return out


def cut_content(update: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """`update` with its `content` and `locations` cut to the limit before validation."""
    for key in ("content", "locations"):
        items = update.get(key)
        if type(items) is list and len(items) > limits.content_items:
            update = {**update, key: items[: limits.content_items]}
    return update


def excess(update: dict[str, Any], limits: Limits) -> int:
    """How many content items `cut_content` cut."""
    items = update.get("content")
    return max(len(items) - limits.content_items, 0) if type(items) is list else 0
