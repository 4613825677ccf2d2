"""The kernel tools' readers and runner without a kernel: bounds, hiding, capture, the cell gate."""

from __future__ import annotations

import asyncio
import contextvars
import signal
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from acp_notebook.client.turn import TurnHandle
from acp_notebook.kernel_tools import run as kernel_tools_run
from acp_notebook.kernel_tools import variables as kernel_tools
from acp_notebook.kernel_tools.run import CellGate, run_code, stoppable
from tests.blocking import CountedKey


class Events:
    """IPython's `shell.events`, as far as the gate uses it."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Any]] = {"pre_run_cell": [], "post_run_cell": []}

    def register(self, name: str, callback: Any) -> None:
        self.callbacks[name].append(callback)

    def unregister(self, name: str, callback: Any) -> None:
        self.callbacks[name].remove(callback)

    def trigger(self, name: str) -> None:
        for callback in self.callbacks[name]:
            callback(None)


def test_a_huge_string_is_cut_before_it_is_formatted() -> None:
    big = "é" * 50_000_000
    started = time.monotonic()
    shown = kernel_tools.bounded_repr(big)
    assert time.monotonic() - started < 0.5
    assert len(shown) < kernel_tools.INSPECT_REPR + 100 and "50,000,000 in all" in shown
    nested = {"rows": [list(range(1000))] * 1000}
    assert len(kernel_tools.bounded_repr(nested, 300)) <= 400


def test_a_repr_that_raises_is_reported() -> None:
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr for you")

    assert "Broken" in kernel_tools.bounded_repr(Broken())  # reprlib names it; nothing raises
    assert "Broken" in kernel_tools.list_variables({"b": Broken()}).text


def test_the_list_hides_modules_callables_and_private_names_unless_asked() -> None:
    import os

    ns = {"os": os, "f": len, "_x": 1, "In": [], "n": 3, "s": "abc", "C": int, "shown": [1, 2]}
    listed = kernel_tools.list_variables(ns, hidden_names={"shown"}).text
    assert "n: int = 3" in listed and "s: str, length 3 = 'abc'" in listed
    for name in ("os:", "f:", "_x:", "In:", "C:", "shown:"):
        assert name not in listed, name
    everything = kernel_tools.list_variables(ns, include_hidden=True).text
    assert "os: module" in everything and "_x: int = 1" in everything


def test_inspect_names_a_missing_variable_and_suggests() -> None:
    out = kernel_tools.inspect_variable({"counter": 1}, "countr")
    assert out.error and "counter" in out.text


def test_run_code_captures_output_result_and_errors_bounded() -> None:
    ns: dict[str, Any] = {}
    out = run_code("x = 2\nprint('a' * 50_000)\nx * 21", ns, str)
    assert ns["x"] == 2 and out.result == "42" and out.error is None
    assert len(out.stdout) < 10_100 and "more characters" in out.stdout
    failed = run_code("def f():\n    raise KeyError('k')\nf()", ns, str)
    assert failed.error is not None and "KeyError: 'k'" in failed.error
    assert kernel_tools_run.__file__ not in failed.error  # our frames are left out
    leaving = run_code("raise SystemExit(3)", ns, str)
    assert leaving.error is not None and "SystemExit" in leaving.error  # the kernel stays
    masked = run_code("print('key sk-123')", ns, lambda t: t.replace("sk-123", "[redacted]"))
    assert masked.stdout == "key [redacted]\n"


def _turn() -> TurnHandle:
    """A turn made where it is called, as `Session.prompt` makes one (no agent behind it)."""

    async def cancel(turn: TurnHandle) -> None:
        pass

    return TurnHandle(SimpleNamespace(id="s", cwd="."), [], cancel=cancel)


def test_the_gate_lets_code_run_only_outside_other_cells() -> None:
    async def main() -> None:
        events = Events()
        # Made during a cell (the %%agent cell that opened the server): its turn may run.
        gate = CellGate(events)
        this_turn = _turn()
        assert gate.may_run(this_turn)
        events.trigger("post_run_cell")
        assert gate.may_run(None)
        earlier_turn = _turn()  # a --background turn, then the user runs a cell

        def a_cell() -> TurnHandle:  # IPython runs pre_run_cell in the cell's own context
            events.trigger("pre_run_cell")
            return _turn()

        cells_turn = contextvars.copy_context().run(a_cell)
        assert not gate.may_run(earlier_turn) and not gate.may_run(None)
        assert not gate.may_run(this_turn)  # an earlier cell's
        assert gate.may_run(cells_turn)  # a turn this cell started and waits for
        waiter = asyncio.ensure_future(gate.wait(lambda: earlier_turn, 30))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        events.trigger("post_run_cell")
        assert await waiter
        events.trigger("pre_run_cell")
        assert not await gate.wait(lambda: None, 0.05)  # bounded
        gate.close()
        assert events.callbacks == {"pre_run_cell": [], "post_run_cell": []}

    contextvars.Context().run(asyncio.run, main())


def test_a_turn_the_chat_starts_during_a_cell_is_not_that_cells() -> None:
    """The chat's turn, started (in a context of its own: a widget message over a subshell)
    while a cell of the user's runs, counted as the cell's because it started after it: its
    code ran in the middle of the cell (an async cell printed [0, 1, 2, 3, 4, -999, 6, ...])."""
    events = Events()

    def a_cell() -> tuple[CellGate, TurnHandle]:
        gate = CellGate(events)
        events.trigger("post_run_cell")
        events.trigger("pre_run_cell")  # the user's cell runs ...
        return gate, _turn()

    gate, cells_turn = contextvars.copy_context().run(a_cell)
    chats_turn = contextvars.Context().run(_turn)  # ... and the chat starts a turn meanwhile
    assert gate.may_run(cells_turn) and not gate.may_run(chats_turn)
    # Input the cell sends while the chat's turn is queued joins that turn: the cell waits.
    contextvars.copy_context().run(chats_turn.merge, [])
    assert not gate.may_run(chats_turn)  # that merge was made outside the cell
    events.trigger("post_run_cell")
    assert gate.may_run(chats_turn)


@pytest.mark.timeout(30)
def test_the_agents_code_is_stopped_by_its_time_limit_and_by_an_interrupt() -> None:
    """`while True: pass` (or a sleep) blocked the kernel's loop: neither the interrupt nor the
    turn's --timeout, both of which went through that loop, could stop it."""
    started = time.monotonic()
    spun = run_code("while True:\n    pass", {}, str, time_limit=0.3)
    assert spun.stopped == "timed out" and "CodeTimedOut" in (spun.error or "")
    slept = run_code("import time\ntime.sleep(60)", {}, str, time_limit=0.3)
    assert slept.stopped == "timed out"
    # A bare except swallowed the first stop: it is stopped again a second later.
    stubborn = (
        "while True:\n    try:\n        while True: pass\n    except BaseException:\n"
        "        break\nwhile True: pass"
    )
    assert run_code(stubborn, {}, str, time_limit=0.2).stopped == "timed out"
    assert time.monotonic() - started < 10
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    running = threading.Event()
    main = threading.main_thread().ident or 0

    def interrupt() -> None:
        running.wait(10)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    stopped = run_code("running.set()\nwhile True: pass", {"running": running}, str)
    assert stopped.stopped == "interrupted" and "KeyboardInterrupt" in (stopped.error or "")
    assert run_code("1 + 1", {}, str, time_limit=5).result == "2"
    own = run_code("raise KeyboardInterrupt('mine')", {}, str)  # the code's own: not a stop
    assert own.stopped is None and "KeyboardInterrupt: mine" in (own.error or "")


