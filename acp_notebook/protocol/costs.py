"""Cost budgets: a turn's cost from the agent's cumulative `usage_update`, against a limit.

Pure. The agent reports the session's cumulative cost (`Usage.cost_amount`, in its currency);
a turn's cost is the difference from the turn's start. A limit is in one currency (USD unless
said otherwise) and is compared only with costs in that same currency: there is no exchange
rate here, so a cost in another currency is never said to pass (or stay within) a USD budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InvalidArgumentError
from .state import Usage

#: The note of a turn with a budget whose agent reported no cost: nothing could be checked.
NO_COST = "the agent reported no cost for this turn: its budget could not be applied"


@dataclass(frozen=True, slots=True)
class CostLimit:
    """The most a turn may cost. `source` names where it came from, for the message."""

    amount: float
    currency: str = "USD"
    source: str = "max_cost"

    def __post_init__(self) -> None:
        # InvalidArgumentError (a ValueError): the kernel builds limits from its configuration
        # too (c.AcpNotebook.max_cost_total = inf), so this reaches a user as it is.
        if not (isinstance(self.amount, int | float) and math.isfinite(self.amount)):
            raise InvalidArgumentError(f"a cost limit must be a finite number, not {self.amount!r}")
        if self.amount < 0:
            raise InvalidArgumentError(f"a cost limit cannot be negative ({self.amount:g})")

    @classmethod
    def of(cls, value: float | CostLimit | None) -> CostLimit | None:
        """`max_cost=` as given: a number of USD, a `CostLimit`, or None (no limit)."""
        if value is None or isinstance(value, CostLimit):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidArgumentError(f"max_cost must be a number of USD, not {value!r}")
        try:
            amount = float(value)
        except OverflowError:  # an int too large for a float
            raise InvalidArgumentError("max_cost must be a finite number of USD") from None
        return cls(amount)  # __post_init__ refuses nan, inf and negatives


def same_currency(a: str | None, b: str | None) -> bool:
    """Whether two currency codes name the same currency (case and spaces aside)."""
    return a is not None and b is not None and a.strip().upper() == b.strip().upper()


def turn_cost(usage: Usage | None, at_start: Usage | None) -> tuple[float, str | None] | None:
    """The turn's cost so far and its currency, or None when the agent reported none."""
    if usage is None or usage.cost_amount is None:
        return None
    before = 0.0
    if at_start is not None and at_start.cost_amount is not None:
        if at_start.cost_currency == usage.cost_currency:
            before = at_start.cost_amount
    return max(usage.cost_amount - before, 0.0), usage.cost_currency


def over_budget(limit: CostLimit, cost: tuple[float, str | None] | None) -> str | None:
    """The error of a turn whose cost passed its limit ("over budget: $0.50 > $0.10"), or None
    (within it, no cost reported, or a cost in another currency)."""
    if cost is None or not same_currency(cost[1], limit.currency):
        return None
    amount = cost[0]
    if amount <= limit.amount:
        return None
    return (
        f"over budget: {money(amount, limit.currency)} > {money(limit.amount, limit.currency)} "
        f"({limit.source})"
    )


def other_currency(limit: CostLimit, cost: tuple[float, str | None] | None) -> str | None:
    """A note when the agent reports its cost in a currency the limit is not in, else None."""
    if cost is None or same_currency(cost[1], limit.currency):
        return None
    currency = (cost[1] or "no currency")[:16]
    return (
        f"the agent reports its cost in {currency!r}, not {limit.currency}: the budget "
        f"({limit.source} {money(limit.amount, limit.currency)}) is not applied to this turn"
    )


def money(amount: float, currency: str | None) -> str:
    """$0.50, $0.0123, $12.00 for USD; "0.50 EUR" for others (at most four decimals)."""
    text = f"{amount:,.4f}"
    whole, _, decimals = text.partition(".")
    decimals = decimals.rstrip("0").ljust(2, "0")
    number = f"{whole}.{decimals}"
    if same_currency(currency, "USD"):
        return f"${number}"
    return f"{number} {(currency or '').strip()[:16]}".strip()
