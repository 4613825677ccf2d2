"""Read a turn transcript defensively into typed, immutable records.

The transcript is the dict of `TurnResult.to_json()`, but it may come from a saved notebook or an
older version: any key may be missing or of the wrong type. Everything below is total: a value of
the wrong type reads as absent, and nothing here raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

_MISSING = object()
_BIG = 2**63


def text(x: Any) -> str:
    """A string, a number as its string, anything else as ""."""
    if isinstance(x, str):
        return x.replace("\x00", "")
    if isinstance(x, int | float) and not isinstance(x, bool):
        try:
            return str(x)
        except ValueError:  # an int too long to print
            return ""
    return ""


def opt_text(x: Any) -> str | None:
    s = text(x)
    return s or None


def number(x: Any) -> float | None:
    """A finite int or float (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    try:
        value = float(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def integer(x: Any) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x if abs(x) < _BIG else None
    if isinstance(x, float) and math.isfinite(x) and x.is_integer() and abs(x) < _BIG:
        return int(x)
    return None


def mapping(x: Any) -> dict[Any, Any]:
    return x if isinstance(x, dict) else {}


def dicts(x: Any) -> list[dict[Any, Any]]:
    """The dict items of a list (or tuple); anything else is empty."""
    if not isinstance(x, list | tuple):
        return []
    return [item for item in x if isinstance(item, dict)]


# -- records ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    role: str  # agent, user, thought (anything else is shown as agent text)
    text: str
    blocks: tuple[dict[Any, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class TextContent:
    text: str


@dataclass(frozen=True, slots=True)
class DiffContent:
    path: str
    old: str | None  # None: a new file
    new: str


@dataclass(frozen=True, slots=True)
class TerminalContent:
    terminal_id: str


@dataclass(frozen=True, slots=True)
class BlockContent:
    """A non-text content block (image, audio, resource, resource_link) or an unknown item."""

    block: dict[Any, Any]


Content = TextContent | DiffContent | TerminalContent | BlockContent


@dataclass(frozen=True, slots=True)
class Location:
    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: str
    title: str
    kind: str
    status: str
    content: tuple[Content, ...] = ()
    locations: tuple[Location, ...] = ()
    raw_input: Any = _MISSING
    raw_output: Any = _MISSING

    @property
    def has_raw_input(self) -> bool:
        return self.raw_input is not _MISSING

    @property
    def has_raw_output(self) -> bool:
        return self.raw_output is not _MISSING


@dataclass(frozen=True, slots=True)
class Option:
    option_id: str
    name: str
    kind: str


@dataclass(frozen=True, slots=True)
class Permission:
    title: str
    options: tuple[Option, ...]
    outcome: str  # pending, selected, cancelled
    option_id: str | None
    decided_by: str | None

    @property
    def chosen(self) -> Option | None:
        if self.option_id is None:
            return None
        return next((o for o in self.options if o.option_id == self.option_id), None)


@dataclass(frozen=True, slots=True)
class PlanItem:
    content: str
    priority: str
    status: str


@dataclass(frozen=True, slots=True)
class Plan:
    entries: tuple[PlanItem, ...]


@dataclass(frozen=True, slots=True)
class Raw:
    kind: str
    raw: Any
    problem: str | None


@dataclass(frozen=True, slots=True)
class Error:
    level: str  # error or warning
    message: str


Part = Message | ToolCall | Permission | Plan | Raw | Error


@dataclass(frozen=True, slots=True)
class Terminal:
    terminal_id: str
    command: str
    output: str
    truncated: bool
    exit_code: int | None
    signal: str | None

    @property
    def exited(self) -> bool:
        return self.exit_code is not None or self.signal is not None


@dataclass(frozen=True, slots=True)
class UsageInfo:
    used: int | None
    size: int | None
    cost: float | None  # cumulative, for the session
    currency: str | None

    @property
    def fraction(self) -> float | None:
        if self.used is None or not self.size or self.size <= 0:
            return None
        return max(0.0, self.used / self.size)


@dataclass(frozen=True, slots=True)
class Turn:
    turn_id: str
    agent: str
    live: bool
    success: bool | None
    stop_reason: str | None
    error: str | None
    text: str  # the answer: agent messages joined
    thoughts: str
    parts: tuple[Part, ...]
    plan: tuple[PlanItem, ...]
    terminals: dict[str, Terminal]
    usage: UsageInfo | None
    cost: float | None  # this turn's
    tokens: dict[str, int]
    duration: float | None
    note: str = ""  # the client's word on the turn ("replayed history"), not the agent's

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def permissions(self) -> list[Permission]:
        return [p for p in self.parts if isinstance(p, Permission)]

    @property
    def errors(self) -> list[Error]:
        return [p for p in self.parts if isinstance(p, Error)]

    @property
    def raws(self) -> list[Raw]:
        return [p for p in self.parts if isinstance(p, Raw)]


# -- reading ------------------------------------------------------------------------------------


def read_turn(transcript: Any, *, live: bool = False) -> Turn:
    t = mapping(transcript)
    parts = [p for p in (_part(d) for d in dicts(t.get("parts"))) if p is not None]

    # The parts are the source; the top-level text, thoughts and plan stand in when the parts
    # lack them (a hand-made or trimmed transcript): nothing is shown twice and nothing lost.
    # Stand-ins go first, in the order a turn produces them: thoughts, plan, answer.
    stand_ins: list[Part] = []
    thoughts = "\n\n".join(p.text for p in parts
                           if isinstance(p, Message) and p.role == "thought" and p.text)
    top_thoughts = text(t.get("thoughts"))
    if not thoughts and top_thoughts:
        stand_ins.append(Message("thought", top_thoughts))
        thoughts = top_thoughts
    plans = [p for p in parts if isinstance(p, Plan)]
    plan = plans[-1].entries if plans else _plan_items(t.get("plan"))
    if not plans and plan:
        stand_ins.append(Plan(plan))
    answer = "\n\n".join(p.text for p in parts
                         if isinstance(p, Message) and p.role == "agent" and p.text)
    top_text = text(t.get("text"))
    if not any(isinstance(p, Message) and p.role == "agent" for p in parts) and top_text:
        stand_ins.append(Message("agent", top_text))
        answer = top_text
    parts[:0] = stand_ins

    terminals: dict[str, Terminal] = {}
    for d in dicts(t.get("terminals")):
        term = _terminal(d)
        if term.terminal_id:
            terminals[term.terminal_id] = term

    success = t.get("success")
    return Turn(
        turn_id=text(t.get("turnId")),
        agent=text(t.get("agent")),
        live=bool(live),
        success=success if isinstance(success, bool) else None,
        stop_reason=opt_text(t.get("stopReason")),
        error=opt_text(t.get("error")),
        text=answer,
        thoughts=thoughts,
        parts=tuple(parts),
        plan=plan,
        terminals=terminals,
        usage=_usage(t.get("usage")),
        cost=number(t.get("cost")),
        tokens=_tokens(t.get("tokens")),
        duration=number(t.get("duration")),
        note=text(t.get("note")),
    )


def _part(d: dict[Any, Any]) -> Part | None:
    kind = d.get("type")
    if kind == "message":
        return Message(text(d.get("role")) or "agent", text(d.get("text")),
                       tuple(dicts(d.get("blocks"))))
    if kind == "tool_call":
        return _tool_call(d)
    if kind == "permission":
        options = tuple(Option(text(o.get("optionId")), text(o.get("name")), text(o.get("kind")))
                        for o in dicts(d.get("options")))
        return Permission(text(d.get("title")), options, text(d.get("outcome")) or "pending",
                          opt_text(d.get("optionId")), opt_text(d.get("decidedBy")))
    if kind == "plan":
        return Plan(_plan_items(d.get("entries")))
    if kind == "error":
        level = "warning" if d.get("level") == "warning" else "error"
        return Error(level, text(d.get("message")))
    if kind == "raw":
        return Raw(text(d.get("sessionUpdate")) or "?", d.get("raw"), opt_text(d.get("problem")))
    # A part of a kind this renderer does not know: shown as data, never dropped.
    return Raw(f"part {text(kind) or '?'}", d, None)


def _tool_call(d: dict[Any, Any]) -> ToolCall:
    locations = tuple(Location(text(loc.get("path")), integer(loc.get("line")))
                      for loc in dicts(d.get("locations")))
    content = tuple(_content(c) for c in dicts(d.get("content")))
    return ToolCall(
        call_id=text(d.get("toolCallId")),
        title=text(d.get("title")),
        kind=text(d.get("kind")) or "other",
        status=text(d.get("status")) or "pending",
        content=content,
        locations=locations,
        raw_input=d["rawInput"] if "rawInput" in d else _MISSING,
        raw_output=d["rawOutput"] if "rawOutput" in d else _MISSING,
    )


def _content(c: dict[Any, Any]) -> Content:
    kind = c.get("type")
    if kind == "diff":
        old = c.get("oldText")
        return DiffContent(text(c.get("path")), old if isinstance(old, str) else None,
                           text(c.get("newText")))
    if kind == "terminal":
        return TerminalContent(text(c.get("terminalId")))
    if kind == "content":
        block = mapping(c.get("content"))
        if block.get("type") == "text":
            return TextContent(text(block.get("text")))
        return BlockContent(block or c)
    if kind == "text":  # lenient: a bare text block
        return TextContent(text(c.get("text")))
    return BlockContent(c)


def _plan_items(x: Any) -> tuple[PlanItem, ...]:
    return tuple(PlanItem(text(e.get("content")), text(e.get("priority")),
                          text(e.get("status")) or "pending") for e in dicts(x))


def _terminal(d: dict[Any, Any]) -> Terminal:
    status = mapping(d.get("exitStatus"))
    return Terminal(text(d.get("terminalId")), text(d.get("command")), text(d.get("output")),
                    d.get("truncated") is True, integer(status.get("exitCode")),
                    opt_text(status.get("signal")))


def _tokens(x: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, value in mapping(x).items():
        n = integer(value)
        if n is not None and isinstance(key, str):
            out[key] = n
    return out


def _usage(x: Any) -> UsageInfo | None:
    if not isinstance(x, dict):
        return None
    cost = mapping(x.get("cost"))
    used, size = integer(x.get("used")), integer(x.get("size"))
    amount = number(cost.get("amount"))
    if used is None and size is None and amount is None:
        return None
    return UsageInfo(used, size, amount, opt_text(cost.get("currency")))
