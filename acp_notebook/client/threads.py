"""Blocking work off the event loop, in daemon threads that never hold up the interpreter's exit.

anyio's worker threads are not daemons and idle for seconds before they end. ipykernel exits
without closing its event loop, so a kernel that had used one could not exit by itself on a
shutdown request: jupyter_client killed it after its wait, and our `atexit` hook, which kills
what is left of the agents, never ran. The work done here (building the schema models, reading
and writing files for the agent) may be abandoned at exit, so a daemon thread is right for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

T = TypeVar("T")


async def run_in_daemon_thread(
    fn: Callable[[], T],
    *,
    abandon_on_cancel: bool = False,
    limiter: anyio.CapacityLimiter | None = None,
) -> T:
    """Run `fn()` in a new daemon thread and return what it returns (or raise what it raised).

    Cancelled while `fn` runs: with `abandon_on_cancel` the caller is released at once and the
    thread's outcome is dropped; without it, the caller waits for `fn` to finish, then the
    cancellation is delivered (as `anyio.to_thread.run_sync` does).
    """
    async with AsyncExitStack() as stack:
        if limiter is not None:
            await stack.enter_async_context(limiter)
        token = anyio.lowlevel.current_token()
        done = anyio.Event()
        outcome: list[tuple[bool, object]] = []

        def work() -> None:
            try:
                outcome.append((True, fn()))
            except BaseException as exc:  # handed to the awaiting task, re-raised there
                outcome.append((False, exc))
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except RuntimeError:  # the event loop is gone: nobody is waiting any more
                pass

        threading.Thread(target=work, name="acp_notebook worker", daemon=True).start()
        if abandon_on_cancel:
            await done.wait()
        else:
            with anyio.CancelScope(shield=True):
                await done.wait()
            await anyio.lowlevel.checkpoint_if_cancelled()
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[return-value]
    assert isinstance(value, BaseException)
    raise value
