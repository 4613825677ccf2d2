"""The parts of a turn: the one model the fold builds, subscribers receive and renderers draw.

Plain mutable records, no I/O: messages (agent, user, thought, and between the agent's
sessions), tool calls, permission requests, plans, subagents (a child session's sub-turn, with
parts of its own), notices and compactions (`notes.py`), updates of kinds newer than our
schema, and errors. Each writes itself into the transcript (`to_json`) and is read back from
it (`from_json`, total: a saved notebook's part may be malformed or from an older version, and
reads as well as it can, never raising), so a turn streaming, finished, or read from a notebook
is the same objects. Tool call content, locations
and permission options stay the ACP dicts the agent sent; `items` has typed views of them.

Message text lives in a `StringIO` (from a message's second chunk) so memory grows with the text,
not with the number of chunks.

Adding a part kind: a class here with `kind`, `to_json` and `from_json`, listed in `Part` and
`_READERS`; the fold creates it; `render/html.py` draws it (the text and Markdown views give any
part they do not know a line of its kind).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from . import items
from .coerce import dicts, integer, mapping, number, opt_text, text
from .elicitation import ElicitationPart
from .notes import CompactionPart, NoticePart
from .suggestions import SuggestionsPart

#: The roles the fold gives messages. A message read from a transcript keeps any other role it
#: has (drawn as agent text, but not part of the answer).
Role = Literal["agent", "user", "thought"]

UNFINISHED = frozenset({"pending", "in_progress"})


@dataclass(slots=True, eq=False)
class MessagePart:
    part_id: str
    role: str  # a `Role`
    message_id: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)  # non-text content blocks
    # The text: a plain string while it is one chunk, a StringIO from the second on. A StringIO
    # costs about 240 bytes, and a turn alternating thought and answer makes a part per chunk.
    _head: str = field(default="", repr=False)
    _buf: io.StringIO | None = field(default=None, repr=False)
    #: Where each of `blocks` came in the text (the text's length when it arrived): a view draws
    #: an image before the text that followed it, not after all of the message's text.
    block_at: list[int] = field(default_factory=list)

    kind = "message"

    @property
    def text(self) -> str:
        return self._head if self._buf is None else self._buf.getvalue()

    def append(self, text: str) -> None:
        buf = self._buf
        if buf is None:
            if not self._head:
                self._head = text
                return
            buf = self._buf = io.StringIO()
            buf.write(self._head)
            self._head = ""
        buf.write(text)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "message",
            "id": self.part_id,
            "role": self.role,
            "text": self.text,
        }
        if self.message_id is not None:
            out["messageId"] = self.message_id
        if self.blocks:
            out["blocks"] = self.blocks
            if len(self.block_at) == len(self.blocks) and self.block_at[0] < len(self.text):
                out["blockAt"] = self.block_at  # only when some text follows a block
        return out

    def add_block(self, block: dict[str, Any]) -> None:
        """A non-text block, after the text so far."""
        self.blocks.append(block)
        self.block_at.append(len(self._head) if self._buf is None else self._buf.tell())

    def pieces(self) -> list[tuple[str, dict[str, Any] | None]]:
        """The message in arrival order: each run of text, then the block that followed it (the
        last run with None). A saved `blockAt` that does not fit is read as all blocks last."""
        body = self.text
        at = self.block_at
        if not self.blocks:
            return [(body, None)]
        fits = len(at) == len(self.blocks) and all(
            0 <= a <= b <= len(body) for a, b in zip(at, [*at[1:], len(body)], strict=True)
        )
        if not fits:
            at = [len(body)] * len(self.blocks)
        out: list[tuple[str, dict[str, Any] | None]] = []
        start = 0
        for pos, b in zip(at, self.blocks, strict=True):
            out.append((body[start:pos], b))
            start = pos
        out.append((body[start:], None))
        return out

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> MessagePart:
        message_id = d.get("messageId")
        part = cls(
            text(d.get("id")),
            text(d.get("role")) or "agent",
            text(message_id) if isinstance(message_id, str) else None,
            dicts(d.get("blocks")),
        )
        part.append(text(d.get("text")))
        at = d.get("blockAt")
        if isinstance(at, list) and len(at) == len(part.blocks):
            part.block_at = [n if (n := integer(x)) is not None else -1 for x in at]
        return part


@dataclass(slots=True, eq=False)
class ToolCallPart:
    part_id: str
    tool_call_id: str
    title: str = ""
    tool_kind: str = "other"
    status: str = "pending"
    content: list[dict[str, Any]] = field(default_factory=list)
    locations: list[dict[str, Any]] = field(default_factory=list)
    raw_input: Any = None
    raw_output: Any = None
    meta: dict[str, Any] | None = None
    #: The tool's programmatic name (`read_file`), beside `title`: informational, the agent's
    #: word (ACP v1, 2026-09-17). None when the agent did not send it.
    name: str | None = None
    size: int = field(default=0, repr=False)  # characters counted against the turn's budget
    # Every kind the agent ever stated for this call (updates and permission requests), not
    # only the latest: a permission policy must not let a call shed a kind by relabelling.
    stated_kinds: set[str] = field(default_factory=set, repr=False)
    # Every content type it ever showed ("diff", "terminal"): replacing its content by an update
    # does not make an edit or an execute it showed into something else.
    shown_types: set[str] = field(default_factory=set, repr=False)
    #: A call the client made itself (a kernel tool's run), not one the agent reported: the
    #: fold gives it an id of its own drawing and refuses the agent's updates for it.
    by_client: bool = False

    kind = "tool_call"

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "tool_call",
            "id": self.part_id,
            "toolCallId": self.tool_call_id,
            "title": self.title,
            "kind": self.tool_kind,
            "status": self.status,
        }
        if self.content:
            out["content"] = self.content
        if self.locations:
            out["locations"] = self.locations
        if self.raw_input is not None:
            out["rawInput"] = self.raw_input
        if self.raw_output is not None:
            out["rawOutput"] = self.raw_output
        if self.by_client:
            out["byClient"] = True
        if self.name is not None:
            out["name"] = self.name
        return out

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> ToolCallPart:
        return cls(
            text(d.get("id")),
            text(d.get("toolCallId")),
            text(d.get("title")),
            text(d.get("kind")) or "other",
            text(d.get("status")) or "pending",
            content=dicts(d.get("content")),
            locations=dicts(d.get("locations")),
            raw_input=d.get("rawInput"),
            raw_output=d.get("rawOutput"),
            name=(opt_text(d.get("name")) or "")[:200] or None,
            by_client=d.get("byClient") is True,
        )

    @property
    def content_items(self) -> tuple[items.Content, ...]:
        """`content`, typed: text, diffs, terminals and other blocks."""
        return tuple(items.content(c) for c in self.content if isinstance(c, dict))

    @property
    def location_items(self) -> tuple[items.Location, ...]:
        return tuple(items.location(loc) for loc in self.locations if isinstance(loc, dict))


@dataclass(slots=True, eq=False)
class PermissionPart:
    """A `session/request_permission` and, once known, its answer."""

    part_id: str
    tool_call_id: str
    title: str
    options: list[dict[str, Any]]
    #: "pending", "selected" or "cancelled" (a transcript's other values are kept as read).
    outcome: str = "pending"
    option_id: str | None = None
    decided_by: str | None = None  # "policy", "user", "cancel", "agent" ($/cancel_request)

    kind = "permission"

    @property
    def chosen(self) -> dict[str, Any] | None:
        return next((o for o in self.options if o.get("optionId") == self.option_id), None)

    @property
    def option_items(self) -> tuple[items.Option, ...]:
        """`options`, typed."""
        return tuple(items.option(o) for o in self.options if isinstance(o, dict))

    def chosen_item(self, options: tuple[items.Option, ...] | None = None) -> items.Option | None:
        """The chosen option, typed: the first of `options` (this request's `option_items`,
        by default) with the chosen id, or None."""
        if self.option_id is None:
            return None
        if options is None:
            options = self.option_items
        return next((o for o in options if o.option_id == self.option_id), None)

    @property
    def rejected(self) -> bool:
        """Answered no: a reject option chosen (by the person or a policy), or the request
        cancelled by a policy that had no reject option to choose."""
        if self.outcome == "pending":
            return False
        if self.outcome == "cancelled" or self.option_id is None:
            return (self.decided_by or "").startswith("policy")
        chosen = self.chosen_item()
        return chosen is not None and chosen.kind in ("reject_once", "reject_always")

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "permission",
            "id": self.part_id,
            "toolCallId": self.tool_call_id,
            "title": self.title,
            "options": self.options,
            "outcome": self.outcome,
            "optionId": self.option_id,
            "decidedBy": self.decided_by,
        }

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> PermissionPart:
        return cls(
            text(d.get("id")),
            text(d.get("toolCallId")),
            text(d.get("title")),
            dicts(d.get("options")),
            text(d.get("outcome")) or "pending",
            opt_text(d.get("optionId")),
            opt_text(d.get("decidedBy")),
        )


@dataclass(slots=True, frozen=True)
class PlanEntry:
    """One step of the agent's plan: its text, `priority` (high, medium, low) and `status`
    (pending, in_progress, completed), as the agent last sent them."""

    #: What the step is, in the agent's words.
    content: str
    #: `high`, `medium` or `low`.
    priority: str = "medium"
    #: `pending`, `in_progress` or `completed`.
    status: str = "pending"

    def to_json(self) -> dict[str, Any]:
        return {"content": self.content, "priority": self.priority, "status": self.status}

    @classmethod
    def from_json(cls, e: dict[Any, Any]) -> PlanEntry:
        return cls(
            text(e.get("content")), text(e.get("priority")), text(e.get("status")) or "pending"
        )

    @classmethod
    def list_from_json(cls, x: Any) -> list[PlanEntry]:
        return [cls.from_json(e) for e in dicts(x)]


@dataclass(slots=True, eq=False)
class PlanPart:
    """A plan as last sent. The legacy `plan` (no `plan_id`): every update replaces its entries.
    A plan by id (`plan_update`): a checklist (`entries`) or a Markdown document (`markdown`,
    and the `path` of its file if the agent named one); `removed` once `plan_removed` said so."""

    part_id: str
    entries: list[PlanEntry] = field(default_factory=list)
    plan_id: str | None = None
    markdown: str | None = None
    path: str | None = None
    removed: bool = False

    kind = "plan"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "plan",
            "id": self.part_id,
            "entries": [e.to_json() for e in self.entries],
        }
        if self.plan_id is not None:
            out["planId"] = self.plan_id
        if self.markdown is not None:
            out["markdown"] = self.markdown
        if self.path is not None:
            out["path"] = self.path
        if self.removed:
            out["removed"] = True
        return out

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> PlanPart:
        markdown = d.get("markdown")
        return cls(
            text(d.get("id")),
            PlanEntry.list_from_json(d.get("entries")),
            opt_text(d.get("planId")),
            text(markdown) if isinstance(markdown, str) else None,
            opt_text(d.get("path")),
            d.get("removed") is True,
        )


@dataclass(slots=True, eq=False)
class RawPart:
    """An update we could not fold: a kind newer than our schema, or one that failed validation.

    Kept whole so nothing the agent said is dropped; renderers show it as data.
    """

    part_id: str
    update_kind: str
    raw: Any
    problem: str | None = None

    kind = "raw"

    def to_json(self) -> dict[str, Any]:
        out = {
            "type": "raw",
            "id": self.part_id,
            "sessionUpdate": self.update_kind,
            "raw": self.raw,
        }
        if self.problem:
            out["problem"] = self.problem
        return out

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> RawPart:
        kind = d.get("sessionUpdate")
        name = text(kind)  # kept as it is when a string, even empty (the views show "?")
        return cls(
            text(d.get("id")),
            name if name or isinstance(kind, str) else "?",
            d.get("raw"),
            opt_text(d.get("problem")),
        )


@dataclass(slots=True, eq=False)
class ErrorPart:
    """Something the user must see that is not the agent's words: a protocol error, a failure."""

    part_id: str
    message: str
    level: Literal["error", "warning"] = "error"

    kind = "error"

    def to_json(self) -> dict[str, Any]:
        return {"type": "error", "id": self.part_id, "level": self.level, "message": self.message}

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> ErrorPart:
        return cls(
            text(d.get("id")),
            text(d.get("message")),
            "warning" if d.get("level") == "warning" else "error",
        )


