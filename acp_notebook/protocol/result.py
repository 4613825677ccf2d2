"""The turn record (live) and the turn result (final, immutable)."""

from __future__ import annotations

import dataclasses
import time
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
    TerminalView,
    ToolCallPart,
    Usage,
    part_from_json,
)

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
        return "\n\n".join(t for t in (m.text for m in self.messages(role)) if t)

    def terminal_ids(self) -> set[str]:
        """The client terminals this turn created or embedded in a tool call."""
        ids = set(self.terminals)
        for call in self.tool_calls.values():
            for item in call.content:
                if item.get("type") == "terminal" and isinstance(item.get("terminalId"), str):
                    ids.add(item["terminalId"])
        return ids

    def to_json(self) -> dict[str, Any]:
        out = {
            "turnId": self.turn_id,
            "prompt": self.prompt,
            "parts": [p.to_json() for p in self.parts],
            "replay": self.replay,
        }
        if self.dropped:
            out["dropped"] = dict(self.dropped)
        return out


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
    #: The options of the `%%agent` line that asked for this turn, as written (None for a turn
    #: of the Python API). A replay compares a cell with them: the cell's source may have been
    #: edited since the record was made.
    cell_options: str | None = None

    @property
    def cancelled(self) -> bool:
        """Whether the turn ended because it was cancelled (Stop, an interrupt, `stop()`)."""
        return self.stop_reason == "cancelled"

    def to_json(self) -> dict[str, Any]:
        """The turn's transcript: plain JSON, enough to render and replay it without the agent."""
        return {
            "turnId": self.turn_id,
            "sessionId": self.session_id,
            "agent": self.agent,
            "success": self.success,
            "stopReason": self.stop_reason,
            "error": self.error,
            "text": self.text,
            "thoughts": self.thoughts,
            "usage": self.usage.to_json() if self.usage else None,
            "cost": self.cost,
            "tokens": self.tokens,
            "plan": [e.to_json() for e in self.plan],
            "prompt": list(self.prompt),
            "terminals": list(self.terminals),
            "parts": [p.to_json() for p in self.parts],
            "duration": round(self.duration, 3),
            **({"dropped": dict(self.dropped)} if self.dropped else {}),
            # Only when there is one: a replay rebuilds `output` from it with the same schema.
            **({"output": self.output_json} if self.output_json is not None else {}),
            **({"overBudget": True} if self.over_budget else {}),
            **({"title": self.title} if self.title else {}),
            **({"cellOptions": self.cell_options} if self.cell_options is not None else {}),
        }

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
            text=text(answer) if isinstance(answer, str) else _joined(parts, "agent"),
            error=opt_text(t.get("error")),
            stop_reason=opt_text(t.get("stopReason")),
            usage=Usage.from_json(t.get("usage")),
            cost=number(t.get("cost")),
            plan=tuple(PlanEntry.list_from_json(t.get("plan"))),
            tool_calls=tuple(p for p in parts if isinstance(p, ToolCallPart)),
            # A saved record leaves both out when its parts hold them (`transcript.compact`).
            thoughts=text(thoughts) if isinstance(thoughts, str) else _joined(parts, "thought"),
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


def _joined(parts: tuple[Part, ...], role: str) -> str:
    return "\n\n".join(
        p.text for p in parts if isinstance(p, MessagePart) and p.role == role and p.text
    )


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
    )
