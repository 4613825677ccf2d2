"""What `acp-notebook run` prints of a turn: a pure class fed the turn's successive transcripts.

The kernel sends a turn as a series of snapshots (live display updates, then the cell's value),
each a whole transcript. `TurnPrinter.feed` compares a snapshot with what it already printed and
returns only the new lines: the answer as it grows (whole lines; the rest of a line once the
message is over), a line when a tool call starts and another when it ends, the permission
decisions, the plan's steps, errors, and a footer with usage and cost when the turn ends.

The parts are printed in their order, and a part that is still changing (a running tool call, a
message that may grow) holds back the parts after it. So the output does not depend on how often
the kernel happened to send a snapshot: a run where every step was seen and a run where only the
final record arrived print the same lines in the same order.

Everything here came from the agent: each line is masked, stripped of escape and control
sequences, and cut to `MAX_LINE` characters (`MAX_ANSWER_LINE` for the answer's lines); a
turn's answer to `MAX_ANSWER` characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..protocol.notes import CompactionPart, NoticePart
from ..protocol.redact import Redactor
from ..protocol.state import (
    ErrorPart,
    MessagePart,
    PermissionPart,
    PlanPart,
    RawPart,
    SubagentPart,
    ToolCallPart,
)
from ..protocol.suggestions import SuggestionsPart
from ..protocol.turn import Transcript, read_turn
from ..render import labels
from ..render.clip import terminal_text
from ..render.text import tool_extras

MAX_LINE = 400
MAX_ANSWER_LINE = 4_000  # a paragraph of Markdown is one line
MAX_ANSWER = 20_000
#: C1 controls (an 8-bit CSI is one) and the bidirectional overrides that reorder what is shown.
_UNSAFE = re.compile("[\x80-\x9f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True, slots=True)
class Line:
    """One line for the terminal. `style` names a colour the console may use, or none."""

    text: str
    style: str = ""  # "answer", "tool", "ok", "fail", "dim", "warn"


def safe(value: str, redactor: Redactor | None = None, limit: int = MAX_LINE) -> str:
    """One line of agent text fit for a terminal: masked, no escapes or controls, bounded.

    The work is bounded too: only a window of `8 * limit` characters is read (escape sequences
    removed from it may shorten it a lot; what is past the window would be cut anyway)."""
    value = value[: 8 * limit]
    if redactor is not None:
        value = redactor.text(value)
    value = _UNSAFE.sub("", terminal_text(value)).replace("\t", "    ")
    value = " ".join(value.splitlines())
    return value if len(value) <= limit else value[: limit - 1] + "…"


@dataclass(slots=True)
class TurnPrinter:
    """The lines of one turn, each printed once, in the order of the turn's parts."""

    redactor: Redactor | None = None
    quiet: bool = False
    last: Transcript | None = None
    finished: bool = False
    _pos: int = 0  # the first part not yet printed in full
    _consumed: int = 0  # characters of the message at `_pos` already taken
    _partial: str = ""  # the end of that message, not yet a whole line
    _answer: int = 0  # characters of answer printed
    _started: set[str] = field(default_factory=set)  # tool calls whose start line is out
    _told: set[str] = field(default_factory=set)  # permission parts printed
    _plan: tuple[str, ...] = ()  # the plan's steps as last printed

    def feed(self, transcript: Any) -> list[Line]:
        """The lines this snapshot adds. A finished turn's snapshot (success set) is its last;
        snapshots fed after it add nothing."""
        if self.finished:
            return []
        turn = read_turn(transcript)
        final = turn.success is not None
        self.last = turn
        self.finished = final
        out: list[Line] = []
        steps = tuple(e.content for e in turn.plan)
        if self._plan and steps and steps != self._plan:  # rewritten after it was printed
            out += self._steps(steps, "Plan, revised:")
        parts = turn.parts
        while self._pos < len(parts):
            settled = final or self._pos < len(parts) - 1
            if not self._part(turn, self._pos, settled, out):
                break
            self._pos += 1
            self._consumed = 0
        if final:
            out += self._end(turn)
        return [] if self.quiet else out

    def _part(self, turn: Transcript, index: int, settled: bool, out: list[Line]) -> bool:
        """Print what is new of one part; True when it is done and the next may follow."""
        part = turn.parts[index]
        if isinstance(part, MessagePart):
            if part.role == "agent":
                self._message(part.text, settled, out)
            return settled
        if isinstance(part, ToolCallPart):
            # A later part does not end a tool call (agents run tools side by side): it holds
            # back what follows until it ends, so the order never depends on the snapshots.
            return self._tool(turn, index, part, part.finished or turn.success is not None, out)
        if isinstance(part, PermissionPart):
            if part.part_id in self._told:
                return True
            if part.outcome == "pending" and not settled:
                return False
            out.append(self._permission(part, turn))
            return True
        if isinstance(part, SubagentPart):
            return self._subagent(part, turn, settled, out)
        if isinstance(part, PlanPart) and part.plan_id is not None:
            if settled:  # as it stands when the turn moved on (or ended): once
                out += self._plan_by_id(part)
            return settled
        if isinstance(part, NoticePart):
            heading = labels.NOTICE[part.level]
            more = f" — {self._safe(part.description)}" if part.description else ""
            style = "warn" if part.level != "info" else "dim"
            out.append(Line(f"{heading}: {self._safe(part.title)}{more}", style))
            return True
        if isinstance(part, SuggestionsPart):
            if settled:  # the list as it stands when the turn moved on (or ended): once
                out += [
                    Line(f"💡 suggested next: {self._safe(s)}", "dim") for s in part.suggestions
                ]
            return settled
        if isinstance(part, CompactionPart):
            if part.status == "in_progress" and not settled:
                return False
            words = labels.compaction(part.status, live=not self.finished)
            out.append(Line(f"🗜 {self._safe(words)}", "dim"))
            return True
        if isinstance(part, PlanPart):
            # Its steps when first seen (and when rewritten, see feed), not every status change
            # (how many a run sees depends on the snapshots); the end says how many were done.
            steps = tuple(e.content for e in part.entries)
            if steps and not self._plan:
                out += self._steps(steps, "Plan:")
            return bool(self._plan) or settled
        if isinstance(part, ErrorPart) and part.level == "error" and not settled:
            # The turn's last part may be the error that ends it, which the cell then raises
            # (printed below as its paragraph): its line waits to know (`labels.raised_here`).
            return False
        if isinstance(part, ErrorPart) and labels.raised_here(turn, part.message):
            out.append(Line(f"✗ failed: {labels.RAISED}", "fail"))
        elif isinstance(part, ErrorPart):
            out.append(Line(f"⚠ {part.level}: {self._safe(part.message)}", "warn"))
        elif isinstance(part, RawPart):
            out.append(Line(f"❔ unknown update {self._safe(part.update_kind or '?')}", "dim"))
        return True

    def _subagent(
        self, part: SubagentPart, turn: Transcript, settled: bool, out: list[Line]
    ) -> bool:
        """A child session: a line when it starts, its tool calls and answer when it is idle
        (or the turn ended), so what is printed does not depend on the snapshots seen."""
        title = self._safe(part.title or part.session_id)
        if part.part_id not in self._started:
            self._started.add(part.part_id)
            out.append(Line(f"🤖 subagent: {title}", "tool"))
        if part.state != "idle" and turn.success is None:
            return False
        for call in (p for p in part.parts if isinstance(p, ToolCallPart)):
            glyph, word = labels.tool_status(turn.call_status(call))
            kind = self._safe(call.tool_kind)
            out.append(Line(f"  ↳ {glyph} {kind}: {self._safe(call.title)} — {word}", "dim"))
        answer = "".join(
            m.text for m in part.parts if isinstance(m, MessagePart) and m.role == "agent"
        )
        if answer.strip():
            out.append(Line(f"  ↳ {self._safe(answer)}", "answer"))
        _, word = labels.subagent_state(part.state, part.stop_reason, live=False)
        style = "ok" if part.stop_reason in (None, "end_turn") else "warn"
        out.append(Line(f"🤖 subagent: {title} — {self._safe(word)}", style))
        return True

    def _plan_by_id(self, part: PlanPart) -> list[Line]:
        name = f"Plan {self._safe(part.plan_id or '?')}"
        if part.removed:
            return [Line(f"{name}: removed", "dim")]
        if part.markdown is not None:
            return [Line(f"{name}:", "dim"), Line(f"  {self._safe(part.markdown)}", "dim")]
        steps = (
            Line(f"  {i}. {self._safe(e.content)}", "dim") for i, e in enumerate(part.entries, 1)
        )
        return [Line(f"{name}:", "dim"), *steps]

    def _steps(self, steps: tuple[str, ...], title: str) -> list[Line]:
        self._plan = steps
        numbered = (Line(f"  {i}. {self._safe(s)}", "dim") for i, s in enumerate(steps, 1))
        return [Line(title, "dim"), *numbered]

    def _message(self, text: str, settled: bool, out: list[Line]) -> None:
        new = text[self._consumed :] if len(text) >= self._consumed else ""
        self._consumed = max(self._consumed, len(text))
        room = MAX_ANSWER - self._answer
        if room > 0:
            piece = new[:room]
            self._answer += len(piece)
            chunk = self._partial + piece
            *lines, self._partial = chunk.split("\n")
            out += [self._answer_line(x) for x in lines]
            if len(piece) < len(new):
                self._partial = ""
                out.append(Line("  … the rest of the answer is in the saved notebook", "dim"))
        if settled and self._partial:
            out.append(self._answer_line(self._partial))
            self._partial = ""

    def _tool(
        self, turn: Transcript, index: int, call: ToolCallPart, done: bool, out: list[Line]
    ) -> bool:
        title = self._safe(call.title) or self._safe(call.tool_kind)
        kind = self._safe(call.tool_kind)
        if call.part_id not in self._started:
            self._started.add(call.part_id)
            out.append(Line(f"▸ {kind}: {title}", "tool"))
        # Its permission requests are told under it, as soon as they are answered.
        for later in turn.parts[index + 1 :]:
            if (
                isinstance(later, PermissionPart)
                and later.tool_call_id == call.tool_call_id
                and later.part_id not in self._told
                and (later.outcome != "pending" or done)
            ):
                out.append(self._permission(later, turn))
        if not done:
            return False
        status = turn.call_status(call)
        glyph, word = labels.tool_status(status)
        more = _details(call, turn)
        style = {"completed": "ok", "failed": "fail", "rejected": "warn"}.get(status, "")
        out.append(Line(f"{glyph} {kind}: {title} — {self._safe(word)}{more}", style))
        return True

    def _permission(self, part: PermissionPart, turn: Transcript) -> Line:
        self._told.add(part.part_id)
        title = self._safe(part.title) or "a tool call"
        decision = self._safe(labels.decision(part, live=not self.finished))
        style = "warn" if "reject" in decision or "cancel" in decision else "dim"
        return Line(f"  permission: {title} → {decision}", style)

    def _end(self, turn: Transcript) -> list[Line]:
        out: list[Line] = []
        if self._partial:
            out.append(self._answer_line(self._partial))
            self._partial = ""
        if turn.plan:
            done = sum(e.status == "completed" for e in turn.plan)
            out.append(Line(f"Plan: {done} of {len(turn.plan)} steps completed", "dim"))
        if turn.error and turn.error not in {e.message for e in turn.errors}:
            said = labels.RAISED if turn.raised else self._safe(turn.error)
            out.append(Line(f"✗ failed: {said}", "fail"))
        footer = " · ".join(self._safe(p).replace("\u00a0", " ") for p in labels.footer(turn))
        if footer:
            out.append(Line(f"— {footer}", "ok" if turn.success else "fail"))
        return out

    def _answer_line(self, value: str) -> Line:
        text = safe(value, self.redactor, MAX_ANSWER_LINE).rstrip()
        return Line(f"  {text}" if text else "", "answer")

    def _safe(self, value: str) -> str:
        return safe(value, self.redactor)