#: How deep a transcript's subagent cards are read (deeper ones are kept as data).
READ_DEPTH = 4


@dataclass(slots=True, eq=False)
class SubagentPart:
    """A child session's work in this turn (a sub-turn card): what the parent's agent said it
    is (`title`, `description`), its work state (`running`, `idle`… and on idle why it stopped),
    whether the client may cancel it, and its own parts (written by the child's fold)."""

    part_id: str
    session_id: str
    title: str | None = None
    description: str | None = None
    state: str | None = None
    stop_reason: str | None = None
    can_cancel: bool = False
    parts: list[Part] = field(default_factory=list)
    #: What its fold left out, by kind (as `TurnRecord.dropped`).
    dropped: dict[str, int] = field(default_factory=dict)
    #: Its context use and cost, when the child reported them.
    usage: Usage | None = None

    kind = "subagent"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "subagent", "id": self.part_id, "sessionId": self.session_id}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("state", self.state),
            ("stopReason", self.stop_reason),
        ):
            if value is not None:
                out[key] = value
        if self.can_cancel:
            out["canCancel"] = True
        out["parts"] = [p.to_json() for p in self.parts]
        if self.dropped:
            out["dropped"] = dict(self.dropped)
        if self.usage is not None:
            out["usage"] = self.usage.to_json()
        return out

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> SubagentPart:
        return cls.read(d, 0)

    @classmethod
    def read(cls, d: dict[Any, Any], depth: int) -> SubagentPart:
        parts: list[Part] = []
        for x in dicts(d.get("parts")):
            if x.get("type") == "subagent":
                deep = depth + 1 >= READ_DEPTH
                parts.append(
                    RawPart(text(x.get("id")), "subagent", x) if deep else cls.read(x, depth + 1)
                )
            else:
                parts.append(part_from_json(x))
        dropped = {
            text(k): n
            for k, v in mapping(d.get("dropped")).items()
            if (n := integer(v)) is not None
        }
        return cls(
            text(d.get("id")),
            text(d.get("sessionId")),
            opt_text(d.get("title")),
            opt_text(d.get("description")),
            opt_text(d.get("state")),
            opt_text(d.get("stopReason")),
            d.get("canCancel") is True,
            parts,
            dropped,
            Usage.from_json(d.get("usage")),
        )