@pytest.mark.timeout(30)
def test_a_stop_as_the_code_ends_does_not_escape_into_the_kernel() -> None:
    """A SIGINT that lands after the code returned (in the machinery that puts stdout and the
    handler back) is not raised there: raised there, it left our handler and the captured
    stdout in place for good."""
    import sys

    stdout = sys.stdout
    main = threading.main_thread().ident or 0
    # The code returns at once; the signal lands in `call`'s own frame or after it.
    stopper = kernel_tools_run.Stopper(None)
    with stopper:
        stopper.call(lambda: None)
        signal.pthread_kill(main, signal.SIGINT)  # handled here, outside the code: not raised
    assert stopper.stopped is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert sys.stdout is stdout


@pytest.mark.timeout(60)
def test_a_wide_frame_is_inspected_without_describing_every_column() -> None:
    """`inspect_variable` of a DataFrame of 100,000 columns ran `describe()` over all of them
    (17 s for 20,000 columns, the kernel blocked while the agent waited) to show 30."""
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(np.ones((12, 100_000))).add_prefix("c")
    started = time.monotonic()
    out = kernel_tools.inspect_variable({"wide": frame}, "wide")
    took = time.monotonic() - started
    assert not out.error and "shape (12, 100000)" in out.text
    assert "describe() of the first 30 of 100,000 columns" in out.text and "mean" in out.text
    assert took < 15, f"{took:.1f} s to inspect a wide frame"


