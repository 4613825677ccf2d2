"""The kernel's interrupt while a `%%agent` cell waits on an agent that says nothing: the cell
ends at once (notebook/interrupts.py). ipykernel's handler queued the cancel without waking the
kernel's event loop, so with nothing else arriving it was lost (JupyterLab showed "starting
agent…" through two interrupts)."""

from __future__ import annotations

import asyncio
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.session import Session
from nbclient.exceptions import CellExecutionError

from acp_notebook.notebook import interrupts
from tests.kernel.test_magics import stop_button
from tests.nb_util import kernel_env, make_client, new_nb, process_gone, text
from tests.polling import until, wait_until


def _pids(marker: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


def _waiting_in(tid: int | None) -> str:
    """Where in the kernel (Linux) the thread sleeps: its wchan."""
    return Path(f"/proc/self/task/{tid}/wchan").read_text().strip()


def _wchan_readable() -> bool:
    asleep = threading.Event()
    thread = threading.Thread(target=asleep.wait, args=(10,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # "0" until the thread sleeps, where it is unsupported
            if _waiting_in(thread.native_id) not in ("", "0"):
                return True
            time.sleep(0.01)
        return False
    finally:
        asleep.set()


async def _subscribed(client) -> Any:
    """A second client on the kernel's iopub: it sees what the kernel sends in reply to a
    widget message (nbclient keeps only what answers its cells)."""
    # Its own session: one session is one ZMQ identity, and the kernel answers only one of two.
    ours = client.km.session
    watcher = client.km.client(
        session=Session(key=ours.key, signature_scheme=ours.signature_scheme)
    )
    watcher.start_channels()
    await watcher.wait_for_ready(timeout=30)  # its kernel_info answered on iopub too: subscribed
    return watcher


async def poll_iopub(watcher: Any, wanted: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = await watcher.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            continue
        if wanted(msg):
            return
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


async def _round_trip(client, watcher: Any, view: str) -> None:
    """The view's sync, answered: the kernel's loop ran after the agent started."""
    kc = client.kc
    msg = kc.session.msg(
        "comm_msg", {"comm_id": view, "data": {"method": "custom", "content": {"type": "sync"}}}
    )
    kc.shell_channel.send(msg)
    sent = msg["header"]["msg_id"]
    await poll_iopub(
        watcher,
        lambda m: m["msg_type"] == "comm_msg" and m["parent_header"].get("msg_id") == sent,
        "the view's answer to its sync",
    )


def test_an_interrupt_while_a_quiet_agent_starts_ends_the_cell(tmp_path: Path) -> None:
    marker = f"quiet-agent-{tmp_path.name}"
    got = tmp_path / "initialize-received"
    # An agent that reads the initialize request, notes it in a file and never says a byte: once
    # the kernel sent it, nothing from the agent wakes the kernel's loop.
    code = "import sys, time; sys.stdin.readline(); open(sys.argv[1], 'w').close(); time.sleep(300)"
    quiet = shlex.join([sys.executable, "-c", code, str(got), marker])
    nb = new_nb(
        '%config AcpNotebook.interactive = "yes"',
        f"%%agent --agent {shlex.quote(quiet)} --session quiet\nhello",
        "print('the kernel', 'is free')",
    )
    client = make_client(nb, tmp_path)

    async def interrupt_the_start(watcher: Any) -> tuple[list[int], float]:
        running = asyncio.create_task(client.async_execute_cell(nb.cells[1], 1))
        view, _ = await until(lambda: stop_button(client, starting=True), 30, "the view")
        pids = await until(lambda: _pids(marker) or None, 30, "the agent process")
        await until(lambda: got.exists() or None, 30, "the agent to receive initialize")
        # A round trip through the kernel's loop after it sent initialize: after the answer the
        # loop has nothing left to do and sleeps in select(), where the interrupt lands.
        await _round_trip(client, watcher, view)
        started = time.monotonic()
        await client.km.interrupt_kernel()
        # Lost, the interrupt waited for the loop's next wake-up: here the deadline of
        # initialize, a minute away (in JupyterLab, nothing after two interrupts and 50 s).
        done, _ = await asyncio.wait({running}, timeout=30)
        assert done, "the interrupt was lost: the cell still runs 30 s after it"
        took = time.monotonic() - started
        with pytest.raises(CellExecutionError) as info:
            running.result()
        assert info.value.ename == "TurnInterrupted"
        await client.async_execute_cell(nb.cells[2], 2)
        return pids, took

    async def main() -> tuple[list[int], float]:
        async with client.async_setup_kernel(env=kernel_env(tmp_path)):
            await client.async_execute_cell(nb.cells[0], 0)
            watcher = await _subscribed(client)
            try:
                return await interrupt_the_start(watcher)
            finally:
                watcher.stop_channels()

    pids, took = asyncio.run(main())
    print(f"[interrupt-idle] the cell ended {took:.2f} s after the interrupt")
    [error] = [o for o in nb.cells[1].outputs if o["output_type"] == "error"]
    shown = "\n".join(error["traceback"])  # one line, as the browser test asks
    assert len(shown.splitlines()) == 1, shown
    assert shown.endswith("the agent's start was cancelled by the kernel's interrupt"), shown
    assert "the kernel is free" in text(nb.cells[2])
    assert all(process_gone(p) for p in pids), "the agent outlived the interrupted start"


def test_the_wrapped_handler_wakes_the_loop_and_leaves_with_the_cell() -> None:
    """What ipykernel does, in small: a SIGINT handler that queues its work with a plain
    call_soon while the loop sleeps. Wrapped, the work runs long before the loop's only timer."""
    if not _wchan_readable():
        why = "this system does not say where a thread sleeps (/proc/.../wchan)"
        if os.environ.get("CI"):  # CI's Linux must: a skip there would hide the test
            pytest.fail(why)
        pytest.skip(why)
    handled: list[float] = []
    original = signal.getsignal(signal.SIGINT)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        woken = loop.create_future()

        def kernels_handler(signum: int, frame: object) -> None:  # ipykernel's, in small
            loop.call_soon(lambda: woken.done() or woken.set_result(time.monotonic()))

        signal.signal(signal.SIGINT, kernels_handler)
        interrupts.wake_on_interrupt()
        assert isinstance(signal.getsignal(signal.SIGINT), interrupts.Waker)
        kernel = threading.main_thread()  # the thread signal handlers run on

        def interrupt() -> None:  # once the loop sleeps in epoll_wait, as the kernel's does
            wait_until(lambda: _waiting_in(kernel.native_id) == "do_epoll_wait", 10, "the loop")
            signal.pthread_kill(kernel.ident or 0, signal.SIGINT)

        threading.Thread(target=interrupt, daemon=True).start()
        start = time.monotonic()
        # The loop's only timer is 20 s away: unwoken, the handler's work waited for it.
        await asyncio.wait({woken}, timeout=20)
        handled.append((woken.result() if woken.done() else time.monotonic()) - start)
        interrupts.stop_waking()
        assert signal.getsignal(signal.SIGINT) is kernels_handler
        # A cell that does not await runs under Python's handler, which raises where the cell
        # runs: left alone (wrapped, its traceback would show our frame).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        interrupts.wake_on_interrupt()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    try:
        asyncio.run(main())
    finally:
        signal.signal(signal.SIGINT, original)
    assert handled[0] < 10, f"the interrupt waited {handled[0]:.1f} s for the loop to wake"