def _details(call: ToolCallPart, turn: Transcript) -> str:
    extra = tool_extras(call, turn, live=False)
    return f" ({', '.join(extra)})" if extra else ""


# -- totals over the turns of a run, read from their final transcripts, and their one-line forms


@dataclass(slots=True)
class Totals:
    """Turns, tokens in and out, cost and time, summed; `failed` counts failed turns."""

    turns: int = 0
    failed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    currency: str | None = None
    seconds: float = 0.0
    counted_tokens: bool = False  # some turn reported its tokens

    def add(self, turn: Transcript) -> None:
        self.turns += 1
        self.failed += turn.success is False
        self.counted_tokens |= bool(turn.tokens)
        self.tokens_in += max(turn.tokens.get("inputTokens", 0), 0)
        self.tokens_out += max(turn.tokens.get("outputTokens", 0), 0)
        if turn.cost is not None and turn.cost >= 0:
            self.cost += turn.cost
        if turn.usage is not None and turn.usage.cost_currency:
            self.currency = turn.usage.cost_currency
        if turn.duration is not None and turn.duration > 0:
            self.seconds += turn.duration

    def merge(self, other: Totals) -> None:
        self.turns += other.turns
        self.failed += other.failed
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.cost += other.cost
        self.currency = self.currency or other.currency
        self.seconds += other.seconds
        self.counted_tokens |= other.counted_tokens

    def line(self) -> str:
        """ "2 turns · tokens 1.2k in / 300 out · cost $0.0062 · 4.1 s in turns" (tokens: when
        a turn reported them)."""
        turns = f"{self.turns} turn" + ("" if self.turns == 1 else "s")
        if self.failed:
            turns += f" ({self.failed} failed)"
        pieces = [turns]
        if self.counted_tokens:
            tin, tout = labels.compact(self.tokens_in), labels.compact(self.tokens_out)
            pieces.append(f"tokens {tin} in / {tout} out")
        pieces.append(f"cost {labels.money(self.cost, self.currency)}")
        pieces.append(f"{seconds(self.seconds)} in turns")
        return " · ".join(pieces)


def seconds(value: float) -> str:
    """A duration with plain spaces (a terminal line, not a cell of a table)."""
    return labels.duration(value).replace("\u00a0", " ")
