"""Client-owned terminals: `terminal/create`, `output`, `wait_for_exit`, `kill`, `release`.

Offered only when the client is created with `terminal=True`. Output is kept up to the agent's
`outputByteLimit` (never more than the client's `terminal_output_limit`), dropping from the start
on a UTF-8 boundary, and published live so a cell can show it; what a released terminal printed
stays visible in the turn's record.

Each command runs under `supervisor.py`, which owns its whole process tree: kill, release, the
end of a cancelled turn, closing the session or the client, the agent's death and the kernel's
exit (even by SIGKILL) end every process the command started, including ones that left with
`setsid` or a double fork. A client runs at most `max_terminals` unreleased terminals at once,
and a session keeps the output of released ones up to `_KEPT_OUTPUTS` output limits.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import itertools
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from ...errors import RpcError
from ...protocol import jsonrpc as rpc
from ...protocol import methods
from ...protocol.terminals import DEFAULT_OUTPUT_LIMIT, TerminalView
from ..process import child_env
from .supervisor import kill_cgroup
from .workspace import Workspace

_SHELL_CHARS = set(" \t|&;<>()$`\\\"'*?[]#~=%")
_SUPERVISOR = str(Path(__file__).with_name("supervisor.py"))
_START_TIMEOUT = 30.0  # seconds for the supervisor to report the command started (a busy host)
_DRAIN_TIMEOUT = 0.25  # seconds to read the output of an exited command that left processes
_KEPT_OUTPUTS = 8  # released terminals' output kept per session, in units of the output limit
# Give each terminal a cgroup v2 where one is writable. The subreaper alone already ends what a
# command starts; the cgroup also covers a command that kills its supervisor. (A switch for tests
# of the plain subreaper; it is not in the terminal's environment, where the agent could set it.)
USE_CGROUP = True

# -- how many terminals a client may have, across its sessions ----------------------------------

DEFAULT_MAX_TERMINALS = 16


class TerminalSlots:
    """How many terminals one client may have unreleased at once, across its sessions."""

    def __init__(self, limit: int = DEFAULT_MAX_TERMINALS) -> None:
        self.limit = limit
        self.used = 0

    def take(self) -> None:
        if self.used >= self.limit:
            raise RpcError(
                rpc.INTERNAL_ERROR,
                f"too many terminals: {self.used} are open, the limit is {self.limit}; "
                f"release one ({methods.TERMINAL_RELEASE}) before creating another",
            )
        self.used += 1

    def give_back(self) -> None:
        self.used = max(0, self.used - 1)


# -- the processes behind terminals: signalling a supervisor, reading its status lines, closing it
# and its cgroup, and killing what is still running when the interpreter exits

CLOSE_TIMEOUT = 5.0  # seconds for a killed tree to be gone before we stop waiting

# Supervisors still running in this process, signalled at interpreter exit: a kernel shutting
# down must not leave commands behind (PDEATHSIG and the closed stdin also tell them, later).
RUNNING: set[int] = set()


@atexit.register
def _kill_all_at_exit() -> None:
    for pid in list(RUNNING):
        signal_pid(pid, signal.SIGTERM)


def signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


async def read_status_line(process: anyio.abc.Process) -> bytes:
    """One status line from the supervisor (short: it writes them whole, one write each)."""
    stream = process.stderr
    assert stream is not None
    line = b""
    while not line.endswith(b"\n"):
        line += await stream.receive(1)
        if len(line) > 4096:
            break
    return line


async def close_process(process: anyio.abc.Process) -> None:
    # Closing the pipes through anyio (not just dropping them) keeps their transports from being
    # collected after the event loop ended ("Event loop is closed" at exit).
    # (Signal only a supervisor not yet reaped: a reaped one's pid may belong to another.)
    if process.returncode is None:
        signal_pid(process.pid, signal.SIGTERM)
        with anyio.move_on_after(CLOSE_TIMEOUT):
            await process.wait()
    if process.returncode is None:
        signal_pid(process.pid, signal.SIGKILL)
    with anyio.move_on_after(1), contextlib.suppress(Exception):
        await process.aclose()


async def remove_cgroup(cgroup: str | None) -> None:
    # The supervisor removes its cgroup as it exits; it is still there if the supervisor was
    # killed (by the command, to free what it started): kill what is left in it.
    if cgroup is None:
        return
    with anyio.move_on_after(CLOSE_TIMEOUT):
        while not kill_cgroup(cgroup):  # noqa: ASYNC110 (no event tells a cgroup emptied)
            await anyio.sleep(0.01)  # killed processes take a moment to leave it


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal (SIGRTMIN+n) has no enum member
        return f"SIG{number}"


@dataclass(eq=False)
class _Terminal:
    view: TerminalView
    process: anyio.abc.Process
    cgroup: str | None  # the cgroup the command was born in, where there is one
    exited: anyio.Event = field(default_factory=anyio.Event)  # the command has exited
    pumped: anyio.Event = field(default_factory=anyio.Event)  # its output reached end-of-file
    closed: anyio.Event = field(default_factory=anyio.Event)  # its whole tree, and our pipes


class Terminals:
    """The terminals of one session."""

    _ids = itertools.count(1)

    def __init__(
        self,
        task_group: anyio.abc.TaskGroup,
        workspace: Workspace,
        cwd: str,
        on_output: Callable[[TerminalView, str], None],
        slots: TerminalSlots | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> None:
        self._tg = task_group
        self._workspace = workspace
        self._cwd = cwd
        self._on_output = on_output
        self._slots = slots or TerminalSlots()
        self._output_limit = output_limit
        self._live: dict[str, _Terminal] = {}  # not yet released
        self._open: set[_Terminal] = set()  # not yet torn down (released ones too)
        self._closed = False
        self.views: dict[str, TerminalView] = {}
        # Released terminals whose output is still kept, oldest first, and their budget.
        self._kept: collections.deque[TerminalView] = collections.deque()
        self._kept_limit = _KEPT_OUTPUTS * output_limit

    async def create(self, params: Any) -> dict[str, Any]:
        params = params if isinstance(params, dict) else {}
        command, args = params.get("command"), params.get("args") or []
        if not isinstance(command, str) or not command:
            raise RpcError(rpc.INVALID_PARAMS, "command must be a non-empty string")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise RpcError(rpc.INVALID_PARAMS, "args must be a list of strings")
        if self._closed:
            raise RpcError(rpc.INTERNAL_ERROR, "the session is closed")
        cwd = params.get("cwd") or self._cwd
        cwd = str(self._workspace.resolve(cwd))
        env: dict[str, str | None] = {}
        for item in params.get("env") or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                env[item["name"]] = str(item.get("value", ""))
        limit = params.get("outputByteLimit")
        # An agent asking for gigabytes gets the client's limit: the output is kept in memory.
        limit = (
            min(limit, self._output_limit)
            if isinstance(limit, int) and limit >= 0
            else self._output_limit
        )
        # A bare command line with shell syntax ("echo hi | wc") runs through the shell, as
        # agents that send one string expect; command + args run directly.
        argv = (
            ["/bin/sh", "-c", command]
            if not args and set(command) & _SHELL_CHARS
            else [command, *args]
        )
        self._slots.take()
        try:
            process, cgroup = await self._spawn(argv, cwd, env)
        except BaseException:
            self._slots.give_back()
            raise
        terminal_id = f"term-{next(self._ids)}"
        view = TerminalView(terminal_id, shlex.join(argv) if args else command, limit=limit)
        terminal = _Terminal(view, process, cgroup)
        self._live[terminal_id] = terminal
        self._open.add(terminal)
        self.views[terminal_id] = view
        self._tg.start_soon(self._run, terminal, name=f"acp terminal {terminal_id}")
        return {"terminalId": terminal_id}

    async def _spawn(
        self, argv: list[str], cwd: str, env: dict[str, str | None]
    ) -> tuple[anyio.abc.Process, str | None]:
        """Start the supervisor and wait until it has started the command (or could not)."""
        try:
            process = await anyio.open_process(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    _SUPERVISOR,
                    str(os.getpid()),
                    "cgroup" if USE_CGROUP else "nocgroup",
                    *argv,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=child_env(env),
                start_new_session=True,
            )
        except OSError as exc:
            raise RpcError(rpc.INTERNAL_ERROR, f"could not start {argv[0]!r}: {exc}") from None
        RUNNING.add(process.pid)
        line = b""
        cgroup: str | None = None
        try:
            with anyio.move_on_after(_START_TIMEOUT), contextlib.suppress(anyio.EndOfStream):
                line = await read_status_line(process)
                if line.startswith(b"cgroup "):  # said before the command starts
                    cgroup = line.decode("utf-8", "replace").rstrip("\n").split(" ", 1)[1]
                    line = await read_status_line(process)
        finally:
            if not line.startswith(b"started "):  # it failed, or we were cancelled meanwhile
                RUNNING.discard(process.pid)
                with anyio.CancelScope(shield=True):
                    await close_process(process)
                    # The command may have started and killed the supervisor before it could
                    # say so: what it started is in the cgroup.
                    await remove_cgroup(cgroup)
        if not line.startswith(b"started "):
            reason = line.decode("utf-8", "replace").strip().removeprefix("error ")
            raise RpcError(
                rpc.INTERNAL_ERROR, f"could not start {argv[0]!r}: {reason or 'no answer'}"
            )
        said = line.decode("utf-8", "replace").rstrip("\n").split(" ", 2)[2:]
        return process, (said[0] if said and said[0] != "-" else cgroup)

    async def _run(self, terminal: _Terminal) -> None:
        """Pump output and status until the whole tree is gone, then close our pipes."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump, terminal)
                await self._watch_status(terminal)
                # The supervisor is gone, and with it the tree, unless the command killed the
                # supervisor: then the cgroup still holds what it started.
                await remove_cgroup(terminal.cgroup)
                with anyio.move_on_after(CLOSE_TIMEOUT):
                    await terminal.pumped.wait()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                RUNNING.discard(terminal.process.pid)
                await close_process(terminal.process)
                await remove_cgroup(terminal.cgroup)
                self._exited(terminal, None, "SIGKILL")  # torn down before anyone said
                terminal.closed.set()
                if terminal.view.released:
                    self._keep_within_budget(terminal.view)
                self._open.discard(terminal)

    async def _pump(self, terminal: _Terminal) -> None:
        stream = terminal.process.stdout
        assert stream is not None
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            while True:
                data = await stream.receive(65536)
                terminal.view.append(data)
                self._on_output(terminal.view, data.decode("utf-8", "replace"))
        terminal.pumped.set()

    async def _watch_status(self, terminal: _Terminal) -> None:
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            while True:
                kind, _, value = (await read_status_line(terminal.process)).decode().partition(" ")
                value = value.strip()
                if kind == "exit" and value.lstrip("-").isdigit():
                    code, sig = int(value), None
                elif kind == "signal" and value.isdigit():
                    code, sig = None, signal_name(int(value))
                else:
                    continue
                # What the command printed is in the pipe before its exit is reported: let the
                # pump read it, so wait_for_exit then output shows all of it. End-of-file comes
                # at once unless a background process it left still holds the pipe.
                with anyio.move_on_after(_DRAIN_TIMEOUT):
                    await terminal.pumped.wait()
                self._exited(terminal, code, sig)
                break
        status = await terminal.process.wait()
        # No report: the supervisor itself was killed (by the command?) before it could say.
        self._exited(terminal, None, signal_name(-status) if status < 0 else "SIGKILL")

    def _exited(self, terminal: _Terminal, code: int | None, sig: str | None) -> None:
        if terminal.exited.is_set():
            return
        terminal.view.exit_code, terminal.view.signal = code, sig
        terminal.exited.set()
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
        await terminal.exited.wait()
        return terminal.view.exit_status()

    async def kill(self, params: Any) -> dict[str, Any]:
        terminal = self._get(params)
        _kill(terminal)
        # Answer once the command is dead, so a following terminal/output shows how it ended.
        with anyio.move_on_after(CLOSE_TIMEOUT):
            await terminal.exited.wait()
        return {}

    async def release(self, params: Any) -> dict[str, Any]:
        terminal = self._get(params)
        self._release(terminal)
        # Answer once its processes are gone and its pipes closed: nothing of it is left then.
        with anyio.move_on_after(CLOSE_TIMEOUT):
            await terminal.closed.wait()
        return {}

    def _release(self, terminal: _Terminal) -> None:
        _kill(terminal)
        terminal.view.released = True
        if self._live.pop(terminal.view.terminal_id, None) is not None:
            self._slots.give_back()
            if terminal.closed.is_set():
                self._keep_within_budget(terminal.view)

    def _keep_within_budget(self, view: TerminalView) -> None:
        """Keep the output of released terminals within a budget, dropping the oldest first.

        The cap bounds the terminals alive at once, not how many an agent creates and releases
        in a session; what they printed stays in the turn records, and would grow without end.
        """
        self._kept.append(view)
        total = sum(len(v.output) for v in self._kept)
        while total > self._kept_limit and len(self._kept) > 1:
            oldest = self._kept.popleft()
            total -= len(oldest.output)
            oldest.output.clear()
            oldest.truncated = True

    def kill_many(self, terminal_ids: set[str]) -> None:
        """Kill these terminals if still running; they stay valid for output and release.

        Agents often abandon their terminals when a turn is cancelled (fast-agent sends no
        terminal/kill or release then), so the turn's end must not leave their commands running.
        """
        for tid in terminal_ids:
            terminal = self._live.get(tid)
            if terminal is not None:
                _kill(terminal)

    def release_all(self) -> None:
        """Kill and release every terminal: the agent that created them is gone."""
        for terminal in list(self._live.values()):
            self._release(terminal)

    async def wait_exited(self, terminal_ids: set[str]) -> None:
        for tid in terminal_ids:
            terminal = self._live.get(tid)
            if terminal is not None:
                await terminal.exited.wait()

    async def aclose(self) -> None:
        """Kill and release every terminal, and wait until their processes are gone."""
        self._closed = True
        with anyio.CancelScope(shield=True):
            self.release_all()
            for terminal in list(self._open):
                _kill(terminal)  # released earlier, maybe still being torn down
                with anyio.move_on_after(CLOSE_TIMEOUT):
                    await terminal.closed.wait()


def _kill(terminal: _Terminal) -> None:
    # The supervisor kills the whole tree on SIGTERM; a supervisor that is gone has nothing left.
    if terminal.process.returncode is None:
        signal_pid(terminal.process.pid, signal.SIGTERM)
