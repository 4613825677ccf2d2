"""Totals over the turns of a run, read from their final transcripts, and their one-line forms."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.turn import Transcript
from ..render import labels


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
