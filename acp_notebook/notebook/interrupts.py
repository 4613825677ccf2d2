"""The kernel's interrupt wakes the event loop a cell awaits on.

ipykernel (7.x) runs an awaited cell (every `%%agent` cell, see rewrite.py) under a SIGINT
handler that cancels the cell through tornado's `IOLoop.add_callback`. A signal handler runs on
the main thread, the loop's own, so tornado queues the callback with the loop's plain
`call_soon`, which does not wake a loop blocked in select(): the cancel waited for the loop's
next wake-up for another reason (a message, a timer, output from the agent). A cell awaiting an
agent that says nothing, one still starting or hung in initialize, kept running through any
number of interrupts (JupyterLab showed "starting agent… 20 s" after two clicks of ■).

So, while a cell runs, the SIGINT handler it runs under is wrapped in one that first wakes the
loop (`call_soon_threadsafe` writes to the loop's self-pipe), then calls it. The wrapper is put
in place by IPython's pre_run_cell event and taken away by post_run_cell; ipykernel restores its
own handler after each cell anyway, so none outlives the cell it was made for.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from types import FrameType
from typing import Any

Handler = Any  # what signal.getsignal returns: a callable, SIG_DFL, SIG_IGN or None


class Waker:
    """A SIGINT handler: wake `loop`, then run `previous` (the handler it replaced)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, previous: Handler) -> None:
        self.loop = loop
        self.previous = previous

    def __call__(self, signum: int, frame: FrameType | None) -> Any:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to wake
            self.loop.call_soon_threadsafe(_nothing)
        return self.previous(signum, frame)


def wake_on_interrupt(info: Any = None) -> None:
    """pre_run_cell: wrap the handler the cell runs under, if it is a Python one that does not
    raise. Python's own `default_int_handler` (a cell that does not await) raises
    KeyboardInterrupt right where the cell runs, which needs no loop, and wrapped it would add
    this module's frame to the cell's traceback; SIG_IGN and SIG_DFL need no loop either."""
    if threading.current_thread() is not threading.main_thread():
        return  # a subshell's cell: signals are for the main thread only
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # a cell run without a loop (plain IPython): nothing sleeps in select()
    current = signal.getsignal(signal.SIGINT)
    if callable(current) and current is not signal.default_int_handler:
        signal.signal(signal.SIGINT, Waker(loop, current))


def stop_waking(result: Any = None) -> None:
    """post_run_cell: put back the handler a `Waker` replaced, if it is still the one there."""
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGINT)
    if isinstance(current, Waker):
        signal.signal(signal.SIGINT, current.previous)


def install(ipython: Any) -> None:
    events = ipython.events.callbacks
    if wake_on_interrupt not in events["pre_run_cell"]:
        ipython.events.register("pre_run_cell", wake_on_interrupt)
    if stop_waking not in events["post_run_cell"]:
        ipython.events.register("post_run_cell", stop_waking)


def uninstall(ipython: Any) -> None:
    events = ipython.events.callbacks
    if wake_on_interrupt in events["pre_run_cell"]:
        ipython.events.unregister("pre_run_cell", wake_on_interrupt)
    if stop_waking in events["post_run_cell"]:
        ipython.events.unregister("post_run_cell", stop_waking)


def _nothing() -> None:
    """The wake-up's callback: the loop waking is all that was wanted."""
