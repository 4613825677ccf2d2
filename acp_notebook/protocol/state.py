"""The parts of a turn, as the client keeps them. Plain mutable records, no I/O.

Parts are the units a renderer draws and subscribers receive: messages (agent, user, thought),
tool calls, permission requests, the plan, updates of kinds newer than our schema, and errors.
Message text lives in a `StringIO` (from a message's second chunk) so memory grows with the text,
not with the number of chunks.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["agent", "user", "thought"]

UNFINISHED = frozenset({"pending", "in_progress"})
DEFAULT_OUTPUT_LIMIT = 1024 * 1024


@dataclass(slots=True, eq=False)
class MessagePart:
    part_id: str
    role: Role
    message_id: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)  # non-text content blocks
    # The text: a plain string while it is one chunk, a StringIO from the second on. A StringIO
    # costs about 240 bytes, and a turn alternating thought and answer makes a part per chunk.
    _head: str = field(default="", repr=False)
    _buf: io.StringIO | None = field(default=None, repr=False)

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
        out: dict[str, Any] = {"type": "message", "id": self.part_id, "role": self.role,
                               "text": self.text}
        if self.message_id is not None:
            out["messageId"] = self.message_id
        if self.blocks:
            out["blocks"] = self.blocks
        return out


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
    size: int = field(default=0, repr=False)  # characters counted against the turn's budget
    # Every kind the agent ever stated for this call (updates and permission requests), not
    # only the latest: a permission policy must not let a call shed a kind by relabelling.
    stated_kinds: set[str] = field(default_factory=set, repr=False)
    # Every content type it ever showed ("diff", "terminal"): replacing its content by an update
    # does not make an edit or an execute it showed into something else.
    shown_types: set[str] = field(default_factory=set, repr=False)

    kind = "tool_call"

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "tool_call", "id": self.part_id,
                               "toolCallId": self.tool_call_id, "title": self.title,
                               "kind": self.tool_kind, "status": self.status}
        if self.content:
            out["content"] = self.content
        if self.locations:
            out["locations"] = self.locations
        if self.raw_input is not None:
            out["rawInput"] = self.raw_input
        if self.raw_output is not None:
            out["rawOutput"] = self.raw_output
        return out


@dataclass(slots=True, eq=False)
class PermissionPart:
    """A `session/request_permission` and, once known, its answer."""

    part_id: str
    tool_call_id: str
    title: str
    options: list[dict[str, Any]]
    outcome: Literal["pending", "selected", "cancelled"] = "pending"
    option_id: str | None = None
    decided_by: str | None = None  # "policy", "user", "cancel", "agent" ($/cancel_request)

    kind = "permission"

    @property
    def chosen(self) -> dict[str, Any] | None:
        return next((o for o in self.options if o.get("optionId") == self.option_id), None)

    def to_json(self) -> dict[str, Any]:
        return {"type": "permission", "id": self.part_id, "toolCallId": self.tool_call_id,
                "title": self.title, "options": self.options, "outcome": self.outcome,
                "optionId": self.option_id, "decidedBy": self.decided_by}


@dataclass(slots=True, frozen=True)
class PlanEntry:
    content: str
    priority: str = "medium"
    status: str = "pending"

    def to_json(self) -> dict[str, Any]:
        return {"content": self.content, "priority": self.priority, "status": self.status}


@dataclass(slots=True, eq=False)
class PlanPart:
    """The plan as last sent: every `plan` update replaces it whole."""

    part_id: str
    entries: list[PlanEntry] = field(default_factory=list)

    kind = "plan"

    def to_json(self) -> dict[str, Any]:
        return {"type": "plan", "id": self.part_id, "entries": [e.to_json() for e in self.entries]}


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
        out = {"type": "raw", "id": self.part_id, "sessionUpdate": self.update_kind,
               "raw": self.raw}
        if self.problem:
            out["problem"] = self.problem
        return out


@dataclass(slots=True, eq=False)
class ErrorPart:
    """Something the user must see that is not the agent's words: a protocol error, a failure."""

    part_id: str
    message: str
    level: Literal["error", "warning"] = "error"

    kind = "error"

    def to_json(self) -> dict[str, Any]:
        return {"type": "error", "id": self.part_id, "level": self.level, "message": self.message}


@dataclass(eq=False)
class TerminalView:
    """What a terminal printed and how it ended; kept after release for the record."""

    terminal_id: str
    command: str
    output: bytearray = field(default_factory=bytearray)
    limit: int = DEFAULT_OUTPUT_LIMIT
    truncated: bool = False
    exit_code: int | None = None
    signal: str | None = None
    released: bool = False

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    @property
    def exited(self) -> bool:
        return self.exit_code is not None or self.signal is not None

    def append(self, data: bytes) -> None:
        self.output += data
        excess = len(self.output) - self.limit
        if excess > 0:
            # Drop from the start, then skip UTF-8 continuation bytes so we cut on a boundary.
            while excess < len(self.output) and (self.output[excess] & 0xC0) == 0x80:
                excess += 1
            del self.output[:excess]
            self.truncated = True

    def exit_status(self) -> dict[str, Any]:
        return {"exitCode": self.exit_code, "signal": self.signal}

    def to_json(self) -> dict[str, Any]:
        return {"terminalId": self.terminal_id, "command": self.command, "output": self.text,
                "truncated": self.truncated, "exitStatus": self.exit_status()}



Part = MessagePart | ToolCallPart | PermissionPart | PlanPart | RawPart | ErrorPart


@dataclass(slots=True, frozen=True)
class Usage:
    """Context window use and the session's cumulative cost, as of the last `usage_update`."""

    used: int
    size: int
    cost_amount: float | None = None
    cost_currency: str | None = None

    @property
    def fraction(self) -> float | None:
        return self.used / self.size if self.size else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"used": self.used, "size": self.size}
        if self.cost_amount is not None:
            out["cost"] = {"amount": self.cost_amount, "currency": self.cost_currency}
        return out