def test_a_big_dict_or_set_is_not_sorted_to_show_twenty_items() -> None:
    """reprlib sorts a whole dict or set to show its first 20: 5 s for 3,000,000 keys, each
    time the agent listed the kernel's variables or inspected one, the kernel blocked."""
    CountedKey.compared = 0

    keys = [CountedKey(n) for n in range(100_000)]
    mapping = dict.fromkeys(keys, 0)
    for value in (mapping, set(keys), frozenset(keys)):
        text = kernel_tools.bounded_repr(value, 200)
        assert "k0" in text and "..." in text
    assert CountedKey.compared == 0, f"{CountedKey.compared} comparisons to show 20 items"
    small = kernel_tools.bounded_repr({"b": 1, "a": 2})
    assert small == "{'a': 2, 'b': 1}"  # a small one is still sorted, as reprlib does


def test_bytes_written_to_stdout_fail_the_agents_code_not_the_tool() -> None:
    """`sys.stdout.write(b"x")` in the agent's code was accepted, then failed the tool outside
    the code (its card stayed "in progress" for good); a real text stream refuses it at once."""
    out = run_code("import sys\nprint('before')\nsys.stdout.write(b'x')", {}, str)
    assert out.stdout == "before\n"
    assert out.error is not None and "TypeError" in out.error and "bytes" in out.error


def test_the_agents_code_cannot_wait_for_input() -> None:
    """`input()` in the agent's code waited on the user (an input box in the cell, the kernel's
    loop blocked meanwhile) or, in a turn of the chat, on the kernel's own stdin (a terminal:
    for good); `getpass` on /dev/tty. Each is an error of that code now, at once."""
    import builtins
    import getpass
    import sys

    before = (builtins.input, getpass.getpass, sys.stdin)
    for code in ("input('name? ')", "import getpass\ngetpass.getpass()"):
        out = run_code(code, {}, str)
        assert out.error is not None and "cannot wait for input" in out.error, out.error
    out = run_code("import sys\nsys.stdin.read()", {}, str)
    assert out.error is None and out.result == "''"
    assert (builtins.input, getpass.getpass, sys.stdin) == before  # put back


@pytest.mark.timeout(30)
def test_a_read_tool_stuck_in_a_users_repr_is_stopped_too() -> None:
    """`inspect_variable` runs the value's own `__repr__` on the kernel's loop: one that hangs
    (a lazy object that calls the network, say) blocked the kernel as the agent's code did."""

    class Hangs:
        def __repr__(self) -> str:
            while True:
                pass

    ns = {"h": Hangs(), "n": 1}
    output, stopped = stoppable(lambda: kernel_tools.inspect_variable(ns, "h"), 0.3)
    assert output is None and stopped == "timed out"
    listed, stopped = stoppable(lambda: kernel_tools.list_variables(ns), 0.3)
    assert listed is None and stopped == "timed out"
    fine, stopped = stoppable(lambda: kernel_tools.inspect_variable(ns, "n"), 5)
    assert fine is not None and "value:\n1" in fine.text and stopped is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
