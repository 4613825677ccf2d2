"""Turn handles: what `session.prompt()` returns."""

from __future__ import annotations

import uuid
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import anyio

from ..protocol.result import TurnResult

if TYPE_CHECKING:
    from .permissions import PermissionHandler, PermissionPolicy
    from .session import Session


class TurnHandle:
    """One turn of a session. Several `prompt()` calls made while a turn runs share the next one.

    `result` is None until the turn ends. `await turn.finished` gives the `TurnResult`; it never
    raises for agent, model or tool failures (check `result.success`). If the task awaiting it is
    cancelled (a cancel scope, the kernel's interrupt), the turn is cancelled too: the agent gets
    `session/cancel`.
    """

    def __init__(self, session: Session, blocks: list[dict[str, Any]]) -> None:
        self.id = f"turn-{uuid.uuid4().hex[:12]}"
        self.session = session
        self.prompt: list[dict[str, Any]] = list(blocks)
        self.inputs = 1
        self.result: TurnResult | None = None
        self.cancel_requested = False
        # Who decides this turn's permission requests; None: the session's policy and handler.
        # Per turn, so a cell's --allow or its buttons never apply to another cell's turn.
        self.permission_policy: PermissionPolicy | None = None
        self.permission_handler: PermissionHandler | None = None
        self._done = anyio.Event()
        # Cancelled to give up waiting for an agent that ignores session/cancel, when killing
        # it would take other sessions' turns down with this one.
        self._abandon_scope = anyio.CancelScope()

    def cancelling(self) -> bool:
        """Whether cancellation was asked for (a call, so checks after an await are not
        narrowed away by the type checker: the flag changes while the turn awaits)."""
        return self.cancel_requested

    def merge(self, blocks: list[dict[str, Any]]) -> None:
        """Input sent while the previous turn ran joins this (not yet started) turn."""
        self.prompt.extend(blocks)
        self.inputs += 1

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def finished(self) -> _Finished:
        return _Finished(self)

    async def wait(self) -> TurnResult:
        try:
            await self._done.wait()
        except BaseException:
            if self.result is None:
                with anyio.CancelScope(shield=True):
                    await self.session._cancel_turn(self)
            raise
        assert self.result is not None
        return self.result

    async def cancel(self) -> TurnResult:
        """Cancel this turn (queued or running) and wait for it to end."""
        await self.session._cancel_turn(self)
        return await self.wait()

    def _resolve(self, result: TurnResult) -> None:
        self.result = result
        self._done.set()

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
