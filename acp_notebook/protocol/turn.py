"""A turn: the record the fold writes while it runs (`TurnRecord`), the result it freezes into
(`TurnResult`), its transcript (the JSON of either, `turn_json`) and that JSON read back for the
renderers (`read_turn` into a `Transcript`).

Three classes, each for its reader: the record is mutable and carries the fold's bookkeeping
(budget, overflow, messages by id); the result is the public, frozen answer of
`await turn.finished`; the transcript is what every view draws, from a turn still streaming, a
finished one, or one read from a saved notebook, where any key may be missing or wrong.

The transcript is the dict `turn_json` writes (for a running turn: `TurnRecord.to_json`, for a
finished one: `TurnResult.to_json`). `read_turn` is total: a value of the wrong type reads as
absent, and it never raises. Its parts are the classes the fold builds (`state`), so a turn
streaming, finished, or read from a notebook is drawn from the same objects.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .coerce import dicts, integer, mapping, number, opt_text, text
from .limits import DEFAULT_LIMITS, Budget
from .state import (
    ErrorPart,
    MessagePart,
    Part,
    PermissionPart,
    PlanEntry,
    PlanPart,
    RawPart,
    ToolCallPart,
    Usage,
    part_from_json,
)
from .subagents import SubagentResult, results
from .terminals import Terminal, TerminalView

#: Stop reasons that mean the agent finished the work it was given.
SUCCESS_STOP_REASONS = frozenset({"end_turn"})


@dataclass(slots=True, eq=False)
class TurnRecord:
    """Everything one turn produced, in arrival order. Mutated by the fold while the turn runs."""

    turn_id: str
    prompt: list[dict[str, Any]] = field(default_factory=list)  # the ACP blocks sent
    parts: list[Part] = field(default_factory=list)
    tool_calls: dict[str, ToolCallPart] = field(default_factory=dict)
    plan: PlanPart | None = None
    terminals: dict[str, TerminalView] = field(default_factory=dict)
    usage_at_start: Usage | None = None
    started_at: float = field(default_factory=time.time)
    replay: bool = False  # history replayed by session/load
    budget: Budget = field(default_factory=lambda: Budget.of(DEFAULT_LIMITS), repr=False)
    #: What the limits made the fold leave out, by kind (e.g. {"plan_entries": 99000}).
    dropped: dict[str, int] = field(default_factory=dict)
    dropped_note: ErrorPart | None = field(default=None, repr=False)
    #: Past the parts cap, text joins the last message of its role: found once, kept here.
    overflow: dict[str, MessagePart | None] = field(default_factory=dict, repr=False)
    #: Messages by (role, messageId): a chunk with a known id joins its message even after a
    #: thought or a tool call came in between (ACP: the id, not adjacency, names the message).
    by_message_id: dict[tuple[str, str], MessagePart] = field(default_factory=dict, repr=False)
    #: Calls known only from a permission request (fast-agent names them "pending"): the next
    #: announced call of the same title and input is the same call under its real id.
    asked_only: dict[str, ToolCallPart] = field(default_factory=dict, repr=False)

    def messages(self, role: str) -> list[MessagePart]:
        return [p for p in self.parts if isinstance(p, MessagePart) and p.role == role]

    def joined(self, role: str) -> str:
        return joined(self.parts, role)

    def terminal_ids(self) -> set[str]:
        """The client terminals this turn created or embedded in a tool call."""
        ids = set(self.terminals)
        for call in self.tool_calls.values():
            for item in call.content:
                if item.get("type") == "terminal" and isinstance(item.get("terminalId"), str):
                    ids.add(item["terminalId"])
        return ids

    def to_json(
        self,
        *,
        agent: str | None = None,
        terminals: dict[str, TerminalView] | None = None,
        session_id: str | None = None,
        usage: Usage | None = None,
        prompt: list[dict[str, Any]] | None = None,
        title: str | None = None,
        note: str = "",
    ) -> dict[str, Any]:
        """The transcript of the turn so far (still running, or replayed history): what the
        record holds, with what the session knows (the agent's name, the views of the
        session's terminals, its usage and title)."""
        parts = [p.to_json() for p in self.parts]
        views = terminals or {}
        return turn_json(
            turn_id=self.turn_id,
            session_id=session_id,
            agent=agent,
            text=joined(self.parts, "agent", parts),
            thoughts=joined(self.parts, "thought", parts),
            usage=usage,
            plan=self.plan.entries if self.plan else (),
            prompt=self.prompt if prompt is None else prompt,
            terminals=[views[t].to_json() for t in self.terminal_ids() if t in views],
            parts=parts,
            duration=time.time() - self.started_at,
            dropped=self.dropped,
            title=title,
            note=note,
        )


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What `await turn.finished` gives: always a result, never an exception.

    Check `success`: a turn that was cancelled, refused, or failed (agent exit, protocol error,
    timeout) resolves too, with `error` saying why and `stop_reason` set when the agent gave one.
    """

    #: The turn's id in its session (the live view and the record find it by this id).
    turn_id: str
    #: The agent finished the work: no error, and it stopped with `end_turn`.
    success: bool
    #: The answer: the agent's messages of this turn, joined by blank lines (Markdown).
    text: str
    #: Why the turn did not succeed (agent exit, protocol error, timeout, refusal, budget), or None.
    error: str | None = None
    #: What the agent answered the prompt with (`end_turn`, `cancelled`, `refusal`,
    #: `max_tokens`…), None when it never answered.
    stop_reason: str | None = None
    #: Context use and the session's cumulative cost, as of the turn's last `usage_update`.
    usage: Usage | None = None
    #: This turn's share of the cumulative cost, when the agent sent it.
    cost: float | None = None
    #: The agent's plan as the turn ended.
    plan: tuple[PlanEntry, ...] = ()
    #: The turn's tool calls, in the order they started, each in its last state.
    tool_calls: tuple[ToolCallPart, ...] = ()
    #: The agent's thoughts, joined as `text` is.
    thoughts: str = ""
    #: The permission requests of the turn and how each was answered.
    permissions: tuple[PermissionPart, ...] = ()
    #: Updates of kinds this client does not know, kept as they came.
    unknown_updates: tuple[RawPart, ...] = ()
    #: The error and warning parts' messages (bad lines from the agent, failed attempts…).
    errors: tuple[str, ...] = ()
    #: The agent's session id the turn ran in.
    session_id: str | None = None
    #: The agent, as people call it (`Client.agent_name`).
    agent: str | None = None
    #: The ACP content blocks sent as the prompt.
    prompt: tuple[dict[str, Any], ...] = ()
    #: Everything the turn produced, in arrival order: what every view draws.
    parts: tuple[Part, ...] = ()
    #: Seconds from the turn's start to its end.
    duration: float = 0.0
    #: `PromptResponse.usage` (an unstable part of ACP: token counts), when the agent sent it.
    tokens: dict[str, Any] | None = None
    #: What each client terminal of the turn printed.
    terminals: tuple[dict[str, Any], ...] = ()
    #: What the client's limits left out of this turn, by kind (`Limits`); empty when nothing.
    dropped: dict[str, int] = field(default_factory=dict)
    #: The validated answer of a structured turn (`output_type=`, `--schema`): a model instance
    #: or a JSON value; None otherwise. `output_json` is its JSON form, what the transcript keeps.
    output: Any = field(default=None, compare=False)
    #: `output` as JSON (what the transcript keeps, and a replayed turn has); None otherwise.
    output_json: Any = None
    #: The turn was stopped because its cost passed its budget (`max_cost`, `--max-cost`).
    over_budget: bool = False
    #: The session's title as the turn ended (`session_info_update`), when the agent gave one.
    title: str | None = None
    #: The session's model as the turn ended (its `model` config option), as the agent names it.
    model: str | None = None
    #: The options of the `%%agent` line that asked for this turn, as written (None for a turn
    #: of the Python API). A replay compares a cell with them: the cell's source may have been
    #: edited since the record was made.
    cell_options: str | None = None

    @property
    def cancelled(self) -> bool:
        """Whether the turn ended because it was cancelled (Stop, an interrupt, `stop()`)."""
        return self.stop_reason == "cancelled"

    @property
    def subagents(self) -> tuple[SubagentResult, ...]:
        """The child sessions the agent exposed in this turn, each with its answer (`text`),
        its `tool_calls` and how it ended (see `SubagentResult`)."""
        return results(self.parts)

    def to_json(self, note: str = "") -> dict[str, Any]:
        """The turn's transcript: plain JSON, enough to render and replay it without the agent
        (`note`: the client's word on it, shown by the views, not read back)."""
        return turn_json(
            turn_id=self.turn_id,
            session_id=self.session_id,
            agent=self.agent,
            success=self.success,
            stop_reason=self.stop_reason,
            error=self.error,
            text=self.text,
            thoughts=self.thoughts,
            usage=self.usage,
            cost=self.cost,
            tokens=self.tokens,
            plan=self.plan,
            prompt=list(self.prompt),
            terminals=list(self.terminals),
            parts=[p.to_json() for p in self.parts],
            duration=self.duration,
            dropped=self.dropped,
            output_json=self.output_json,
            over_budget=self.over_budget,
            title=self.title,
            model=self.model,
            cell_options=self.cell_options,
            note=note,
        )

    @classmethod
    def from_json(cls, transcript: Any) -> TurnResult:
        """The result a transcript (`to_json()`) records; total: never raises.

        The transcript may come from a saved notebook (a replay): a key missing or of the wrong
        type reads as absent, and `from_json(r.to_json()).to_json() == r.to_json()` for a result
        `r`. The lists derived from the parts (tool calls, permissions, errors) are derived
        again, as `finish` derives them, so they are the same objects as `parts` holds.
        """
        t = mapping(transcript)
        parts = tuple(part_from_json(d) for d in dicts(t.get("parts")))
        success = t.get("success")
        answer = t.get("text")
        thoughts = t.get("thoughts")
        tokens = t.get("tokens")
        return cls(
            turn_id=text(t.get("turnId")),
            success=success if isinstance(success, bool) else False,
            text=text(answer) if isinstance(answer, str) else joined(parts, "agent"),
            error=opt_text(t.get("error")),
            stop_reason=opt_text(t.get("stopReason")),
            usage=Usage.from_json(t.get("usage")),
            cost=number(t.get("cost")),
            plan=tuple(PlanEntry.list_from_json(t.get("plan"))),
            tool_calls=tuple(p for p in parts if isinstance(p, ToolCallPart)),
            # A saved record leaves both out when its parts hold them (`transcript.compact`).
            thoughts=text(thoughts) if isinstance(thoughts, str) else joined(parts, "thought"),
            permissions=tuple(p for p in parts if isinstance(p, PermissionPart)),
            unknown_updates=tuple(p for p in parts if isinstance(p, RawPart)),
            errors=tuple(p.message for p in parts if isinstance(p, ErrorPart)),
            session_id=opt_text(t.get("sessionId")),
            agent=opt_text(t.get("agent")),
            prompt=tuple(dicts(t.get("prompt"))),
            parts=parts,
            duration=number(t.get("duration")) or 0.0,
            tokens=dict(tokens) if isinstance(tokens, dict) else None,
            terminals=tuple(dicts(t.get("terminals"))),
            # As JSON: the object a schema made of it is rebuilt by whoever has the schema.
            output=t.get("output"),
            output_json=t.get("output"),
            over_budget=t.get("overBudget") is True,
            title=opt_text(t.get("title")),
            model=opt_text(t.get("model")),
            # "" is a line without options: present, unlike a key that is missing.
            cell_options=text(options)
            if isinstance(options := t.get("cellOptions"), str)
            else None,
            dropped={
                k: n
                for k, v in mapping(t.get("dropped")).items()
                if isinstance(k, str) and (n := integer(v)) is not None
            },
        )

    def __repr__(self) -> str:
        state = "ok" if self.success else f"failed: {self.error or self.stop_reason}"
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"<TurnResult {self.turn_id} {state} stop_reason={self.stop_reason!r} text={text!r}>"


def turn_json(
    *,
    turn_id: str,
    agent: str | None,
    text: str,
    thoughts: str,
    plan: Iterable[PlanEntry],
    prompt: list[dict[str, Any]],
    terminals: list[dict[str, Any]],
    parts: list[dict[str, Any]],
    session_id: str | None = None,
    success: bool | None = None,
    stop_reason: str | None = None,
    error: str | None = None,
    usage: Usage | None = None,
    cost: float | None = None,
    tokens: dict[str, Any] | None = None,
    duration: float | None = None,
    dropped: dict[str, int] | None = None,
    output_json: Any = None,
    over_budget: bool = False,
    title: str | None = None,
    model: str | None = None,
    cell_options: str | None = None,
    note: str = "",
) -> dict[str, Any]:
    """A turn's transcript, running (no ending yet: `success` None) or finished: the one place
    its JSON is written. `read_turn` and `TurnResult.from_json` read it back.
    Long because each optional key is written only when set: a saved record holds no empty one."""
    out: dict[str, Any] = {
        "turnId": turn_id,
        "sessionId": session_id,
        "agent": agent,
        "success": success,
        "stopReason": stop_reason,
        "error": error,
        "text": text,
        "thoughts": thoughts,
        "usage": usage.to_json() if usage else None,
        "cost": cost,
        "tokens": tokens,
        "plan": [e.to_json() for e in plan],
        "prompt": prompt,
        "terminals": terminals,
        "parts": parts,
    }
    if duration is not None:
        out["duration"] = round(duration, 3)
    if dropped:
        out["dropped"] = dict(dropped)
    if output_json is not None:  # a replay rebuilds `output` from it with the same schema
        out["output"] = output_json
    if over_budget:
        out["overBudget"] = True
    if title:
        out["title"] = title
    if model:
        out["model"] = model
    if cell_options is not None:
        out["cellOptions"] = cell_options
    if note:
        out["note"] = note
    return out


def session_title(info: dict[str, Any]) -> str | None:
    """The session's title (`session_info_update`) on one line, bounded, or None."""
    title = info.get("title")
    return " ".join(title.split())[:200] or None if isinstance(title, str) else None


def finish(
    record: TurnRecord,
    *,
    stop_reason: str | None,
    error: str | None,
    usage: Usage | None,
    session_id: str | None,
    agent: str | None,
    tokens: dict[str, Any] | None = None,
    output: Any = None,
    output_json: Any = None,
    over_budget: bool = False,
    title: str | None = None,
    model: str | None = None,
) -> TurnResult:
    """Freeze a turn record into its result. Parts are copied: late updates must not change it."""
    parts = tuple(
        dataclasses.replace(p) if not isinstance(p, MessagePart) else p for p in record.parts
    )
    cost = None
    if usage is not None and usage.cost_amount is not None:
        before = record.usage_at_start.cost_amount if record.usage_at_start else None
        cost = usage.cost_amount - (before or 0.0)
    return TurnResult(
        turn_id=record.turn_id,
        success=error is None and stop_reason in SUCCESS_STOP_REASONS,
        text=record.joined("agent"),
        error=error,
        stop_reason=stop_reason,
        usage=usage,
        cost=cost,
        plan=tuple(record.plan.entries) if record.plan else (),
        tool_calls=tuple(p for p in parts if isinstance(p, ToolCallPart)),
        thoughts=record.joined("thought"),
        permissions=tuple(p for p in parts if isinstance(p, PermissionPart)),
        unknown_updates=tuple(p for p in parts if isinstance(p, RawPart)),
        errors=tuple(p.message for p in parts if isinstance(p, ErrorPart)),
        session_id=session_id,
        agent=agent,
        prompt=tuple(record.prompt),
        parts=parts,
        duration=time.time() - record.started_at,
        tokens=tokens,
        terminals=tuple(t.to_json() for t in record.terminals.values()),
        dropped=dict(record.dropped),
        output=output,
        output_json=output_json,
        over_budget=over_budget,
        title=title,
        model=model,
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
    model: str = ""  # the session's model, as the agent names it
    #: Seconds from the cell's start to the turn's (the agent starting, the session opening):
    #: the live clock counted them, `duration` does not.
    startup: float | None = None
    raised: bool = False  # its cell raised the error below the record (labels.raised_here)
    #: The card that draws each terminal's output: the first call that shows it (drawn at every
    #: one, 2,000 calls showing it 100 times each drew 16 GB of HTML from 1 MB: `draws_terminal`).
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
    thoughts = joined(parts, "thought")
    top_thoughts = "" if thoughts else text(t.get("thoughts"))
    if top_thoughts:
        stand_ins.append(_message("thought", top_thoughts))
        thoughts = top_thoughts
    plans = [p for p in parts if isinstance(p, PlanPart) and p.plan_id is None]  # legacy
    plan = tuple(plans[-1].entries if plans else PlanEntry.list_from_json(t.get("plan")))
    if not plans and plan:
        stand_ins.append(PlanPart("", list(plan)))
    answer = joined(parts, "agent")
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
        model=" ".join(text(t.get("model")).split())[:80],
        startup=number(t.get("startup")),
        raised=t.get("raised") is True,
        terminal_cards=terminal_cards_of(parts),
        rejected_calls=rejected_calls_of(parts),
    )


def rejected_calls_of(parts: list[Part]) -> frozenset[str]:
    """`Transcript.rejected_calls`: a call asked about again and allowed is not rejected."""
    answers: dict[str, bool] = {}
    for part in parts:
        if isinstance(part, PermissionPart) and part.outcome != "pending" and part.tool_call_id:
            answers[part.tool_call_id] = part.rejected
    return frozenset(call for call, rejected in answers.items() if rejected)


def terminal_cards_of(parts: list[Part]) -> dict[str, ToolCallPart]:
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
        if key in out and out[key] == joined(messages, role):
            del out[key]
    return out


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


def joined(
    parts: Iterable[Part], role: str, as_json: Sequence[dict[str, Any]] | None = None
) -> str:
    """The texts of the messages of `role` among `parts`, joined by blank lines: the answer (or
    the thoughts) of a turn. `as_json`, when given, is the parts' JSON, whose texts are read
    instead (a redraw has just made it: reading a streaming message's text copies all of it)."""
    if as_json is None:
        return "\n\n".join(
            p.text for p in parts if isinstance(p, MessagePart) and p.role == role and p.text
        )
    return "\n\n".join(
        j["text"]
        for p, j in zip(parts, as_json, strict=True)
        if isinstance(p, MessagePart) and p.role == role and j["text"]
    )