Part = (
    MessagePart
    | ToolCallPart
    | PermissionPart
    | ElicitationPart
    | PlanPart
    | RawPart
    | ErrorPart
    | NoticePart
    | CompactionPart
    | SubagentPart
    | SuggestionsPart
)

_READERS: dict[str, Callable[[dict[Any, Any]], Part]] = {
    "message": MessagePart.from_json,
    "tool_call": ToolCallPart.from_json,
    "permission": PermissionPart.from_json,
    "elicitation": ElicitationPart.from_json,
    "plan": PlanPart.from_json,
    "raw": RawPart.from_json,
    "error": ErrorPart.from_json,
    "notice": NoticePart.from_json,
    "compaction": CompactionPart.from_json,
    "subagent": SubagentPart.from_json,
    "suggestions": SuggestionsPart.from_json,
}


def part_from_json(d: dict[Any, Any]) -> Part:
    """A part from its `to_json()` dict; a part of a kind we do not know is kept as data."""
    kind = d.get("type")
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is not None:
        return reader(d)
    return RawPart(text(d.get("id")), f"part {text(kind) or '?'}", d, None)


@dataclass(slots=True, frozen=True)
class Usage:
    """Context window use and the session's cumulative cost, as of the last `usage_update`.

    `used` and `size` are always set by the fold; only a transcript read back may lack them.
    """

    #: Tokens of the context window in use.
    used: int | None
    #: The context window's size, in tokens.
    size: int | None
    #: The session's cumulative cost so far, in `cost_currency`.
    cost_amount: float | None = None
    #: The cost's currency as the agent names it (`USD`…); budgets count only USD.
    cost_currency: str | None = None

    @property
    def fraction(self) -> float | None:
        """`used / size`, None when either is unknown."""
        if self.used is None or not self.size or self.size <= 0:
            return None
        return max(0.0, self.used / self.size)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"used": self.used, "size": self.size}
        if self.cost_amount is not None:
            out["cost"] = {"amount": self.cost_amount, "currency": self.cost_currency}
        return out

    @classmethod
    def from_json(cls, x: Any) -> Usage | None:
        """The usage of a transcript; None when it says nothing of it."""
        if not isinstance(x, dict):
            return None
        cost = mapping(x.get("cost"))
        used, size = integer(x.get("used")), integer(x.get("size"))
        amount = number(cost.get("amount"))
        if used is None and size is None and amount is None:
            return None
        return cls(used, size, amount, opt_text(cost.get("currency")))
