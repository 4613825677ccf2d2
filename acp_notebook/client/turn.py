"""Turn handles: what `session.prompt()` returns."""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..protocol.turn import TurnResult
from ..protocol.turnstate import EndListener, TurnMachine, TurnState

if TYPE_CHECKING:
    from ..protocol.costs import CostLimit
    from ..protocol.structured import OutputSpec
    from .serving.elicit import ElicitationHandler
    from .serving.permissions import PermissionHandler, PermissionPolicy


class TurnSession(Protocol):
    """The session a turn belongs to, as the turn knows it (a `Session`)."""

    @property
    def id(self) -> str: ...

    cwd: str


#: How a turn asks its session to cancel it (the session's turn runner does the work).
Canceller = Callable[["TurnHandle"], Awaitable[None]]

#: Who prompts in this context: any object with identity, set by whoever runs the code that
#: prompts (the notebook layer sets it to the running cell). A turn keeps the origins of the
#: prompts that made it, so the kernel tools can tell the turn a cell waits for (its own) from
#: one the chat started meanwhile. None: nobody said.
PROMPT_ORIGIN: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "acp_notebook_prompt_origin", default=None
)


class TurnHandle:
    """One turn of a session. Several `prompt()` calls made while a turn runs share the next one.

    `result` is None until the turn ends. `await turn.finished` gives the `TurnResult`; it never
    raises for agent, model or tool failures (check `result.success`). If the task awaiting it is
    cancelled (a cancel scope, the kernel's interrupt), the turn is cancelled too: the agent gets
    `session/cancel`. `state` says where the turn is (`TurnState`: queued, running, cancelling,
    completed, failed, cancelled).
    """

    def __init__(
        self,
        session: TurnSession,
        blocks: list[dict[str, Any]],
        *,
        cancel: Canceller,
        on_end: EndListener | None = None,
    ) -> None:
        self.id = f"turn-{uuid.uuid4().hex[:12]}"
        self.session = session
        self.prompt: list[dict[str, Any]] = list(blocks)
        self.inputs = 1
        # Who decides this turn's permission requests; None: the session's policy and handler.
        # Per turn, so a cell's --allow or its buttons never apply to another cell's turn.
        self.permission_policy: PermissionPolicy | None = None
        self.permission_handler: PermissionHandler | None = None
        self.elicitation_handler: ElicitationHandler | None = None  # None: the session's
        #: A structured turn's schema (`output_type=`): its answer is validated, re-asked once.
        self.output_spec: OutputSpec | None = None
        #: The most this turn may cost; past it the runner cancels it (see `over_budget`).
        self.max_cost: CostLimit | None = None
        #: Set by the runner when the turn's cost passed `max_cost`: the result's error.
        self.over_budget: str | None = None
        #: When the turn must have ended, on the event loop's clock (`anyio.current_time()`),
        #: if something bounds it (a cell's --timeout); work done for the turn in the kernel
        #: (the agent's code, run by the kernel tools) is stopped by then. None: no bound.
        self.deadline: float | None = None
        self._origins: list[object] = []
        self._note_origin()
        #: The turn's state machine. Only the session's turn runner moves it; read `state`.
        self.machine = TurnMachine(self.id)
        self._cancel = cancel
        self._ended = anyio.Event()
        self.machine.on_end.append(lambda _result: self._ended.set())
        if on_end is not None:
            self.machine.on_end.append(on_end)

    @property
    def state(self) -> TurnState:
        """Where the turn is: queued, running, cancelling, completed, failed or cancelled."""
        return self.machine.state

    @property
    def result(self) -> TurnResult | None:
        """The `TurnResult` once the turn ended, None before."""
        return self.machine.result

    @property
    def cancel_requested(self) -> bool:
        """Whether cancelling this turn was asked for (stop(), cancel(), an interrupt)."""
        return self.machine.cancel_requested

    def cancelling(self) -> bool:
        """Whether the turn is being cancelled (a call, so checks after an await are not
        narrowed away by the type checker: the state changes while the turn awaits)."""
        return self.machine.state is TurnState.CANCELLING

    def merge(self, blocks: list[dict[str, Any]]) -> None:
        """Input sent while the previous turn ran joins this (not yet started) turn."""
        self.prompt.extend(blocks)
        self.inputs += 1
        self._note_origin()

    def _note_origin(self) -> None:
        origin = PROMPT_ORIGIN.get()
        if origin is not None and not self.prompted_from(origin):
            self._origins.append(origin)

    def prompted_from(self, origin: object) -> bool:
        """Whether a prompt of this turn was made where `PROMPT_ORIGIN` was `origin`."""
        return any(o is origin for o in self._origins)

    def bound(self, deadline: float) -> None:
        """The turn must end by `deadline` (the loop's clock): the earliest bound holds."""
        self.deadline = deadline if self.deadline is None else min(self.deadline, deadline)

    def add_terms(self, spec: OutputSpec | None, limit: CostLimit | None) -> None:
        """A prompt's schema and budget: the first schema stays, the tighter budget holds."""
        self.output_spec = self.output_spec or spec
        if limit is not None and (self.max_cost is None or limit.amount < self.max_cost.amount):
            self.max_cost = limit

    @property
    def done(self) -> bool:
        """Whether the turn ended (its `result` is set)."""
        return self.machine.ended

    @property
    def finished(self) -> _Finished:
        """An awaitable of the `TurnResult`: `await turn.finished` (as `wait()`)."""
        return _Finished(self)

    async def wait(self) -> TurnResult:
        """Wait for the turn's end and return its `TurnResult`; cancelling this wait cancels
        the turn (the agent gets `session/cancel`)."""
        try:
            await self._ended.wait()
        except BaseException:
            if self.result is None:
                with anyio.CancelScope(shield=True):
                    await self._cancel(self)
            raise
        assert self.result is not None
        return self.result

    async def wait_ended(self) -> None:
        """Wait for the end without cancelling the turn if this wait is cancelled (for
        watchdogs that give up waiting, unlike `wait()`)."""
        await self._ended.wait()

    async def cancel(self) -> TurnResult:
        """Cancel this turn (queued or running) and wait for it to end."""
        await self._cancel(self)
        return await self.wait()

    def __repr__(self) -> str:
        state = "running" if self.result is None else ("ok" if self.result.success else "failed")
        return f"<TurnHandle {self.id} {state}>"


class _Finished:
    """Awaitable view of a turn's end; awaiting it any number of times gives the same result."""

    __slots__ = ("_turn",)

    def __init__(self, turn: TurnHandle) -> None:
        self._turn = turn

    def __await__(self) -> Generator[Any, None, TurnResult]:
        return self._turn.wait().__await__()
