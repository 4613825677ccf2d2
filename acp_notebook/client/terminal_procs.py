"""The processes behind client terminals: signalling a supervisor, reading its status lines,
closing it and its cgroup, and killing what is still running when the interpreter exits.
Used by `terminal.py`; the supervisor itself is `supervisor.py`."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal

import anyio
import anyio.abc

from .supervisor import kill_cgroup

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
