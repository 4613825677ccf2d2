"""Running the agent's code in the user's namespace, and the gate that keeps it out of a cell's way.

The code runs on the kernel's event loop, synchronously, in one go: `await` at the top level is
refused (it would let a user's cell start in the middle of the agent's code). What it prints to
stdout and stderr, the value of its last expression and its exception, if any, are captured, each
bounded. An interrupt of the kernel (the ■ button) stops it and is reported as such.

`CellGate` knows when a user's cell runs (IPython's pre/post_run_cell events). The agent's code
runs when no cell does, or when the running cell is the one waiting for this agent's turn (a
`%%agent` cell, or a cell that awaits a turn it started): that cell is idle, waiting for the
agent, which is what the user asked for. Otherwise the code waits until the cell ends.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import getpass
import io
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .kernel_tools import bounded_repr, clip

MAX_STREAM = 10_000  # characters of stdout and of stderr kept
MAX_RESULT = 5_000
MAX_TRACEBACK = 8_000
FILENAME = "<agent code>"


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


def run_code(code: str, ns: dict[str, Any], mask: Callable[[str], str]) -> RunOutcome:
    """Run `code` in `ns` like a cell: statements, then the last expression's value as the
    result. `mask` redacts what is reported (tracebacks may quote secrets)."""
    out, err = BoundedWriter(), BoundedWriter()
    result: str | None = None
    error: str | None = None
    try:
        body, last = _compile(code)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _no_input():
            exec(body, ns)
            if last is not None:
                value = eval(last, ns)
                if value is not None:
                    result = bounded_repr(value, MAX_RESULT)
    except KeyboardInterrupt:
        error = "KeyboardInterrupt: the user interrupted the kernel while this code ran"
    except SyntaxError as exc:
        error = clip("".join(traceback.format_exception_only(exc)), MAX_TRACEBACK)
    except BaseException as exc:  # SystemExit too: the agent's code must not end the kernel
        error = _traceback(exc)
    return RunOutcome(
        mask(out.getvalue()),
        mask(err.getvalue()),
        mask(result) if result is not None else None,
        mask(error) if error is not None else None,
    )


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
    return clip("".join(lines), MAX_TRACEBACK)


class CellGate:
    """Whether a user's cell runs now, and a lock so that the agent's runs take turns.

    `running_turns` gives the turns running at a moment (any object with identity); a cell is
    "waiting for the agent" when the turn of the calling session started after the cell did.
    """

    def __init__(self, events: Any, running_turns: Callable[[], Iterable[object]]) -> None:
        self._running_turns = running_turns
        # Made while a cell runs (the first %%agent cell opens the server): count it as one.
        self.cell_running = True
        self._turns_before: set[int] = set()
        self._idle = asyncio.Event()
        self.lock = asyncio.Lock()
        self._events = events
        events.register("pre_run_cell", self._pre)
        events.register("post_run_cell", self._post)

    def close(self) -> None:
        for name, callback in (("pre_run_cell", self._pre), ("post_run_cell", self._post)):
            with contextlib.suppress(ValueError):
                self._events.unregister(name, callback)

    def _pre(self, info: Any = None) -> None:
        self.cell_running = True
        self._idle.clear()
        self._turns_before = {id(t) for t in self._running_turns()}

    def _post(self, result: Any = None) -> None:
        self.cell_running = False
        self._idle.set()

    def may_run(self, turn: object | None) -> bool:
        """No cell runs, or the running cell waits for `turn` (started during that cell)."""
        if not self.cell_running:
            return True
        return turn is not None and id(turn) not in self._turns_before

    async def wait(self, turn: Callable[[], object | None], timeout: float) -> bool:
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
