"""How the client reaches an agent: the `AgentTransport` duties, and an in-process transport.

The client speaks newline-delimited JSON-RPC over a byte stream and needs a few things more from
whatever carries it: the agent's stderr (the tail quoted in errors), its exit (and code), and a
way to stop it. `AgentProcess` (process.py) does that for a subprocess on stdio pipes; it is what
`connect()` uses unless `ClientOptions.transport` names another factory.

`InProcessTransport` runs an agent on a thread of this process instead. Its streams are a socket
pair (a kernel buffer, like a pipe: a side that stops reading makes the other wait, as with a real
agent); the agent sees blocking binary files and ends by returning or calling
`AgentStreams.exit()`. Tests use it to drive a scripted agent without spawning a process; code
that embeds an agent written in Python can use it too::

    def serve(streams: AgentStreams) -> int:
        for line in streams.stdin:  # ends when the client closes the agent's stdin
            ...
            streams.stdout.write(reply)
            streams.stdout.flush()
        return 0

    async with connect(["my-agent"], transport=in_process(serve)) as client: ...
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import BinaryIO, Protocol

import anyio
import anyio.abc

from ..protocol.redact import Redactor, secret_args, secret_values
from .process import StderrTail, child_env


class AgentTransport(Protocol):
    """What the client needs from the thing that carries its connection to one agent.

    `receive` raises `anyio.EndOfStream` once the agent's output ended; `send` raises `OSError`
    (or an anyio stream error) once its input is gone. `wait`/`wait_exit` give the exit code
    (a negative signal number for a killed agent). `aclose` ends the agent for good: it closes
    its input, waits up to `grace` seconds for it to exit, then forces it, and is shielded.
    """

    stderr: StderrTail
    redactor: Redactor
    killed_by_us: bool

    @property
    def display(self) -> str: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def returncode(self) -> int | None: ...

    async def start(self, task_group: anyio.abc.TaskGroup) -> None: ...
    async def send(self, data: bytes) -> None: ...
    async def receive(self) -> bytes: ...
    async def wait(self, timeout: float) -> int | None: ...
    async def wait_exit(self) -> int | None: ...
    def kill(self) -> None: ...
    async def aclose(self, grace: float = 2.0) -> None: ...


#: Called like `AgentProcess(command, env, cwd, stderr_limit)` each time the client starts the
#: agent (again after a crash): the client's command, extra environment, working directory and
#: stderr tail size.
TransportFactory = Callable[[Sequence[str], Mapping[str, str | None], str, int], AgentTransport]


class AgentStreams:
    """The agent's side of an `InProcessTransport`: blocking binary files for its threads.

    `stdin` ends (EOF) when the client closes it or the agent ends; writes to `stdout` and
    `stderr` raise `OSError` once the agent ended (flush them: they are buffered). `ended` is set
    when the agent ends for whatever reason, `exit()` included: threads waiting for something
    that will no longer come can wait on it too.
    """

    def __init__(self, io: socket.socket, err: socket.socket, end: Callable[[int], None]) -> None:
        self.stdin: BinaryIO = io.makefile("rb")
        self.stdout: BinaryIO = io.makefile("wb")
        self.stderr: BinaryIO = err.makefile("wb")
        self.ended = threading.Event()
        self._end = end

    def close(self) -> None:
        """Close the files (then the sockets under them are closed for good). Called on the
        agent's main thread once `run` returned; a thread writing later gets ValueError."""
        for file in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(OSError, ValueError):
                file.close()

    def exit(self, code: int) -> None:
        """End the agent now with this exit code, as a process's `_exit` would: the client sees
        its output end and the code. The caller's thread goes on: it should unwind."""
        self._end(code)


