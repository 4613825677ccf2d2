"""The agent subprocess: spawn, drain stderr, stop without leaving anything behind.

`AgentProcess` is the client's default `AgentTransport` (see transport.py).
"""

from __future__ import annotations

import collections
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

import anyio
import anyio.abc

from ..errors import AgentStartError
from ..protocol.redact import Redactor, secret_args, secret_values


class StderrTail:
    """The last `limit` bytes an agent wrote to stderr; older output is dropped, never blocks."""

    def __init__(self, limit: int = 64 * 1024, redactor: Redactor | None = None) -> None:
        self.limit = limit
        self.redactor = redactor
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self.total = 0

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        self.total += len(data)
        # Drop a chunk only if the rest still holds `limit` bytes: dropping whenever over the
        # limit left just a small last read (the 63 bytes of half a line) after a flood.
        while len(self._chunks) > 1 and self._size - len(self._chunks[0]) >= self.limit:
            self._size -= len(self._chunks.popleft())

    def text(self, max_chars: int = 2000, since: int = 0) -> str:
        """The tail as text, masked; only what was written after `since` bytes in all (a
        `total` read earlier), so a turn's failure quotes that turn's lines, not the banner
        the agent printed when it started."""
        data = b"".join(self._chunks)[-self.limit :]
        if 0 < since <= self.total:  # a mark of an earlier process (a restart) counts as none
            data = data[max(len(data) - (self.total - since), 0) :]
        text = data.decode("utf-8", "replace").strip()
        if len(text) > max_chars:
            text = "…" + text[-max_chars:]
        return self.redactor.text(text) if self.redactor else text


def child_env(extra: Mapping[str, str | None] | None) -> dict[str, str]:
    """The full environment by default (agents need their API keys), plus per-agent values.

    A value of None removes a variable.
    """
    env = dict(os.environ)
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


# On Linux, the agent dies with the thread that started it, even when that process is SIGKILLed
# (a kernel the notebook server had to kill), which no atexit hook survives. A tiny Python stub
# asks for SIGKILL on its parent's death (prctl PR_SET_PDEATHSIG), checks that the parent did
# not die first, and execs the agent: same pid, same pipes, and the setting survives the exec.
_GUARD = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[3:])\n"
)


def _guarded(
    argv: list[str], env: Mapping[str, str], cwd: str | os.PathLike[str] | None
) -> list[str]:
    if sys.platform != "linux" or not sys.executable:
        return argv
    # The stub cannot report a missing program the way a failed spawn does: look first.
    exe = argv[0]
    if os.sep in exe:
        path = exe if os.path.isabs(exe) else os.path.join(cwd or os.getcwd(), exe)
        if not os.path.exists(path):
            raise FileNotFoundError(exe)
        if not os.access(path, os.X_OK) or os.path.isdir(path):
            raise PermissionError(exe)
    else:
        found = shutil.which(exe, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(exe)
        path = found
    return [sys.executable, "-I", "-S", "-c", _GUARD, str(os.getpid()), path, *argv]


class AgentProcess:
    """One running agent. Owns its process group; a wrapper (npx, uvx) and its children go too."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str | None] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr_limit: int = 64 * 1024,
    ) -> None:
        if not command:
            raise AgentStartError("no agent command given")
        self.command = [str(c) for c in command]
        self.env = env
        self.cwd = cwd
        # Error messages quote stderr; the agent's API keys must not be quoted with it, nor a
        # key a cell puts in os.environ later (the agent may read it from a .env file).
        self.redactor = Redactor(
            secret_values(child_env(env)) | secret_args(self.command), environ=os.environ
        )
        self.stderr = StderrTail(stderr_limit, self.redactor)
        self._proc: anyio.abc.Process | None = None
        self._send_lock = anyio.Lock()
        self.killed_by_us = False

    @property
    def display(self) -> str:
        return shlex.join(self.command)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc else None

    @property
    def proc(self) -> anyio.abc.Process:
        assert self._proc is not None, "agent process not started"
        return self._proc

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        env = child_env(self.env)
        try:
            self._proc = await anyio.open_process(
                _guarded(self.command, env, self.cwd),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=self.cwd,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise AgentStartError(
                f"agent command not found: {self.command[0]!r} (command: {self.display}). "
                "Install the agent or give its full path."
            ) from None
        except PermissionError:
            raise AgentStartError(f"agent command is not executable: {self.command[0]!r}") from None
        except OSError as exc:
            raise AgentStartError(f"could not start agent {self.display!r}: {exc}") from None
        task_group.start_soon(self._drain_stderr, name=f"acp stderr {self.pid}")

    async def _drain_stderr(self) -> None:
        # Always read stderr: an agent that logs more than a pipe buffer must never block.
        stream = self.proc.stderr
        assert stream is not None
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            while True:
                self.stderr.feed(await stream.receive(65536))

    async def send(self, data: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        async with self._send_lock:
            await stdin.send(data)

    async def receive(self) -> bytes:
        """The next bytes of stdout; raises `anyio.EndOfStream` when the agent closed it."""
        stdout = self.proc.stdout
        assert stdout is not None
        return await stdout.receive(262144)

    async def wait(self, timeout: float) -> int | None:
        """The exit code, if the process exits within `timeout` seconds."""
        if self._proc is None:
            return None
        with anyio.move_on_after(timeout):
            return await self._proc.wait()
        return self._proc.returncode

    async def wait_exit(self) -> int | None:
        """The exit code, once the process has exited, however long that takes."""
        return await self.proc.wait()

    def kill(self) -> None:
        """SIGKILL the whole process group, now."""
        if self._proc is None or self._proc.returncode is not None:
            return
        self.killed_by_us = True
        _signal_group(self._proc.pid, signal.SIGKILL)

    async def aclose(self, grace: float = 2.0) -> None:
        """Close stdin, give the agent `grace` seconds to exit, then SIGTERM, then SIGKILL.

        Shielded: it runs to the end even when the caller is being cancelled, so no agent is left.
        """
        proc = self._proc
        if proc is None:
            return
        with anyio.CancelScope(shield=True):
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    await proc.stdin.aclose()
            if proc.returncode is None and await self.wait(grace) is None:
                self.killed_by_us = True
                _signal_group(proc.pid, signal.SIGTERM)
                if await self.wait(2.0) is None:
                    _signal_group(proc.pid, signal.SIGKILL)
                    await self.wait(5.0)
            # Children of the agent that outlived it (its own group) get the same end.
            _signal_group(proc.pid, signal.SIGKILL)
            # anyio's Process.aclose also closes the pipe transports; closing only the streams
            # left a pipe that a grandchild held open as a live transport after we were done
            # ("Event loop is closed" when it was collected after the loop ended).
            with anyio.move_on_after(1), contextlib.suppress(Exception):
                await proc.aclose()


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
