"""Running the agent's code in the user's namespace, and the gate that keeps it out of a cell's way.

The code runs on the kernel's event loop, synchronously, in one go: `await` at the top level is
refused (it would let a user's cell start in the middle of the agent's code). What it prints to
stdout and stderr, the value of its last expression and its exception, if any, are captured, each
bounded.

Stopping it (`Stopper`). The loop is blocked while the code runs, so nothing that goes through
the loop can stop it: ipykernel's interrupt of an awaited cell only queues the cell's
cancellation on the loop, and when no cell runs the kernel ignores SIGINT; `while True: pass`
ran through any number of interrupts, and the cell's --timeout (a timer of the loop) never
fired. So while the code runs on the main thread, SIGINT has a handler of ours, which raises
`KeyboardInterrupt` in the code (and first calls the handler it replaced, so an interrupt of a
cell still cancels that cell as any interrupt does); the turn's deadline is a thread that sends
SIGINT to the main thread when it comes, and again every second while the code runs on (a bare
`except:` swallowed the first), which raises `CodeTimedOut`. A signal also ends a blocking call
(`time.sleep`, a socket read). Code that catches every exception in a loop of its own cannot be
stopped from inside the kernel: only a restart ends it.

`CellGate` knows when a user's cell runs (IPython's pre/post_run_cell events). The agent's code
runs when no cell does, or when the running cell is the one waiting for this agent's turn: a
prompt of the turn was made in that cell (a `%%agent` cell, or a cell that prompts and awaits),
which `client.turn.PROMPT_ORIGIN` tells. A turn the chat started while a cell of the user's
runs is not that cell's: its code waits until the cell ends.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import getpass
import io
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ..client.turn import PROMPT_ORIGIN
from ..protocol.limits import clip_text
from .variables import bounded_repr

if TYPE_CHECKING:
    from ..client.turn import TurnHandle

MAX_STREAM = 10_000  # characters of stdout and of stderr kept
MAX_RESULT = 5_000
MAX_TRACEBACK = 8_000
FILENAME = "<agent code>"
STOP_AGAIN = 1.0  # seconds between two stops of code that runs on past its deadline
INTERRUPTED = "KeyboardInterrupt: the user interrupted the kernel while this code ran"
T = TypeVar("T")
TIMED_OUT = (
    "CodeTimedOut: the turn's time limit (--timeout) came while this code ran: it was stopped"
)


class BoundedWriter(io.TextIOBase):
    """A text stream that keeps the first `limit` characters and counts the rest."""

    def __init__(self, limit: int = MAX_STREAM) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # as a real text stream: kept, it broke getvalue() later
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(len(text), room)
        self.dropped += max(len(text) - max(room, 0), 0)
        return len(text)

    def getvalue(self) -> str:
        text = "".join(self.parts)
        return text + (f"\n… ({self.dropped:,} more characters)" if self.dropped else "")


@dataclass(frozen=True)
class RunOutcome:
    """What running the agent's code gave; every field bounded."""

    stdout: str
    stderr: str
    result: str | None  # the repr of the last expression's value, if it had one
    error: str | None  # the exception's traceback, if it raised
    stopped: str | None = None  # "interrupted" or "timed out" when it was stopped

    def to_text(self) -> str:
        parts = []
        if self.stdout:
            parts.append(f"stdout:\n{self.stdout}")
        if self.stderr:
            parts.append(f"stderr:\n{self.stderr}")
        if self.result is not None:
            parts.append(f"result:\n{self.result}")
        if self.error is not None:
            parts.append(f"error:\n{self.error}")
        return "\n\n".join(parts) or "(no output)"


