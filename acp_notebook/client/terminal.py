"""Client-owned terminals: `terminal/create`, `output`, `wait_for_exit`, `kill`, `release`.

Offered only when the client is created with `terminal=True`. Output is kept up to the agent's
`outputByteLimit`, dropping from the start on a UTF-8 boundary, and published live so a cell can
show it; what a released terminal printed stays visible in the turn's record.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from ..protocol import jsonrpc as rpc
from ..protocol.state import DEFAULT_OUTPUT_LIMIT, TerminalView
from .connection import RpcError
from .process import child_env
from .workspace import Workspace

_SHELL_CHARS = set(" \t|&;<>()$`\\\"'*?[]#~=%")


@dataclass(eq=False)
class _Terminal:
    view: TerminalView
    process: anyio.abc.Process
    done: anyio.Event = field(default_factory=anyio.Event)


class Terminals:
    """The terminals of one session."""

    _ids = itertools.count(1)

    def __init__(self, task_group: anyio.abc.TaskGroup, workspace: Workspace, cwd: str,
                 on_output: Callable[[TerminalView, str], None]) -> None:
        self._tg = task_group
        self._workspace = workspace
        self._cwd = cwd
        self._on_output = on_output
        self._live: dict[str, _Terminal] = {}
        self.views: dict[str, TerminalView] = {}

    async def create(self, params: Any) -> dict[str, Any]:
        params = params if isinstance(params, dict) else {}
        command, args = params.get("command"), params.get("args") or []
        if not isinstance(command, str) or not command:
            raise RpcError(rpc.INVALID_PARAMS, "command must be a non-empty string")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise RpcError(rpc.INVALID_PARAMS, "args must be a list of strings")
        cwd = params.get("cwd") or self._cwd
        cwd = str(self._workspace.resolve(cwd))
        env: dict[str, str | None] = {}
        for item in params.get("env") or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                env[item["name"]] = str(item.get("value", ""))
        limit = params.get("outputByteLimit")
        limit = limit if isinstance(limit, int) and limit >= 0 else DEFAULT_OUTPUT_LIMIT
        # A bare command line with shell syntax ("echo hi | wc") runs through the shell, as
        # agents that send one string expect; command + args run directly.
        argv = (["/bin/sh", "-c", command] if not args and set(command) & _SHELL_CHARS
                else [command, *args])
        try:
            process = await anyio.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                cwd=cwd, env=child_env(env), start_new_session=True)
        except OSError as exc:
            raise RpcError(rpc.INTERNAL_ERROR, f"could not start {command!r}: {exc}") from None
        terminal_id = f"term-{next(self._ids)}"
        view = TerminalView(terminal_id, shlex.join(argv) if args else command, limit=limit)
        terminal = _Terminal(view, process)
        self._live[terminal_id] = terminal
        self.views[terminal_id] = view
        self._tg.start_soon(self._pump, terminal, name=f"acp terminal {terminal_id}")
        return {"terminalId": terminal_id}

    async def _pump(self, terminal: _Terminal) -> None:
        stream = terminal.process.stdout
        assert stream is not None
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                 anyio.BrokenResourceError):
            while True:
                data = await stream.receive(65536)
                terminal.view.append(data)
                self._on_output(terminal.view, data.decode("utf-8", "replace"))
        code = await terminal.process.wait()
        if code < 0:
            try:
                terminal.view.signal = signal.Signals(-code).name
            except ValueError:  # a real-time signal (SIGRTMIN+n) has no enum member
                terminal.view.signal = f"SIG{-code}"
        else:
            terminal.view.exit_code = code
        terminal.done.set()
        self._on_output(terminal.view, "")

    def _get(self, params: Any) -> _Terminal:
        tid = params.get("terminalId") if isinstance(params, dict) else None
        terminal = self._live.get(tid) if isinstance(tid, str) else None
        if terminal is None:
            raise RpcError(rpc.INVALID_PARAMS, f"unknown or released terminal: {tid!r}")
        return terminal

    async def output(self, params: Any) -> dict[str, Any]:
        view = self._get(params).view
        out: dict[str, Any] = {"output": view.text, "truncated": view.truncated}
        if view.exited:
            out["exitStatus"] = view.exit_status()
        return out

    async def wait_for_exit(self, params: Any) -> dict[str, Any]:
        terminal = self._get(params)
        await terminal.done.wait()
        return terminal.view.exit_status()

    async def kill(self, params: Any) -> dict[str, Any]:
        _kill(self._get(params))
        return {}

    async def release(self, params: Any) -> dict[str, Any]:
        terminal = self._get(params)
        _kill(terminal)
        terminal.view.released = True
        del self._live[terminal.view.terminal_id]
        return {}

    def kill_many(self, terminal_ids: set[str]) -> None:
        """Kill these terminals if still running; they stay valid for output and release.

        Agents often abandon their terminals when a turn is cancelled (fast-agent sends no
        terminal/kill or release then), so the turn's end must not leave their commands running.
        """
        for tid in terminal_ids:
            terminal = self._live.get(tid)
            if terminal is not None:
                _kill(terminal)

    async def wait_exited(self, terminal_ids: set[str]) -> None:
        for tid in terminal_ids:
            terminal = self._live.get(tid)
            if terminal is not None:
                await terminal.done.wait()

    async def aclose(self) -> None:
        """Kill every terminal still running (the agent should have released them)."""
        with anyio.CancelScope(shield=True):
            for terminal in list(self._live.values()):
                _kill(terminal)
                with anyio.move_on_after(2):
                    await terminal.done.wait()
            self._live.clear()


def _kill(terminal: _Terminal) -> None:
    if terminal.process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(terminal.process.pid, signal.SIGKILL)
