"""A turn's life as an explicit state machine: states, allowed transitions as data, one end.

Pure (sans-IO): no event loop, no agent. The client's turn runner moves the machine; the
`TurnHandle` a user holds reads it. Every transition goes through `TurnMachine._move`, which
refuses a move not in `TRANSITIONS` with `TurnStateError`. A turn ends in exactly one place,
`TurnMachine.end`: it freezes the record into the `TurnResult`, moves to the end state that the
outcome names, and tells the listeners. Ending an ended turn is refused (`TurnStateError`), as
every move out of an end state is: code that may race with another end checks `ended` first.

    QUEUED ──> RUNNING ──> COMPLETED | FAILED | CANCELLED
       │          │
       └──────────┴──> CANCELLING ──> CANCELLED | COMPLETED | FAILED

A queued turn is cancelled through CANCELLING too (and ends at once: it never reached the
agent), so `cancel_requested` is simply "went through CANCELLING".
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..errors import TurnStateError
from .state import Usage
from .turn import TurnRecord, TurnResult, finish


class TurnState(enum.Enum):
    """Where a turn is in its life."""

    QUEUED = "queued"  # prompt() made it; more input may still join it
    RUNNING = "running"  # the session's worker sends it (attempts, retries, agent restarts)
    CANCELLING = "cancelling"  # cancellation was asked for; waiting for the agent to stop
    COMPLETED = "completed"  # the agent answered with a stop reason other than "cancelled"
    FAILED = "failed"  # no stop reason: the agent, the connection or the client failed
    CANCELLED = "cancelled"  # stop reason "cancelled" (asked for, or the client closed)

    @property
    def ended(self) -> bool:
        return self in END_STATES


END_STATES: frozenset[TurnState] = frozenset(
    {TurnState.COMPLETED, TurnState.FAILED, TurnState.CANCELLED}
)

#: Every allowed move. An end state has none: a turn ends once.
TRANSITIONS: Mapping[TurnState, frozenset[TurnState]] = MappingProxyType(
    {
        # Cancelling a queued turn goes through CANCELLING and ends it at once (never sent).
        TurnState.QUEUED: frozenset({TurnState.RUNNING, TurnState.CANCELLING}),
        # CANCELLED without CANCELLING: the agent stopped on its own, or the client was closed.
        TurnState.RUNNING: frozenset(
            {TurnState.CANCELLING, TurnState.COMPLETED, TurnState.FAILED, TurnState.CANCELLED}
        ),
        # The agent may still finish the work (its answer crossed session/cancel), or the client
        # may fail before the cancellation lands (an agent that cannot be restarted).
        TurnState.CANCELLING: frozenset(
            {TurnState.CANCELLED, TurnState.COMPLETED, TurnState.FAILED}
        ),
        TurnState.COMPLETED: frozenset(),
        TurnState.FAILED: frozenset(),
        TurnState.CANCELLED: frozenset(),
    }
)


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended: the agent's stop reason (None: it gave none) and the client's error."""

    stop_reason: str | None
    error: str | None = None
    tokens: dict[str, Any] | None = None  # PromptResponse.usage, when the agent sent it
    output: Any = None  # a structured turn's validated answer (and its JSON form)
    output_json: Any = None
    over_budget: bool = False  # the client stopped the turn: its cost passed its budget

    @property
    def state(self) -> TurnState:
        """The end state this outcome names: the stop reason decides, an error without one
        is a failure."""
        if self.stop_reason == "cancelled":
            return TurnState.CANCELLED
        if self.stop_reason is None or self.error is not None:
            return TurnState.FAILED
        return TurnState.COMPLETED


EndListener = Callable[[TurnResult], None]


class TurnMachine:
    """The state of one turn. Starts QUEUED; `advance()` moves it, `end()` ends it."""

    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self._state = TurnState.QUEUED
        self._path: list[TurnState] = [TurnState.QUEUED]
        self._result: TurnResult | None = None
        #: Called in order with the result when the turn ends (once).
        self.on_end: list[EndListener] = []

    @property
    def state(self) -> TurnState:
        return self._state

    @property
    def path(self) -> tuple[TurnState, ...]:
        """Every state the turn was in, in order."""
        return tuple(self._path)

    @property
    def ended(self) -> bool:
        return self._state.ended

    @property
    def result(self) -> TurnResult | None:
        """The result, once the turn ended."""
        return self._result

    @property
    def cancel_requested(self) -> bool:
        """Whether somebody asked to cancel the turn (it went through CANCELLING)."""
        return TurnState.CANCELLING in self._path

    def advance(self, to: TurnState) -> None:
        """Move to a state that is not an end (those are reached through `end()` only)."""
        if to.ended:
            raise TurnStateError(
                f"turn {self.turn_id}: {to.value} is an end state; a turn "
                f"ends through end(), which builds its result"
            )
        self._move(to)

    def end(
        self,
        record: TurnRecord,
        outcome: TurnOutcome,
        *,
        usage: Usage | None,
        session_id: str | None,
        agent: str | None,
        title: str | None = None,
        model: str | None = None,
    ) -> TurnResult:
        """End the turn: the one place a result is built and the end is announced."""
        target = outcome.state
        self._check(target)  # refuse before building anything
        result = finish(
            record,
            stop_reason=outcome.stop_reason,
            error=outcome.error,
            usage=usage,
            session_id=session_id,
            agent=agent,
            tokens=outcome.tokens,
            output=outcome.output,
            output_json=outcome.output_json,
            over_budget=outcome.over_budget,
            title=title,
            model=model,
        )
        self._move(target)
        self._result = result
        for listener in tuple(self.on_end):
            listener(result)
        return result

    def _check(self, to: TurnState) -> None:
        if to not in TRANSITIONS[self._state]:
            allowed = ", ".join(sorted(s.value for s in TRANSITIONS[self._state])) or "none"
            raise TurnStateError(
                f"turn {self.turn_id}: cannot go from {self._state.value} to "
                f"{to.value} (allowed: {allowed})"
            )

    def _move(self, to: TurnState) -> None:
        """The only place the state changes."""
        self._check(to)
        self._state = to
        self._path.append(to)

    def __repr__(self) -> str:
        return f"<TurnMachine {self.turn_id} {self._state.value}>"