def run_code(
    code: str, ns: dict[str, Any], mask: Callable[[str], str], time_limit: float | None = None
) -> RunOutcome:
    """Run `code` in `ns` like a cell: statements, then the last expression's value as the
    result. `mask` redacts what is reported (tracebacks may quote secrets). The kernel's
    interrupt stops it, and so does `time_limit` (seconds) when given (see `Stopper`)."""
    out, err = BoundedWriter(), BoundedWriter()
    result: str | None = None
    error: str | None = None
    stopper = Stopper(time_limit)
    try:
        body, last = _compile(code)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _no_input():
            with stopper:  # innermost: nothing of the machinery runs under it
                result = stopper.call(lambda: _execute(body, last, ns))
    except KeyboardInterrupt as exc:  # ours, or the code's own `raise KeyboardInterrupt`
        error = INTERRUPTED if stopper.stopped == "interrupted" else _traceback(exc)
    except CodeTimedOut:
        error = TIMED_OUT
    except SyntaxError as exc:
        error = clip_text("".join(traceback.format_exception_only(exc)), MAX_TRACEBACK)
    except BaseException as exc:  # SystemExit too: the agent's code must not end the kernel
        error = _traceback(exc)
    return RunOutcome(
        mask(out.getvalue()),
        mask(err.getvalue()),
        mask(result) if result is not None else None,
        mask(error) if error is not None else None,
        stopper.stopped,
    )


def _execute(body: Any, last: Any, ns: dict[str, Any]) -> str | None:
    exec(body, ns)
    if last is not None:
        value = eval(last, ns)
        if value is not None:
            return bounded_repr(value, MAX_RESULT)  # its __repr__ is code to stop too
    return None


def stoppable(read: Callable[[], T], time_limit: float | None) -> tuple[T | None, str | None]:
    """`read()` under a `Stopper`: its value and None, or None and "interrupted" or "timed out"
    (a read tool runs the user's objects' code: a __repr__ that hangs)."""
    stopper = Stopper(time_limit)
    try:
        with stopper:
            return stopper.call(read), None
    except KeyboardInterrupt:
        return None, "interrupted"
    except CodeTimedOut:
        return None, "timed out"


class CodeTimedOut(BaseException):
    """Raised in the agent's code when its turn's deadline came (a BaseException, as
    KeyboardInterrupt is: `except Exception` in the code does not keep it running)."""


class Stopper:
    """While the agent's code runs: SIGINT raises in it, and the deadline too (module doc).

    The code is what runs under `call`: the handler raises only there, never in the machinery
    around it (a KeyboardInterrupt raised as the code ended, in `__exit__` or in the exit of a
    `redirect_stdout`, would have left our handler, or the captured stdout, in place for good).
    Only on the main thread, where Python runs signal handlers (the kernel's loop runs there);
    elsewhere (a loop in another thread, outside a kernel) it does nothing. `stopped` says
    whether the code was interrupted or timed out."""

    def __init__(self, time_limit: float | None) -> None:
        self.time_limit = time_limit
        self.stopped: str | None = None
        self._previous: Any = None
        self._installed = False
        self._lock = threading.Lock()  # the code's end and the watchdog's signal, one at a time
        self._over = threading.Event()  # the code ended
        self._time_up = False
        self._watchdog: threading.Thread | None = None

    def __enter__(self) -> Stopper:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        self._installed = True
        if self.time_limit is not None:
            main = threading.main_thread().ident or 0
            self._watchdog = threading.Thread(
                target=self._watch, args=(main,), name="acpnb agent code deadline", daemon=True
            )
            self._watchdog.start()
        return self

    def _watch(self, main: int) -> None:
        limit = max(self.time_limit or 0.0, 0.0)
        while not self._over.wait(limit):
            with self._lock:
                if self._over.is_set():
                    return
                self._time_up = True
                signal.pthread_kill(main, signal.SIGINT)
            limit = STOP_AGAIN

    def call(self, code: Callable[[], T]) -> T:
        """Run `code`: the frames below this one are those the handler stops."""
        return code()

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        in_code = not self._over.is_set() and _under_call(frame)
        if self._time_up:
            if in_code:
                self.stopped = "timed out"
                raise CodeTimedOut
            return  # the code has not started or has ended: nothing to stop
        previous = self._previous
        if callable(previous) and previous is not signal.default_int_handler:
            previous(signum, frame)  # a cell's handler: the cell is cancelled as by any interrupt
        if in_code:
            self.stopped = "interrupted"
            raise KeyboardInterrupt

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._installed:
            return
        with self._lock:
            self._over.set()
        if self._watchdog is not None:
            self._watchdog.join()
        # A SIGINT sent as the code ended may still be pending: taken here (with SIGINT
        # blocked), it cannot reach the handler put back, which would cancel the user's cell.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            while signal.sigtimedwait({signal.SIGINT}, 0) is not None:
                pass
            signal.signal(signal.SIGINT, self._previous)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _under_call(frame: FrameType | None) -> bool:
    """Whether `frame` runs below `Stopper.call` (in the code), not in `call` itself (the code
    not started yet, or returned) nor outside it."""
    if frame is None or frame.f_code is _CALL:
        return False
    while frame is not None:
        if frame.f_code is _CALL:
            return True
        frame = frame.f_back
    return False


