"""The kernel reads busy while a cell awaits, and every widget message gets its own idle.

A `%%agent` cell awaits its turn (rewrite.py), and ipykernel (7.4) handles the widget messages
that arrive meanwhile (a click on Stop or on a permission button, the live view's requests)
beside the cell, on the same thread, without the busy and idle it wraps every other request in
(`concurrent` in its `shell_main`): so that the kernel does not say idle in the middle of the
cell. But then those messages never get their idle. A front-end waits for it: JupyterLab's
future of the message is never done, and ipywidgets' front-end, which counts a model's state
syncs until their idle, keeps that model's later changes to itself for good (the chat's input).

Here each comm message handled while a cell awaits gets its own busy and idle (parented to it,
as ipykernel does for any request), and right after that idle a busy again, parented to the
cell's execute request: a client that takes the last status it hears as the kernel's
(JupyterLab's `kernel.status`, jupyter_server's `execution_state`, which its culler reads) reads
busy until the cell's own idle. JupyterLab and Notebook 7 do not even see the comm's pair: the
JupyterLab extension marks comm traffic's status as untracked (labextension/src/status.ts).

Requests on the control channel (the page's own subshell requests, made at the first widget
message of a kernel, the debugger's, an interrupt) have their busy and idle from ipykernel, on
its control thread: after each one's idle, while a cell runs, the kernel says busy again for the
cell too. Which request the main shell handles is known from its execute handler, wrapped: set
when it starts, cleared (under a lock the control thread's busy takes too) when it returns,
before ipykernel publishes the request's idle, so the kernel never ends a cell saying busy.

Comm messages that ipykernel handles on a subshell (its own thread, and its own busy and idle)
are left as they are; so are messages on the main thread when no cell runs.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

#: The shell messages ipykernel handles beside an awaiting cell, without status.
COMM_MESSAGES = ("comm_open", "comm_msg", "comm_close")

Message = dict[str, Any]
Handler = Callable[[Any, Any, Message], Any]


class StatusKeeper:
    """Knows the execute request the main shell handles, and publishes the statuses of the
    requests handled meanwhile (see the module's docstring)."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.running: Message | None = None  # the execute request the main shell handles
        self.lock = threading.Lock()  # the control thread's busy comes before the cell's idle
        self.topic = f"kernel.{kernel.ident}.status".encode()  # as ipykernel's own statuses

    def busy_again(self, running: Message) -> None:
        """Say busy for the cell's request `running`, if it still runs."""
        with self.lock:
            if self.running is running:
                self.publish("busy", running)

    def publish(self, state: str, parent: Message) -> None:
        self.kernel.session.send(
            self.kernel.iopub_socket,
            "status",
            {"execution_state": state},
            parent=parent,
            ident=self.topic,
        )


class ExecuteStatus:
    """ipykernel's execute request handler, which tells the keeper which request the main
    shell handles, from its start to its end: ipykernel publishes the request's idle after the
    handler returned. A subshell's cells (on their threads) have their own statuses, and do not
    make the main shell's comm messages wait."""

    def __init__(self, keeper: StatusKeeper, handler: Handler) -> None:
        self.keeper = keeper
        self.handler = handler

    async def __call__(self, stream: Any, ident: Any, msg: Message) -> Any:
        main = threading.current_thread() is threading.main_thread()
        if main:
            with self.keeper.lock:
                self.keeper.running = msg
        try:
            result = self.handler(stream, ident, msg)
            return (await result) if inspect.isawaitable(result) else result
        finally:
            if main:
                with self.keeper.lock:
                    self.keeper.running = None


class ControlStatus:
    """A control request handler of ipykernel's, after whose idle the kernel says busy again
    for the running cell: ipykernel publishes that idle right after the handler returns, with
    nothing awaited between, so a callback the handler leaves on the control thread's loop runs
    after it."""

    def __init__(self, keeper: StatusKeeper, handler: Handler) -> None:
        self.keeper = keeper
        self.handler = handler

    async def __call__(self, stream: Any, ident: Any, msg: Message) -> Any:
        running = self.keeper.running
        try:
            result = self.handler(stream, ident, msg)
            return (await result) if inspect.isawaitable(result) else result
        finally:
            if running is not None:
                asyncio.get_running_loop().call_soon(self.keeper.busy_again, running)


class CommStatus:
    """A comm message handler of ipykernel's, with the statuses it misses while a cell awaits."""

    def __init__(self, keeper: StatusKeeper, handler: Handler) -> None:
        self.keeper = keeper
        self.handler = handler

    def __call__(self, stream: Any, ident: Any, msg: Message) -> Any:
        running = self.keeper.running
        if running is None or threading.current_thread() is not threading.main_thread():
            return self.handler(stream, ident, msg)  # ipykernel publishes its own statuses
        # On the main thread while it handles an execute request: beside it, without status.
        self.keeper.publish("busy", msg)
        try:
            result = self.handler(stream, ident, msg)
        except BaseException:
            self._done(msg, running)
            raise
        if inspect.isawaitable(result):
            return self._awaited(result, msg, running)
        self._done(msg, running)
        return result

    async def _awaited(self, result: Any, msg: Message, running: Message) -> Any:
        try:
            return await result
        finally:
            self._done(msg, running)

    def _done(self, msg: Message, running: Message) -> None:
        self.keeper.publish("idle", msg)
        self.keeper.busy_again(running)  # the cell still runs: the kernel is busy with it


def install(ipython: Any) -> None:
    """Wrap the kernel's handlers (its execute, comm and control requests); nothing outside a
    kernel, nor twice."""
    kernel = getattr(ipython, "kernel", None)
    shell = getattr(kernel, "shell_handlers", None)
    control = getattr(kernel, "control_handlers", None)
    if not isinstance(shell, dict) or isinstance(shell.get("execute_request"), ExecuteStatus):
        return
    keeper = StatusKeeper(kernel)
    if "execute_request" in shell:
        shell["execute_request"] = ExecuteStatus(keeper, shell["execute_request"])
    for name in COMM_MESSAGES:
        if name in shell:
            shell[name] = CommStatus(keeper, shell[name])
    if isinstance(control, dict):
        for name, handler in control.items():
            control[name] = ControlStatus(keeper, handler)


def uninstall(ipython: Any) -> None:
    """Put ipykernel's handlers back (a cell that runs goes on with the keeper it started with)."""
    kernel = getattr(ipython, "kernel", None)
    for table in (
        getattr(kernel, "shell_handlers", None),
        getattr(kernel, "control_handlers", None),
    ):
        if isinstance(table, dict):
            for name, wrapped in table.items():
                if isinstance(wrapped, ExecuteStatus | CommStatus | ControlStatus):
                    table[name] = wrapped.handler
