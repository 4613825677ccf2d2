"""The kernel's status while a cell awaits and widget messages come (notebook/kernel_status.py),
seen by a plain jupyter_client: each comm message gets its own busy and idle, and after each of
those idles (and a control request's) the kernel says busy again for the running cell, until
the cell's own idle.

ipykernel 7.4 handles those messages beside the awaiting cell without any status: JupyterLab's
futures of them never ended, and ipywidgets' front-end held back a model's later changes."""

from __future__ import annotations

import itertools
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from tests.nb_util import kernel_env

SETUP = """
import asyncio
done = asyncio.Event()
heard = []
def _target(comm, opened):
    @comm.on_msg
    def _(msg):
        heard.append(msg['content']['data'])
        if msg['content']['data'].get('done'):
            done.set()
get_ipython().kernel.comm_manager.register_target('status_test', _target)
"""
AWAIT = "print('awaiting', flush=True)\nawait done.wait()\nlen(heard)"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Any]:
    km, kc = start_new_kernel(kernel_name="python3", env=kernel_env(tmp_path))
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _next(kc: Any, deadline: float) -> dict[str, Any]:
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("timed out waiting for the kernel's iopub")
        try:
            return dict(kc.get_iopub_msg(timeout=min(left, 1)))
        except queue.Empty:
            continue


def _send(kc: Any, msg_type: str, content: dict[str, Any]) -> str:
    msg = kc.session.msg(msg_type, content)
    kc.shell_channel.send(msg)
    return str(msg["header"]["msg_id"])


def test_comm_messages_get_their_idle_and_the_cell_stays_busy(client: Any) -> None:
    kc = client
    reply = kc.execute_interactive(SETUP, timeout=60)
    assert reply["content"]["status"] == "ok"
    run = kc.execute(AWAIT)
    deadline = time.monotonic() + 60
    statuses: list[tuple[str, str | None]] = []  # (state, parent msg id), in order
    while True:  # the cell awaits once it printed: the comm messages are handled beside it
        msg = _next(kc, deadline)
        if msg["parent_header"].get("msg_id") != run:
            continue
        if msg["msg_type"] == "status":
            statuses.append((msg["content"]["execution_state"], run))
        if msg["msg_type"] == "stream" and "awaiting" in msg["content"]["text"]:
            break
    # A control request (as the page's subshell requests): ipykernel's pair, then busy again.
    info = kc.session.msg("kernel_info_request", {})
    kc.control_channel.send(info)
    sent = [str(info["header"]["msg_id"])]
    while len(statuses) < 2 or statuses[-2] != ("idle", sent[0]):
        msg = _next(kc, deadline)
        if msg["msg_type"] == "status":
            statuses.append((msg["content"]["execution_state"], msg["parent_header"].get("msg_id")))
    assert statuses[-1] == ("busy", run), statuses
    comm = "c0ffee"
    sent.append(_send(kc, "comm_open", {"comm_id": comm, "target_name": "status_test", "data": {}}))
    sent += [_send(kc, "comm_msg", {"comm_id": comm, "data": {"n": i}}) for i in range(3)]
    sent.append(_send(kc, "comm_msg", {"comm_id": comm, "data": {"done": True}}))
    result = ""
    while True:
        msg = _next(kc, deadline)
        if msg["msg_type"] == "execute_result" and msg["parent_header"].get("msg_id") == run:
            result = msg["content"]["data"]["text/plain"]
        if msg["msg_type"] == "status":
            statuses.append((msg["content"]["execution_state"], msg["parent_header"].get("msg_id")))
            if statuses[-1] == ("idle", run):
                break
    assert kc.get_shell_msg(timeout=30)["content"]["status"] == "ok"

    # Every comm message: its busy, then its idle, once each.
    for msg_id in sent:
        own = [state for state, parent in statuses if parent == msg_id]
        assert own == ["busy", "idle"], (msg_id, statuses)
    # The cell: busy first, idle once, last; after every other request's idle, busy again, so
    # the last status heard says busy until the cell's idle.
    assert statuses[0] == ("busy", run) and statuses.count(("idle", run)) == 1
    assert statuses[-1] == ("idle", run) and statuses[-2] == ("busy", run), statuses
    for (state, parent), after in itertools.pairwise(statuses):
        if state == "idle" and parent != run:  # (the control thread's and the comms' interleave)
            assert after[0] == "busy", statuses
    assert result == "4"  # the comm's handler heard every message (the open has no data)


def test_comm_messages_while_no_cell_runs_keep_ipykernels_statuses(client: Any) -> None:
    """No cell runs: ipykernel wraps the message in its own pair, and nothing is added."""
    kc = client
    assert kc.execute_interactive(SETUP, timeout=60)["content"]["status"] == "ok"
    comm = "beef"
    opened = _send(kc, "comm_open", {"comm_id": comm, "target_name": "status_test", "data": {}})
    sent = _send(kc, "comm_msg", {"comm_id": comm, "data": {"n": 1}})
    deadline = time.monotonic() + 60
    statuses: list[tuple[str, str | None]] = []
    while ("idle", sent) not in statuses:
        msg = _next(kc, deadline)
        if msg["msg_type"] == "status":
            statuses.append((msg["content"]["execution_state"], msg["parent_header"].get("msg_id")))
    assert statuses == [("busy", opened), ("idle", opened), ("busy", sent), ("idle", sent)]