_CALL = Stopper.call.__code__


def _refuse_input(*args: object, **kwargs: object) -> str:
    raise EOFError(  # what input() raises at the end of its input
        "the agent's code cannot wait for input: nobody answers it (use a variable or a file)"
    )


@contextlib.contextmanager
def _no_input() -> Iterator[None]:
    """`input()`, `getpass` and stdin refused while the agent's code runs: they waited on the
    user (an input box in the cell, the kernel's loop blocked meanwhile) or, in a turn of the
    chat, on the kernel's own stdin or /dev/tty (a terminal: for good)."""
    saved = builtins.input, getpass.getpass, sys.stdin
    builtins.input, getpass.getpass, sys.stdin = _refuse_input, _refuse_input, io.StringIO()
    try:
        yield
    finally:
        builtins.input, getpass.getpass, sys.stdin = saved


def _compile(code: str) -> tuple[Any, Any]:
    """The statements and, if the code ends with an expression, that expression apart."""
    tree = ast.parse(code, FILENAME, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        tree.body.pop()
    body = compile(tree, FILENAME, "exec")
    return body, compile(last, FILENAME, "eval") if last is not None else None


def _traceback(exc: BaseException) -> str:
    # Frames of this module are the machinery, not the agent's code: drop them.
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    return clip_text("".join(lines), MAX_TRACEBACK)


class CellGate:
    """Whether a user's cell runs now. (The agent's runs need no lock to take turns: each runs
    in one go, the loop blocked.)

    A cell is "waiting for the agent" when a prompt of the calling session's turn was made in
    it: at each cell's start the gate sets `PROMPT_ORIGIN` to a new mark, in the cell's context
    (IPython runs pre_run_cell in it), which the turns its prompts make keep.
    """

    def __init__(self, events: Any) -> None:
        # Made while a cell runs (the first %%agent cell opens the server): count it as one,
        # its turn to come as that cell's.
        self.cell_running = True
        self._cell: object | None = self._mark()
        self._idle = asyncio.Event()
        self._events = events
        events.register("pre_run_cell", self._pre)
        events.register("post_run_cell", self._post)

    def close(self) -> None:
        for name, callback in (("pre_run_cell", self._pre), ("post_run_cell", self._post)):
            with contextlib.suppress(ValueError):
                self._events.unregister(name, callback)

    @staticmethod
    def _mark() -> object:
        cell = object()
        PROMPT_ORIGIN.set(cell)
        return cell

    def _pre(self, info: Any = None) -> None:
        self.cell_running = True
        self._idle.clear()
        self._cell = self._mark()

    def _post(self, result: Any = None) -> None:
        self.cell_running = False
        self._cell = None
        self._idle.set()

    def may_run(self, turn: TurnHandle | None) -> bool:
        """No cell runs, or the running cell waits for `turn` (one of its prompts made it)."""
        if not self.cell_running:
            return True
        cell = self._cell
        return turn is not None and cell is not None and turn.prompted_from(cell)

    async def wait(self, turn: Callable[[], TurnHandle | None], timeout: float) -> bool:
        """Wait until `may_run(turn())`, at most `timeout` seconds; whether it may."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.may_run(turn()):
            left = deadline - loop.time()
            if left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), left)
        return True