class InProcessTransport:
    """An agent running on a daemon thread of this process, behind a socket pair.

    `run(streams)` is called on that thread; its return value is the exit code (None: 0;
    `sys.exit(n)`: n; an exception: 1, its traceback written to stderr). `kill()` ends the agent
    at once with code -9: its streams close, so its threads see EOF or `OSError` and
    `streams.ended` is set. A thread cannot be killed: one that never touches its streams again
    lingers, harmless, until it returns.
    """

    def __init__(
        self,
        run: Callable[[AgentStreams], int | None],
        *,
        name: str = "in-process agent",
        env: Mapping[str, str | None] | None = None,
        argv: Sequence[str] = (),
        stderr_limit: int = 64 * 1024,
    ) -> None:
        self._run = run
        self.name = name
        self.redactor = Redactor(
            secret_values(child_env(env)) | secret_args(list(argv)), environ=os.environ
        )
        self.stderr = StderrTail(stderr_limit, self.redactor)
        self.killed_by_us = False
        self._returncode: int | None = None
        self._lock = threading.Lock()
        self._io: socket.socket | None = None
        self._err: socket.socket | None = None
        self._agent_sockets: tuple[socket.socket, ...] = ()
        self._streams: AgentStreams | None = None
        self._exited = anyio.Event()
        self._send_lock = anyio.Lock()

    @property
    def display(self) -> str:
        return self.name

    @property
    def pid(self) -> int | None:
        return None  # no process of its own

    @property
    def returncode(self) -> int | None:
        return self._returncode if self._exited.is_set() else None

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        io, agent_io = socket.socketpair()
        err, agent_err = socket.socketpair()
        for sock in (io, err):
            sock.setblocking(False)
        self._io, self._err, self._agent_sockets = io, err, (agent_io, agent_err)
        self._streams = AgentStreams(agent_io, agent_err, self._end)
        task_group.start_soon(self._drain_stderr, name=f"acp stderr {self.name}")
        threading.Thread(
            target=self._main, args=(self._streams,), daemon=True, name=f"acp agent {self.name}"
        ).start()

    def _main(self, streams: AgentStreams) -> None:
        code: int | str | None = 1
        try:
            code = self._run(streams)
        except SystemExit as exc:  # sys.exit() on the agent's thread: an exit, as in a process
            code = exc.code
        except BaseException:
            with contextlib.suppress(OSError, ValueError):
                streams.stderr.write(traceback.format_exc().encode())
                streams.stderr.flush()
        finally:
            self._end(code if isinstance(code, int) else 0 if code is None else 1)
            streams.close()

    def _end(self, code: int) -> None:
        """The agent is gone (any thread): keep the first code, close its side of the streams."""
        with self._lock:
            if self._streams is None or self._streams.ended.is_set():
                return
            self._returncode = code
            self._streams.ended.set()
        for sock in self._agent_sockets:
            # shutdown, not just close: it wakes the agent's threads blocked reading stdin, and
            # the client's reads see EOF after what was written before.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    async def _drain_stderr(self) -> None:
        # stderr ends only when the agent does: its end is the exit the client waits for.
        assert self._err is not None
        try:
            while True:
                data = await _recv(self._err)
                if not data:
                    break
                self.stderr.feed(data)
        except (anyio.ClosedResourceError, OSError):
            pass
        finally:
            self._exited.set()

    async def send(self, data: bytes) -> None:
        if self._io is None:
            raise anyio.ClosedResourceError
        async with self._send_lock:
            view = memoryview(data)
            while view:
                try:
                    view = view[self._io.send(view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self._io)

    async def receive(self) -> bytes:
        """The next bytes the agent wrote; `anyio.EndOfStream` once it ended."""
        if self._io is None or self._io.fileno() < 0:
            raise anyio.ClosedResourceError
        try:
            data = await _recv(self._io)
        except ConnectionError:
            raise anyio.EndOfStream from None
        except OSError:
            if self._io.fileno() < 0:  # closed by aclose() while this read went on
                raise anyio.ClosedResourceError from None
            raise
        if not data:
            raise anyio.EndOfStream
        return data

    async def wait(self, timeout: float) -> int | None:
        """The exit code, if the agent ends within `timeout` seconds."""
        if self._streams is None:
            return None
        with anyio.move_on_after(timeout):
            await self._exited.wait()
        return self.returncode

    async def wait_exit(self) -> int | None:
        await self._exited.wait()
        return self.returncode

    def kill(self) -> None:
        """End the agent now (code -9, as SIGKILL would)."""
        if self._streams is None or self._streams.ended.is_set():
            return
        self.killed_by_us = True
        self._end(-signal.SIGKILL)

    async def aclose(self, grace: float = 2.0) -> None:
        """Close the agent's stdin, give it `grace` seconds to end, then end it (-15)."""
        if self._streams is None:
            return
        with anyio.CancelScope(shield=True):
            if self._io is not None and self._io.fileno() >= 0:
                with contextlib.suppress(OSError):
                    self._io.shutdown(socket.SHUT_WR)
            if not self._streams.ended.is_set() and await self.wait(grace) is None:
                self.killed_by_us = True
                self._end(-signal.SIGTERM)
            await self.wait(5.0)
            for sock in (self._io, self._err):
                if sock is not None and sock.fileno() >= 0:
                    anyio.notify_closing(sock)
                    sock.close()


async def _recv(sock: socket.socket) -> bytes:
    while True:
        try:
            return sock.recv(262144)
        except BlockingIOError:
            await anyio.wait_readable(sock)


def in_process(run: Callable[[AgentStreams], int | None]) -> TransportFactory:
    """A `ClientOptions.transport` that runs `run` in this process for each start of the agent;
    the client's command names it in messages, its `env` feeds the redactor only."""

    def factory(
        command: Sequence[str], env: Mapping[str, str | None], cwd: str, stderr_limit: int
    ) -> AgentTransport:
        return InProcessTransport(
            run,
            name=shlex.join(command) or "in-process agent",
            env=env,
            argv=command,
            stderr_limit=stderr_limit,
        )

    return factory
