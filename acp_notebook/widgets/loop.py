"""Widget callbacks hand their work to the kernel's event loop, from whatever thread they run in.

JupyterLab (4.4 and later, its `commsOverSubshells` setting) sends widget messages over kernel
subshells, and ipykernel runs each subshell in a thread of its own, with an event loop of its
own: a button's `on_click` runs there, not on the loop the cells run on. Everything the extension
owns lives on that main loop: the agent's client, its anyio events and streams, the turns, the
futures a permission request waits on. Used from the subshell's loop they fail (`<asyncio.locks.
Event ...> is bound to a different event loop`, which took the agent's connection down with it)
or race. So a widget remembers the loop it was made on (a cell made it, on the main loop) and
every callback goes through `KernelLoop`, which is safe to call from any thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("acp_notebook")


class KernelLoop:
    """The loop running when it was made (in a cell, or in code a cell awaits). Made outside
    any loop (a plain script), callbacks run where they arrive, as ipywidgets runs them."""

    def __init__(self) -> None:
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        self._tasks: set[asyncio.Task[Any]] = set()  # the loop keeps only weak references

    def call(self, fn: Callable[..., object], *args: Any) -> None:
        """Call `fn(*args)` soon on the kernel's loop (from any thread)."""
        if self.loop is None:
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def spawn(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run the coroutine `make()` returns as a task on the kernel's loop (from any thread).

        `make` is called there too, so the coroutine is made where it runs. A failure has no
        caller to raise to: it goes to the log (which reaches the cell's stderr, masked)."""
        self.call(self._start, make)

    async def settled(self) -> None:
        """Wait for the tasks spawned so far (and those they spawn) to end, on the loop."""
        while self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)

    def _start(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        task = asyncio.get_running_loop().create_task(make())  # on the kernel's loop: see call
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("acp_notebook: a widget action failed: %r", task.exception())
