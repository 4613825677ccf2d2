"""A session's turns, one at a time: the queue, the worker, the attempts, cancellation.

The turn's state lives in its `TurnMachine` (`protocol/turnstate.py`); this module is the IO
around it. Every end goes through `TurnRunner._end`, which hands the outcome to the machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import anyio
import anyio.abc

from ..errors import (
    AgentExitedError,
    AgentStartError,
    ClientClosedError,
    ProtocolError,
    RequestError,
    RequestTimeoutError,
)
from ..protocol import costs, methods
from ..protocol import jsonrpc as rpc
from ..protocol.fold import SessionFold
from ..protocol.limits import token_counts
from ..protocol.mutations import Mutation, RequestWarning, TurnStarted
from ..protocol.recorded_prompt import recorded
from ..protocol.session_facts import session_model
from ..protocol.state import Usage
from ..protocol.turn import TurnRecord, TurnResult, session_title
from ..protocol.turnstate import TurnOutcome, TurnState
from .connection import Connection
from .options import ClientOptions
from .serving.terminal import Terminals
from .structured import settle
from .turn import TurnHandle

log = logging.getLogger("acp_notebook")

_CANCELLED = TurnOutcome("cancelled")


class _HasTurn(Protocol):
    @property
    def running(self) -> TurnHandle | None: ...


class AgentLink(Protocol):
    """What the runner needs from the client: `Client` provides it (its "session link").

    A protocol, not `Client` itself, so this module does not import client.py (which imports
    it through session.py)."""

    @property
    def options(self) -> ClientOptions: ...
    @property
    def agent_name(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def connection(self) -> Connection | None: ...
    @property
    def task_group(self) -> anyio.abc.TaskGroup: ...
    @property
    def killed_for_cancel(self) -> bool: ...
    @property
    def sessions(self) -> Sequence[_HasTurn]: ...
    def kill_agent(self, *, for_cancel: bool = False) -> None: ...
    async def request(self, method: str, params: Any, *, deadline: bool = True) -> Any: ...


class TurnRunner:
    """Runs the turns of one session. The session gives it what it needs at construction:

    `session_id()` (it changes when the agent had to open a new session), `on_current_agent()`
    (whether the session is open on the client's current agent process), `ensure_live()`
    (start the agent and reopen the session if needed), `cancel_permissions()` (answer the
    pending permission requests `cancelled`), and the session's fold, emitter and terminals.
    """

    def __init__(
        self,
        client: AgentLink,
        fold: SessionFold,
        emit: Callable[[Mutation], None],
        *,
        session_id: Callable[[], str],
        on_current_agent: Callable[[], bool],
        ensure_live: Callable[[], Awaitable[None]],
        cancel_permissions: Callable[[], None],
        terminals: Terminals | None,
    ) -> None:
        self._client = client
        self._fold = fold
        self._emit = emit
        self._session_id = session_id
        self._on_current_agent = on_current_agent
        self._ensure_live = ensure_live
        self._cancel_permissions = cancel_permissions
        self._terminals = terminals
        self.queued: TurnHandle | None = None  # input goes here while a turn runs
        self.running: TurnHandle | None = None
        self.budgeted = False  # running has a max_cost (fixed once it runs): watch_cost() is due
        self._wake = anyio.Event()
        self._stopped = False
        # The current session/prompt attempt: cancelled to give up waiting for an agent that
        # ignores session/cancel, when killing it would take other sessions' turns down too.
        self._prompt_scope: anyio.CancelScope | None = None
        self._seen_usage: Usage | None = None  # the usage watch_cost() last compared
        self._noted = False  # the running turn's record says its cost is in another currency

    @property
    def busy(self) -> bool:
        return self.running is not None or self.queued is not None

    def enqueue(self, turn: TurnHandle) -> TurnHandle:
        """Queue a new turn (the caller merges input into `queued` when there is one)."""
        assert self.queued is None
        self.queued = turn
        self._wake.set()
        return turn

    def shutdown(self) -> None:
        """End the worker (the session is closed)."""
        self._stopped = True
        self._wake.set()

    # -- the worker ------------------------------------------------------------------------------

    async def work(self) -> None:
        """The session's worker task: runs queued turns in order until `shutdown()`."""
        while not self._stopped:
            await self._wake.wait()
            self._wake = anyio.Event()
            while self.queued is not None:
                turn, self.queued = self.queued, None
                turn.machine.advance(TurnState.RUNNING)
                self.running, self._noted = turn, False
                self.budgeted = turn.max_cost is not None
                try:
                    await self._run(turn)
                except BaseException as exc:
                    # The worker itself was cancelled (the client's task group is torn down by an
                    # outer cancel scope or an interrupt) or hit a bug: the turn must still end,
                    # or stop(), close() and anyone awaiting `turn.finished` would wait forever.
                    self._abandon(turn, exc)
                    if not isinstance(exc, Exception):
                        raise  # cancellation goes on; a bug in one turn must not end the client
                    log.exception("acp_notebook: turn %s failed inside the client", turn.id)
                finally:
                    self.running = None
                    self.budgeted = False

    async def _run(self, turn: TurnHandle) -> None:
        fold = self._fold
        record = fold.begin_turn(turn.id, _recorded(turn))
        record.terminals = {}
        self._emit(TurnStarted(turn.id))
        outcome = await self._attempts(turn)
        if turn.output_spec is not None:
            outcome = await settle(
                turn.output_spec,
                outcome,
                record,
                lambda blocks: self._attempts(turn, blocks),
                lambda text: fold.add_error(text, "warning"),
            )
        if turn.over_budget is not None:
            # The agent's stop reason stays what it said (usually "cancelled"); the error says why.
            outcome = dataclasses.replace(outcome, error=turn.over_budget, over_budget=True)
        elif (
            turn.max_cost is not None
            and costs.turn_cost(fold.facts.usage, record.usage_at_start) is None
        ):
            fold.add_error(costs.NO_COST, "warning")  # or the budget looks kept when it was not
        if outcome.error is not None:
            fold.add_error(outcome.error)
            # The agent failed or died mid-turn: nothing will finish its tool calls, and the
            # record (and a saved notebook) must not show them running forever.
            fold.mark_unfinished("failed")
        self._cancel_permissions()
        await self._settle_terminals(record, outcome)
        fold.end_turn()
        self._end(turn, record, outcome)

    def _abandon(self, turn: TurnHandle, exc: BaseException) -> None:
        if turn.done:
            return
        self._cancel_permissions()
        cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
        record = self._fold.end_turn() or TurnRecord(turn_id=turn.id, prompt=_recorded(turn))
        self._end(
            turn,
            record,
            TurnOutcome(
                "cancelled" if cancelled else None,
                "the client was closed while the turn ran"
                if cancelled
                else f"client error: {type(exc).__name__}: {exc}",
            ),
        )

    def _end(self, turn: TurnHandle, record: TurnRecord, outcome: TurnOutcome) -> TurnResult:
        """Every turn ends here: the machine builds the result and announces it."""
        return turn.machine.end(
            record,
            outcome,
            usage=self._fold.facts.usage,
            session_id=self._session_id(),
            agent=self._client.agent_name,
            title=session_title(self._fold.facts.info),
            model=session_model(self._fold.facts.config_options),
        )

    # -- attempts --------------------------------------------------------------------------------

    async def _attempts(
        self, turn: TurnHandle, blocks: list[dict[str, Any]] | None = None
    ) -> TurnOutcome:
        """Send the prompt (or `blocks`, a structured turn's re-ask), retrying what may be
        retried; the outcome of the last attempt."""
        opts = self._client.options
        max_attempts = opts.max_retries + 1
        attempt = 0
        while True:
            attempt += 1
            outcome, retryable = await self._attempt(turn, blocks)
            if outcome.stop_reason is not None:  # answered, or cancelled
                return outcome
            will_retry = (
                retryable
                and not self._fold.visible_output
                and attempt < max_attempts
                and not turn.cancelling()
            )
            self._emit(
                RequestWarning(
                    outcome.error or "request failed",
                    "model_request",
                    turn.id,
                    attempt,
                    max_attempts,
                    will_retry,
                )
            )
            if not will_retry:
                return outcome
            self._fold.add_error(
                f"attempt {attempt} of {max_attempts} failed, retrying: {outcome.error}", "warning"
            )
            await anyio.sleep(opts.retry_backoff * attempt)

    async def _attempt(
        self, turn: TurnHandle, blocks: list[dict[str, Any]] | None
    ) -> tuple[TurnOutcome, bool]:
        """One session/prompt; with whether its failure may be retried."""
        if turn.cancelling():
            return _CANCELLED, False
        try:
            await self._ensure_live()
            if turn.cancelling():
                # stop() came while the agent (re)started or the session reopened: there was
                # nothing to send session/cancel on, so it was lost and the prompt went out
                # anyway. Not sending it is the cancellation.
                return _CANCELLED, False
            return await self._prompt(turn, blocks), False
        except RequestError as exc:
            if turn.cancelling():  # a cancellation-looking error is a cancellation
                return _CANCELLED, False
            return TurnOutcome(None, str(exc)), exc.code == rpc.INTERNAL_ERROR
        except (AgentExitedError, ProtocolError) as exc:
            if turn.cancelling():
                killed = self._client.killed_for_cancel
                return TurnOutcome(
                    "cancelled",
                    _KILLED.format(self._client.options.cancel_grace) if killed else None,
                ), False
            return TurnOutcome(None, str(exc)), True
        except (ClientClosedError, AgentStartError, RequestTimeoutError) as exc:
            # AgentStartError: the agent died and the fresh process cannot start (a bad key,
            # a removed binary). It used to escape the worker and take down the client with
            # every session; it fails this turn, and the next prompt tries again.
            # RequestTimeoutError: reopening the session on a fresh agent was not answered.
            return TurnOutcome(None, str(exc)), False

    async def _prompt(self, turn: TurnHandle, blocks: list[dict[str, Any]] | None) -> TurnOutcome:
        response = None
        scope = self._prompt_scope = anyio.CancelScope()  # a scope is entered once: per attempt
        with scope:
            response = await self._client.request(
                methods.SESSION_PROMPT,
                {"sessionId": self._session_id(), "prompt": blocks or turn.prompt},
                deadline=False,
            )
        if scope.cancelled_caught:
            return TurnOutcome("cancelled", _ABANDONED.format(self._client.options.cancel_grace))
        response = response if isinstance(response, dict) else {}
        return TurnOutcome(
            str(response.get("stopReason") or "end_turn"),
            tokens=token_counts(response.get("usage"), self._client.options.limits),
        )

    async def _settle_terminals(self, record: TurnRecord, outcome: TurnOutcome) -> None:
        terminals = self._terminals
        if terminals is None:
            return
        ids = record.terminal_ids()
        if outcome.stop_reason != "end_turn" or outcome.error is not None:
            terminals.kill_many(ids)
            # Killed commands exit within milliseconds: wait so the record shows how.
            with anyio.move_on_after(1.0):
                await terminals.wait_exited(ids)
        record.terminals = {tid: v for tid, v in terminals.views.items() if tid in ids}

    # -- budget ----------------------------------------------------------------------------------

    def watch_cost(self) -> None:
        """After each update: cancel the running turn once its reported cost passes its budget
        (a cost in another currency is not compared: the turn's record says so, once)."""
        turn, record = self.running, self._fold.turn
        limit = turn.max_cost if turn is not None else None
        if turn is None or limit is None or record is None or turn.over_budget is not None:
            return
        usage = self._fold.facts.usage
        if usage is self._seen_usage:  # most updates are not usage: nothing to compare
            return
        self._seen_usage = usage
        cost = costs.turn_cost(usage, record.usage_at_start)
        note = costs.other_currency(limit, cost)
        if note is not None and not self._noted:
            self._noted = True
            self._fold.add_error(note, "warning")
        error = costs.over_budget(limit, cost)
        if error is not None and turn.state is TurnState.RUNNING:
            turn.over_budget = error
            self._client.task_group.start_soon(self.cancel, turn)

    # -- cancellation ----------------------------------------------------------------------------

    async def stop(self) -> TurnResult | None:
        """Cancel the running turn and the queued one; the running turn's result."""
        queued, running = self.queued, self.running
        if queued is not None:
            await self.cancel(queued)
        if running is None:
            return None
        await self.cancel(running)
        return await running.wait()

    async def cancel(self, turn: TurnHandle) -> None:
        """Cancel one turn: a queued one ends at once, a running one gets session/cancel."""
        if turn.state not in (TurnState.QUEUED, TurnState.RUNNING):
            return  # ended, or being cancelled already
        turn.machine.advance(TurnState.CANCELLING)
        if turn is self.queued:  # never sent: it ends cancelled without reaching the agent
            self.queued = None
            self._end(turn, TurnRecord(turn_id=turn.id, prompt=_recorded(turn)), _CANCELLED)
            return
        if turn is not self.running:
            return
        self._fold.mark_cancelled()
        self._cancel_permissions()
        conn = self._client.connection
        if conn is not None and conn.closed is None and self._on_current_agent():
            with contextlib.suppress(Exception):
                await conn.notify(methods.SESSION_CANCEL, {"sessionId": self._session_id()})
                # And the subagents that allow it (`capabilities.cancel`), each on its own id.
                for child_id in self._fold.children.cancellable():
                    await conn.notify(methods.SESSION_CANCEL, {"sessionId": child_id})
            self._client.task_group.start_soon(self._cancel_watchdog, turn, conn)

    async def _cancel_watchdog(self, turn: TurnHandle, conn: Connection) -> None:
        client = self._client
        with anyio.move_on_after(client.options.cancel_grace):
            await turn.wait_ended()
            return
        if turn.done or conn is not client.connection:
            return
        if any(s.running is not None and s.running is not turn for s in client.sessions):
            # Killing the shared process would fail their turns too: give this one up
            # ($/cancel_request goes out) and leave the agent to them.
            if self.running is turn and self._prompt_scope is not None:
                self._prompt_scope.cancel()
        else:
            client.kill_agent(for_cancel=True)


_ABANDONED = (
    "the agent did not answer session/cancel within {:g} s; the turn was given up "
    "(not the agent: other sessions are using it)"
)
_KILLED = (
    "the agent did not answer session/cancel within {:g} s and was stopped; the next "
    "prompt starts a fresh agent process"
)


def _recorded(turn: TurnHandle) -> list[dict[str, Any]]:
    """The turn's prompt as its record keeps it (`protocol/recorded_prompt.py`)."""
    return recorded(turn.prompt, turn.session.cwd)
