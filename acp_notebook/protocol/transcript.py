"""A turn's transcript read back into the part model: what every renderer draws.

The transcript is the dict of `TurnResult.to_json()` (or of a turn still running, the same
shape), and it may come from a saved notebook or an older version: any key may be missing or of
the wrong type. `read_turn` is total: a value of the wrong type reads as absent, and it never
raises. Its parts are the classes the fold builds (`state`), so a turn streaming, finished, or
read from a notebook is drawn from the same objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .coerce import dicts, integer, mapping, number, opt_text, text
from .state import (
    ErrorPart,
    MessagePart,
    Part,
    PermissionPart,
    PlanEntry,
    PlanPart,
    RawPart,
    Terminal,
    ToolCallPart,
    Usage,
    part_from_json,
)


@dataclass(frozen=True, slots=True)
class Transcript:
    """One turn as a renderer sees it: its parts in arrival order and what is known of its end."""

    turn_id: str
    agent: str
    live: bool  # still streaming
    success: bool | None
    stop_reason: str | None
    error: str | None
    text: str  # the answer: agent messages joined
    thoughts: str
    parts: tuple[Part, ...]
    plan: tuple[PlanEntry, ...]
    terminals: dict[str, Terminal]
    usage: Usage | None
    cost: float | None  # this turn's
    tokens: dict[str, int]
    duration: float | None
    note: str = ""  # the client's word on the turn ("replayed history"), not the agent's
    title: str = ""  # the session's title, as the agent named it
    #: The card that draws each terminal's output: the first tool call that shows it. An
    #: agent's calls may each show one terminal, 100 times a call: drawn at every one, 2,000
    #: calls drew 16 GB of HTML from a 1 MB output (`draws_terminal`).
    terminal_cards: dict[str, ToolCallPart] = field(default_factory=dict)
    #: The tool calls (by `toolCallId`) whose last answered permission request was a rejection.
    rejected_calls: frozenset[str] = frozenset()

    def draws_terminal(self, call: ToolCallPart, terminal_id: str) -> bool:
        """Whether `call`'s card draws the output of `terminal_id` (its first that shows it;
        any card when the transcript does not say)."""
        return self.terminal_cards.get(terminal_id, call) is call

    def call_status(self, call: ToolCallPart) -> str:
        """The status a view shows for `call`: its own, but "rejected" where its permission was
        refused and the call did not run (the agent then reports it failed, cancelled, or
        leaves it pending). A call the agent says ran or runs keeps what it says."""
        if call.status in ("pending", "failed", "cancelled") and (
            call.tool_call_id in self.rejected_calls
        ):
            return "rejected"
        return call.status

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def permissions(self) -> list[PermissionPart]:
        return [p for p in self.parts if isinstance(p, PermissionPart)]

    @property
    def errors(self) -> list[ErrorPart]:
        return [p for p in self.parts if isinstance(p, ErrorPart)]

    @property
    def raws(self) -> list[RawPart]:
        return [p for p in self.parts if isinstance(p, RawPart)]


def read_turn(transcript: Any, *, live: bool = False) -> Transcript:
    """Read a transcript dict (anything, in fact) into a `Transcript`; never raises."""
    t = mapping(transcript)
    parts = [part_from_json(d) for d in dicts(t.get("parts"))]

    # The parts are the source; the top-level text, thoughts and plan stand in when the parts
    # lack them (a hand-made or trimmed transcript): nothing is shown twice and nothing lost.
    # Stand-ins go first, in the order a turn produces them: thoughts, plan, answer.
    # A stand-in is read only where it may stand in: a long answer's top-level text is the
    # parts' again, and reading it (`text` drops NULs) took half a live redraw's drawing.
    stand_ins: list[Part] = []
    thoughts = _joined(parts, "thought")
    top_thoughts = "" if thoughts else text(t.get("thoughts"))
    if top_thoughts:
        stand_ins.append(_message("thought", top_thoughts))
        thoughts = top_thoughts
    plans = [p for p in parts if isinstance(p, PlanPart)]
    plan = tuple(plans[-1].entries if plans else PlanEntry.list_from_json(t.get("plan")))
    if not plans and plan:
        stand_ins.append(PlanPart("", list(plan)))
    answer = _joined(parts, "agent")
    has_answer = any(isinstance(p, MessagePart) and p.role == "agent" for p in parts)
    top_text = "" if has_answer else text(t.get("text"))
    if top_text:
        stand_ins.append(_message("agent", top_text))
        answer = top_text
    parts[:0] = stand_ins

    terminals: dict[str, Terminal] = {}
    for d in dicts(t.get("terminals")):
        term = Terminal.from_json(d)
        if term.terminal_id:
            terminals[term.terminal_id] = term

    success = t.get("success")
    return Transcript(
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
        usage=Usage.from_json(t.get("usage")),
        cost=number(t.get("cost")),
        tokens=_tokens(t.get("tokens")),
        duration=number(t.get("duration")),
        note=text(t.get("note")),
        title=" ".join(text(t.get("title")).split())[:200],
        terminal_cards=_terminal_cards(parts),
        rejected_calls=_rejected_calls(parts),
    )


def _rejected_calls(parts: list[Part]) -> frozenset[str]:
    """`Transcript.rejected_calls`: a call asked about again and allowed is not rejected."""
    answers: dict[str, bool] = {}
    for part in parts:
        if isinstance(part, PermissionPart) and part.outcome != "pending" and part.tool_call_id:
            answers[part.tool_call_id] = part.rejected
    return frozenset(call for call, rejected in answers.items() if rejected)


def _terminal_cards(parts: list[Part]) -> dict[str, ToolCallPart]:
    """Each terminal's first tool call that shows it (`Transcript.terminal_cards`)."""
    cards: dict[str, ToolCallPart] = {}
    for part in parts:
        if isinstance(part, ToolCallPart):
            for c in part.content:
                if c.get("type") == "terminal":
                    cards.setdefault(text(c.get("terminalId")), part)
    return cards


def compact(transcript: dict[str, Any]) -> dict[str, Any]:
    """The transcript without its top-level `text` and `thoughts` where they are its parts'
    messages joined, what a saved record keeps: `read_turn` and `TurnResult.from_json` rebuild
    them from the parts, so the answer is not saved twice. A top-level text that differs (a
    hand-made transcript, a stand-in for missing parts) is kept."""
    messages = [
        part_from_json(d) for d in dicts(transcript.get("parts")) if d.get("type") == "message"
    ]
    out = dict(transcript)
    for key, role in (("text", "agent"), ("thoughts", "thought")):
        if key in out and out[key] == _joined(messages, role):
            del out[key]
    return out


def _joined(parts: list[Part], role: str) -> str:
    return "\n\n".join(
        p.text for p in parts if isinstance(p, MessagePart) and p.role == role and p.text
    )


def _message(role: str, body: str) -> MessagePart:
    part = MessagePart("", role)
    part.append(body)
    return part


def _tokens(x: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, value in mapping(x).items():
        n = integer(value)
        if n is not None and isinstance(key, str):
            out[key] = n
    return out
