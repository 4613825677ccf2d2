"""Where the scripted agent runs: a process on stdio, or a client's in-process streams.

The agent's code does not care which: it writes stdout through `Output`, stderr through
`Host.write_err`, and ends with `Host.exit` or `Host.kill`. In a process these are raw fd writes,
`os._exit` and SIGKILL. In-process (`StreamsHost`) there is no process to end: the streams
close, which is what the client sees of an agent that is gone, and the calling thread unwinds
with `AgentGone`; every other thread of the agent meets `AgentGone` at its next write or wait.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, NoReturn, Protocol

from .wire import JsonObj, encode


class AgentGone(BaseException):
    """Unwinds a thread of an in-process agent that has ended (exit, kill_self, killed).

    A BaseException: the agent's `except (ValueError, ...)` clauses must not swallow it.
    """


def write_fd(fd: int, data: bytes) -> None:
    """Writes all of data to a raw fd: os.write may write only part of it to a pipe."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Host:
    """The agent as a process on stdin/stdout/stderr (the subprocess entry point's host)."""

    def __init__(self) -> None:
        self.stdout: BinaryIO = sys.stdout.buffer
        self.name = str(os.getpid())
        # Never set: a process ends all its threads at once. StreamsHost sets it.
        self.ended = threading.Event()

    def write_err(self, data: bytes) -> None:
        # Raw fd writes: unbuffered, so the line is out even if the process dies right after.
        write_fd(2, data)

    def log(self, text: str) -> None:
        self.write_err(f"[scripted-agent {self.name}] {text}\n".encode())

    def stderr_filler(self, nbytes: int) -> None:
        """Writes nbytes of log-like lines in 64 KiB pieces; it blocks if nobody drains stderr."""
        block = (b"stderr filler " + b"." * 65 + b"\n") * 820
        while nbytes > 0:
            piece = block[:nbytes]
            self.write_err(piece)
            nbytes -= len(piece)

    def exit(self, code: int) -> NoReturn:
        os._exit(code)

    def kill(self) -> NoReturn:
        os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)  # not reached

    def output_lost(self) -> NoReturn:
        self.log("stdout is gone; exiting")
        self.exit(1)

    def hang(self) -> NoReturn:
        """Wait until the agent is ended from outside (never, for a process: it is killed)."""
        self.ended.wait()
        raise AgentGone

    def on_end(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the agent has ended while its threads still run (in-process)."""


class Streams(Protocol):
    """The agent's side of the client's in-process transport (`transport.AgentStreams`)."""

    stdin: BinaryIO
    stdout: BinaryIO
    stderr: BinaryIO
    ended: threading.Event

    def exit(self, code: int) -> None: ...


class StreamsHost(Host):
    """The agent on a thread of the client's process, behind the client's in-process streams."""

    def __init__(self, streams: Streams) -> None:
        self.streams = streams
        self.stdout = streams.stdout
        self.name = f"in-process {threading.get_ident()}"
        self.ended = streams.ended

    def write_err(self, data: bytes) -> None:
        try:
            self.streams.stderr.write(data)
            self.streams.stderr.flush()
        except (OSError, ValueError):
            raise AgentGone from None

    def exit(self, code: int) -> NoReturn:
        self.streams.exit(code)
        raise AgentGone

    def kill(self) -> NoReturn:
        self.exit(-signal.SIGKILL)

    def output_lost(self) -> NoReturn:
        if self.ended.is_set():
            raise AgentGone
        super().output_lost()

    def on_end(self, callback: Callable[[], None]) -> None:
        def watch() -> None:
            self.ended.wait()
            callback()

        threading.Thread(target=watch, daemon=True, name="scripted-agent end").start()


def quietly(target: Callable[..., Any]) -> Callable[..., None]:
    """`target` for a thread of the agent: once the agent is gone, the thread just ends."""

    def run(*args: Any) -> None:
        try:
            target(*args)
        except AgentGone:
            pass

    return run


class Output:
    """stdout shared by the reader and the turn threads: whole lines, one writer at a time."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._stream = host.stdout
        self._lock = threading.Lock()

    def send(self, msg: JsonObj) -> None:
        self.write([encode(msg)])

    def write(self, lines: Iterable[bytes]) -> None:
        with self._lock:
            try:
                for line in lines:
                    self._stream.write(line)
                self._stream.flush()
            except (OSError, ValueError):  # BrokenPipeError; ValueError: the stream was closed
                self._host.output_lost()

    def exit(self, code: int) -> NoReturn:
        """Exits at once, but never in the middle of another thread's line."""
        with self._lock:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                pass
            self._host.exit(code)
