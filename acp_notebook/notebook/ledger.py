"""The kernel's ledger: a row per `%%agent` turn (cell, agent, model, tokens, cost, time, outcome).

`%%agent` adds each turn (`Ledger.watch`: the row is written when the turn ends, a background
turn included); `%agent ledger` shows it (`ledger_doc`). The kernel's budget,
`c.AcpNotebook.max_cost_total`, is in USD and counts only costs the agents report in USD: there
is no exchange rate here, so costs in other currencies are listed and totalled apart, never
compared with it. `turn_limit` is the budget of the next turn: the lesser of its `--max-cost`
and what is left of the total; a kernel with nothing left refuses the turn.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..display import views
from ..display.views import Code, Doc
from ..errors import BudgetExceededError
from ..protocol.coerce import integer
from ..protocol.costs import CostLimit, money, same_currency
from ..protocol.turn import TurnResult

if TYPE_CHECKING:
    from ..client.session import Session
    from ..client.turn import TurnHandle

MAX_ROWS = 10_000  # rows kept (the totals count every turn)
SHOWN = 200  # rows shown by %agent ledger: the latest


@dataclass(frozen=True, slots=True)
class Entry:
    """One turn. `cost` is in `currency` (as the agent reported it), None when it sent none."""

    cell: int | None
    agent: str
    model: str | None
    tokens_in: int | None
    tokens_out: int | None
    cost: float | None
    currency: str | None
    duration: float
    outcome: str  # ok, failed, cancelled, over budget

    @classmethod
    def of(cls, result: TurnResult, cell: int | None, agent: str, model: str | None) -> Entry:
        tokens = result.tokens or {}
        usage = result.usage
        return cls(
            cell,
            agent,
            model,
            integer(tokens.get("inputTokens")),
            integer(tokens.get("outputTokens")),
            result.cost,
            usage.cost_currency if usage is not None and result.cost is not None else None,
            result.duration,
            outcome(result),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell,
            "agent": self.agent,
            "model": self.model,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost": self.cost,
            "currency": self.currency,
            "duration": round(self.duration, 3),
            "outcome": self.outcome,
        }


def outcome(result: TurnResult) -> str:
    if result.over_budget:
        return "over budget"
    if result.success:
        return "ok"
    return "cancelled" if result.cancelled else "failed"


class Ledger:
    """The turns of one kernel, and their totals."""

    def __init__(self) -> None:
        self.rows: collections.deque[Entry] = collections.deque(maxlen=MAX_ROWS)
        self.turns = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.duration = 0.0
        self.costs: dict[str, float] = {}  # by currency, as the agents spelled it (upper case)
        self.outcomes: collections.Counter[str] = collections.Counter()
        # Turns already watched: input a --background cell merged into a queued turn shares
        # that turn's handle, and its cost must be counted once.
        self._watched: collections.deque[str] = collections.deque(maxlen=64)

    def add(self, entry: Entry) -> None:
        self.rows.append(entry)
        self.turns += 1
        self.tokens_in += entry.tokens_in or 0
        self.tokens_out += entry.tokens_out or 0
        self.duration += entry.duration
        self.outcomes[entry.outcome] += 1
        if entry.cost is not None:
            currency = (entry.currency or "?").strip().upper()[:16]
            self.costs[currency] = self.costs.get(currency, 0.0) + entry.cost

    def watch(self, turn: TurnHandle, session: Session, agent: str, cell: int | None) -> None:
        """Add the turn's row when it ends (the cell and model as they are now, at its start)."""
        if turn.id in self._watched:
            return
        self._watched.append(turn.id)
        model = model_of(session.config_options)
        if turn.result is not None:
            self.add(Entry.of(turn.result, cell, agent, model))
            return
        turn.machine.on_end.append(lambda result: self.add(Entry.of(result, cell, agent, model)))

    def spent(self, currency: str = "USD") -> float:
        return sum(v for k, v in self.costs.items() if same_currency(k, currency))

    def turn_limit(self, max_cost: float | None, max_total: float) -> CostLimit | None:
        """The next turn's budget: its `--max-cost`, or what is left of the kernel's total if
        that is less. Raises `BudgetExceededError` when the total is spent."""
        if max_total <= 0:
            return CostLimit(max_cost, source="--max-cost") if max_cost is not None else None
        spent = self.spent()
        left = max_total - spent
        if left <= 0:
            raise BudgetExceededError(
                f"This kernel's turns cost {money(spent, 'USD')}, its whole budget "
                f"(c.AcpNotebook.max_cost_total = {money(max_total, 'USD')}): it starts no new "
                "turn. See the turns with %agent ledger; to go on, raise the budget "
                "(%config AcpNotebook.max_cost_total = ...) or restart the kernel."
            )
        if max_cost is not None and max_cost <= left:
            return CostLimit(max_cost, source="--max-cost")
        what = f"what is left of c.AcpNotebook.max_cost_total {money(max_total, 'USD')}"
        return CostLimit(left, source=what)


def model_of(options: list[dict[str, Any]]) -> str | None:
    """The session's model, when a config option says it (category or id "model")."""
    for option in options:
        if option.get("category") == "model" or option.get("id") == "model":
            value = option.get("currentValue")
            return views.text(value) if value is not None else None
    return None


def ledger_doc(ledger: Ledger, max_total: float, mask: Callable[[str], str] = str) -> Doc:
    """The `%agent ledger` display: the latest turns, then the totals and the budget."""
    doc = Doc(mask)
    if not ledger.turns:
        return doc.para("No turn yet in this kernel.")
    header = ["cell", "agent", "model", "tokens in", "tokens out", "cost", "time", "outcome"]
    rows = [_row(e) for e in list(ledger.rows)[-SHOWN:]]
    rows.append(_totals(ledger))
    doc.table(header, rows)
    if ledger.turns > SHOWN:
        doc.para(f"The latest {SHOWN} of {ledger.turns:,} turns; the totals count them all.")
    if max_total > 0:
        spent = ledger.spent()
        doc.para(
            "Budget: c.AcpNotebook.max_cost_total ",
            Code(money(max_total, "USD")),
            f", {money(spent, 'USD')} spent, {money(max(max_total - spent, 0), 'USD')} left.",
        )
    if any(not same_currency(c, "USD") for c in ledger.costs):
        doc.para("Costs in other currencies are totalled apart and not counted in a USD budget.")
    return doc


def _row(e: Entry) -> list[Any]:
    return [
        views.text(e.cell) if e.cell is not None else "",
        Code(e.agent),
        Code(e.model) if e.model else "",
        views.text(e.tokens_in),
        views.text(e.tokens_out),
        money(e.cost, e.currency) if e.cost is not None else "",
        f"{e.duration:.1f} s",
        e.outcome,
    ]


def _totals(ledger: Ledger) -> list[Any]:
    costs = "; ".join(money(v, k) for k, v in sorted(ledger.costs.items())) or ""
    outcomes = ", ".join(f"{n} {what}" for what, n in sorted(ledger.outcomes.items()))
    return [
        f"total ({ledger.turns:,} turns)",
        "",
        "",
        views.text(ledger.tokens_in),
        views.text(ledger.tokens_out),
        costs,
        f"{ledger.duration:.1f} s",
        outcomes,
    ]
