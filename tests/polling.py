"""The one way tests poll: for what another process does, which sends the test no event.

A test that can wait on an event (a session's mutations, a kernel message, a line read from the
agent) waits on it. What is left is another process's effect seen from outside: a file it
writes, a pid that goes away, what nbclient collected from the kernel. `wait_until` blocks (for
synchronous tests and threads); `until` awaits, so the test's event loop runs meanwhile. Both
return the predicate's first truthy value and fail with an AssertionError that names `what`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio

__all__ = ["until", "wait_until"]

#: Often enough that a wait ends soon after its condition holds, rarely enough to cost no CPU.
INTERVAL = 0.02


def _timed_out(timeout: float, what: str) -> AssertionError:
    return AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Call `predicate` until it returns something truthy and return that, or fail after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what)
        time.sleep(INTERVAL)
    return value


async def until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """`wait_until` for async tests: sleeps on the event loop between calls."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what)
        await anyio.sleep(INTERVAL)
    return value
