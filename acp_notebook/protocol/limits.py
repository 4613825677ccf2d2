"""Bounds on what the agent can make the client keep. Pure, no I/O.

The agent is untrusted: every list it sends can be a million items long, every string a hundred
megabytes, every number NaN or 10**4000. The fold keeps what a real turn needs and drops the rest,
counting what it dropped (`TurnRecord.dropped`), so memory, the saved notebook and the rendering
stay bounded and the record says what is missing.

The defaults are far above any real turn: a long agentic turn (hundreds of tool calls, a few
hundred kilobytes of text, a plan of a few dozen steps) uses a few percent of them.
"""

from __future__ import annotations

import itertools
import math
import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from .state import ErrorPart, Part, PlanEntry, ToolCallPart

#: Integers beyond a signed 64-bit value are not numbers any JSON reader keeps exactly; they
#: become null (as NaN and Infinity do).
MAX_INT = 2**63 - 1
#: Characters of a session id the agent gives (a new session's, a fork's, a subagent's): the
#: client keeps it, shows it and sends it back; a longer string is not an id.
MAX_ID_CHARS = 1_000


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-turn caps (the `limits` option of `connect()`). Text is counted in characters."""

    #: Entries of the plan. Real plans have a few to a few dozen steps.
    plan_entries: int = 1_000
    #: Parts (messages, tool calls, permissions, errors, unknown updates) per turn. A long agentic
    #: turn has a few hundred. Past the cap, text joins the last message of its kind (thought,
    #: answer): no text is lost, only the interleaving; other parts are dropped.
    parts: int = 5_000
    #: Characters of message text (answer, thoughts, user echo together) per turn, and so per
    #: message. Models write at most a few hundred kilobytes in a turn; 4 Mi characters are about
    #: a million output tokens. The text is saved about five times (each view and the
    #: transcript), so this bounds the saved notebook too.
    text_chars: int = 4 * 1024 * 1024
    #: Tool calls per turn (updates for calls past the cap are dropped).
    tool_calls: int = 2_000
    #: Content items of one tool call.
    content_items: int = 100
    #: Characters of one diff (old and new text together): a whole rewritten 2 MB source file.
    diff_chars: int = 4 * 1024 * 1024
    #: Characters of any other value the agent sends (a tool call's input or output, an unknown
    #: update, a content block, a permission request's options...), measured as JSON.
    value_chars: int = 1024 * 1024
    #: Characters kept by all the parts of a turn other than message text (tool calls, diffs,
    #: permission requests, elicitations...).
    turn_chars: int = 32 * 1024 * 1024
    #: Items of a session-wide list (commands, config options, modes) and of `session/list`.
    list_items: int = 1_000
    #: Updates kept for a session whose id is not known yet (while a session is being opened,
    #: its first updates may come before the answer is handled); updates for unknown ids at any
    #: other time are dropped and counted.
    orphan_updates: int = 1_000
    #: The characters of those updates, in all.
    orphan_chars: int = 4 * 1024 * 1024
    #: `session/list`: pages requested at most.
    list_pages: int = 100
    #: `session/list`: sessions kept at most.
    listed_sessions: int = 10_000
    #: Subagents (child sessions, `subagents.py`) with a card in one turn.
    subagents: int = 50
    #: Parts of one subagent's card in one turn (its text: a quarter of a turn's).
    subagent_parts: int = 500

    def for_child(self) -> Limits:
        """The limits of a subagent's fold: its parts, a quarter of the turn's text and other
        characters, a tenth of its tool calls; its own children as many as a turn's."""
        return replace(
            self,
            parts=self.subagent_parts,
            text_chars=self.text_chars // 4,
            turn_chars=self.turn_chars // 4,
            tool_calls=max(1, self.tool_calls // 10),
        )


DEFAULT_LIMITS = Limits()

# -- what the views of a turn draw (render/): the transcript keeps everything, these bound the
# HTML and Markdown drawn from it, each with a note saying how much was left out.

#: Lines of a terminal's output kept (its tail), of a diff (its head), of a text block (its head).
TERMINAL_LINES = 200
DIFF_LINES = 400
TEXT_LINES = 200
#: A cap on characters too, for output made of a few enormous lines.
MAX_CHARS = 20_000
#: JSON shown in collapsed sections (raw input, unknown updates).
JSON_CHARS = 20_000

# -- what a turn hands to `acp-notebook run` -------------------------------------------------------

#: Cells one `%%agent` cell's turn may hand to the runner: inserted cells, and apart from them
#: edits and runs (the kernel's tools refuse past it, the runner keeps no more).
MAX_RUNNER_CELLS = 50

# -- structured output (`protocol/structured.py`) -------------------------------------------------

#: The longest answer parsed as structured output; beyond it the answer fails validation.
MAX_ANSWER_CHARS = 1_000_000
#: The longest schema sent with a prompt (a bigger one is a usage error, not a huge prompt).
MAX_SCHEMA_CHARS = 100_000


@dataclass(slots=True)
class Budget:
    """What a record (or the records of one `session/load` replay, which share one) may still
    keep: parts, characters of message text, characters of everything else."""

    parts: int
    text: int
    chars: int

    @classmethod
    def of(cls, limits: Limits) -> Budget:
        return cls(limits.parts, limits.text_chars, limits.turn_chars)

    @classmethod
    def ambient(cls, limits: Limits) -> Budget:
        # Updates outside any turn (late chunks after a cancel, between turns) are few in a real
        # session; this budget lasts the session's whole life, so it is smaller than a turn's.
        return cls(
            min(limits.parts, 1_000),
            min(limits.text_chars, 1024 * 1024),
            min(limits.turn_chars, 4 * 1024 * 1024),
        )


def finite(value: Any) -> Any:
    """`value` if it is a JSON number a reader can keep (finite, at most 64 bits), else None."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if type(value) is int:
        return value if -MAX_INT - 1 <= value <= MAX_INT else None
    return value


def token_counts(value: Any, limits: Limits) -> dict[str, Any] | None:
    """`PromptResponse.usage` (token counts): an object within `value_chars`, where any number
    that is not a count (negative, fractional, huge, non-finite) becomes None."""
    if not isinstance(value, dict):
        return None
    kept, _ = bounded(value, limits.value_chars)
    return {
        k: (v if type(v) is not float and (type(v) is not int or v >= 0) else None)
        for k, v in kept.items()
    }


def count(value: Any, budget: int) -> int:
    """The JSON size of `value` in characters (roughly), or more than `budget` once it is over.

    Stops early: cost proportional to `min(size, budget)`, not to the size.
    """
    return _measure(value, budget)[0]


def bounded(
    value: Any,
    budget: int,
    *,
    string: int | None = None,
    items: int | None = None,
    depth: int | None = None,
) -> tuple[Any, int]:
    """A copy of `value` that fits in `budget` characters of JSON, and how many were left out.

    Strings past the budget are cut (with a note of how much), list items and object members
    past it are dropped; non-finite or huge numbers become None. Within budget, `value` itself
    is returned (no copy): the common case costs one walk.

    A view that shows a value to be read (`%agent log`) caps its shape too: each string (and
    key) at `string` characters, each list or object at `items` (a last item, or a "…" member,
    says how many more), nesting past `depth` as "…". What they cut counts as left out.
    """
    shaped = string is not None or items is not None or depth is not None
    if not shaped:
        size, clean = _measure(value, budget)
        if size <= budget and clean:
            return value, 0
    cut = _Cut(budget, 0, _ALL if string is None else string, _ALL if items is None else items)
    return _clip(value, cut, _ALL if depth is None else depth), cut.dropped


def clip_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a note of how many were left out on a line of its
    own: the one way text is cut for a reader (a tool's answer, a cell shown to the agent)."""
    kept, note = cut_text(text, limit)
    return f"{kept}\n{note}" if note else kept


def cut_text(text: str, limit: int) -> tuple[str, str]:
    """`clip_text` in two pieces, the text kept and the note ("" when nothing was cut), for a
    view that draws the note apart (`render.clip.Clipped`)."""
    if len(text) <= limit:
        return text, ""
    return text[:limit], f"… ({len(text) - limit:,} more characters)"


#: A dict or set of up to this many items is shown sorted by `BoundedRepr`, as reprlib does.
SORTED = 1_000


class BoundedRepr(reprlib.Repr):
    """The one bounded repr (the kernel tools' variables and cell values, the views' values,
    a non-JSON value dumped): reprlib's, at most `chars` characters of a string or an unknown
    object, `depth` levels, `items` items of a container (reprlib's own counts when None),
    `digits` of an int; `number` formats ints and floats where a view has its own way.

    It never formats much more than it shows: past `SORTED` items a dict or set is shown in its
    own order, as Python's repr does (reprlib sorts it whole to show four keys: 5 s for
    3,000,000 keys, each time the agent listed the variables), and an int too long to print
    is said, not raised (Python refuses `str()` of more than 4,300 digits). A `__repr__` that
    raises still raises: each caller says it its own way."""

    def __init__(
        self,
        chars: int,
        *,
        depth: int = 3,
        items: int | None = None,
        digits: int = 40,
        number: Callable[[int | float], str] | None = None,
    ) -> None:
        super().__init__()
        self.maxstring = self.maxother = chars
        self.maxlevel = depth
        self.maxlong = digits
        if items is not None:
            for attr in ("maxlist", "maxtuple", "maxdict", "maxset", "maxfrozenset", "maxdeque"):
                setattr(self, attr, items)
            self.maxarray = items
        self.number = number

    def repr_int(self, x: int, level: int) -> str:
        if self.number is not None:
            return self.number(x)
        try:
            return super().repr_int(x, level)
        except ValueError:  # past Python's limit on the digits `str()` makes
            return f"<int of about {int(x.bit_length() * math.log10(2)) + 1:,} digits>"

    def repr_float(self, x: float, level: int) -> str:
        return self.repr_instance(x, level) if self.number is None else self.number(x)

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if len(x) <= SORTED or level <= 0:
            return super().repr_dict(x, level)
        pieces = (
            f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
            for k, v in itertools.islice(x.items(), self.maxdict)
        )
        return self._unsorted(pieces, "{", "}")

    def repr_set(self, x: set[Any], level: int) -> str:
        if len(x) <= SORTED or level <= 0:
            return super().repr_set(x, level)
        pieces = (self.repr1(e, level - 1) for e in itertools.islice(x, self.maxset))
        return self._unsorted(pieces, "{", "}")

    def repr_frozenset(self, x: frozenset[Any], level: int) -> str:
        if len(x) <= SORTED or level <= 0:
            return super().repr_frozenset(x, level)
        pieces = (self.repr1(e, level - 1) for e in itertools.islice(x, self.maxfrozenset))
        return self._unsorted(pieces, "frozenset({", "})")

    def _unsorted(self, pieces: Iterable[str], left: str, right: str) -> str:
        # Always more than shown (over `SORTED`): the fill value ends it.
        return left + ", ".join([*pieces, self.fillvalue]) + right


def _measure(value: Any, budget: int) -> tuple[int, bool]:
    """(size, whether every number is one `finite` keeps); stops once the size is over budget."""
    total = 0
    clean = True
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            total += len(item) + 2
        elif kind is dict:
            total += 2
            for key, child in item.items():
                total += len(key) + 4 if type(key) is str else 8
                stack.append(child)
        elif kind is list or kind is tuple:
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += 8
            if (kind is float or kind is int) and finite(item) is None:
                clean = False
        if total > budget:
            return total, clean
    return total, clean


_ALL = 1 << 62  # no cap


@dataclass(slots=True)
class _Cut:
    """What `bounded` has left to keep as it walks, what it left out, and its shape's caps."""

    room: int
    dropped: int
    string: int
    items: int


def _clip(value: Any, cut: _Cut, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        room = min(max(cut.room - 2, 0), cut.string)
        cut.room -= min(len(value), room) + 2
        if len(value) <= room:
            return value
        cut.dropped += len(value) - room
        return value[:room] + f"… [{len(value) - room:,} characters dropped]"
    if depth <= 0 and (kind is dict or kind is list or kind is tuple):
        cut.dropped += count(value, _ALL)
        return "…"
    if kind is dict:
        out: dict[Any, Any] = {}
        cut.room -= 2
        for i, (key, child) in enumerate(value.items()):
            if cut.room <= 0 or i >= cut.items:
                cut.dropped += count(child, _ALL)
                continue
            if type(key) is str and len(key) > cut.string:
                cut.dropped += len(key) - cut.string
                key = key[: cut.string]
            cut.room -= (len(key) if type(key) is str else 8) + 4
            out[key] = _clip(child, cut, depth - 1)
        if len(value) > cut.items:
            out["…"] = f"{len(value) - cut.items:,} more"
        return out
    if kind is list or kind is tuple:
        kept: list[Any] = []
        cut.room -= 2
        for i, child in enumerate(value):
            if cut.room <= 0 or i >= cut.items:
                cut.dropped += count(child, _ALL)
                continue
            cut.room -= 1
            kept.append(_clip(child, cut, depth - 1))
        if len(value) > cut.items:
            kept.append(f"… {len(value) - cut.items:,} more")
        return kept
    cut.room -= 8
    return finite(value)


# -- how the fold holds a turn to its limits ------------------------------------------------------
#
# Everything the fold keeps passes through `TurnLimits`: values cut to `value_chars`, diffs over
# `diff_chars` replaced by a sentence, plans cut by entries and size, tool calls charged to the
# turn's character budget. What is left out is counted in the record's `dropped`; the record's
# first part (a warning, made at the first drop so it never splits a streaming message) says what.


class Kept(Protocol):
    """What `TurnLimits` reads and writes of a record (`result.TurnRecord`): typed by its shape,
    since the record's module imports this one for `Budget`."""

    budget: Budget
    dropped: dict[str, int]
    dropped_note: ErrorPart | None
    parts: list[Part]


R = TypeVar("R", bound=Kept)

#: How the warning of what a turn left out begins (a replay knows it by this: `refold`).
DROPPED_NOTE = "The agent sent more than the client keeps"
#: What each `dropped` key counts, for the warning part.
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


class TurnLimits(Generic[R]):
    """The cutting and counting, for one fold: `new_id` names the warning part, `updated`
    tells the fold's listener a record's part changed."""

    def __init__(
        self,
        limits: Limits,
        new_id: Callable[[str], str],
        updated: Callable[[R, Part], None],
    ) -> None:
        self.limits = limits
        self.new_id = new_id
        self.updated = updated

    def bounded(self, record: R, value: Any) -> Any:
        kept, dropped = bounded(value, self.limits.value_chars)
        if dropped:
            self.drop(record, "value_chars", dropped)
        return kept

    def spend(self, record: R, size: int) -> bool:
        """Take `size` characters from the record's budget, or count them dropped."""
        if size > record.budget.chars:
            self.drop(record, "turn_chars", size)
            return False
        record.budget.chars -= size
        return True

    def drop(self, record: R, what: str, n: int = 1) -> None:
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

    def tell_dropped(self, record: R) -> None:
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

    def bound_call(self, record: R, call: ToolCallPart, cut_items: int) -> None:
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

    def bounded_diff(self, record: R, item: dict[str, Any]) -> dict[str, Any]:
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

    def bounded_entries(self, record: R, entries: list[PlanEntry]) -> list[PlanEntry]:
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
