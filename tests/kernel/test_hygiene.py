"""Resource hygiene: cycles of prompt and cancel leak nothing; kernels leave no agent behind.

Counted in this process: open file descriptors (/proc/self/fd), asyncio tasks, threads, and child
processes (any process whose parent is us, zombies included, from /proc/*/stat). Each count is
taken after a warm-up and compared with a small constant slack after many more cycles, so a leak
of one item per cycle cannot hide in the slack.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from jupyter_client.manager import KernelManager

from acp_notebook.client.session import Session
from acp_notebook.protocol.mutations import Mutation, PartUpdated, TurnFinished
from acp_notebook.protocol.state import MessagePart
from tests.agents.script import script
from tests.client_helpers import Agent, alive
from tests.nb_util import kernel_env, process_gone
from tests.polling import wait_until

SLACK = 3


def children() -> list[int]:
    """Pids of this process's children, zombies included."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            found.append(int(entry.name))
    return found


def counts() -> dict[str, int]:
    try:
        tasks = len(asyncio.all_tasks())
    except RuntimeError:  # no running loop
        tasks = 0
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "tasks": tasks,
        "threads": threading.active_count(),
        "children": len(children()),
    }


def assert_no_growth(before: dict[str, int], after: dict[str, int], cycles: int) -> None:
    grew = {k: after[k] - before[k] for k in before}
    assert grew["children"] <= 0, (before, after)
    for key in ("fds", "tasks", "threads"):
        assert grew[key] <= SLACK, (
            f"{key} grew by {grew[key]} over {cycles} cycles: {before} -> {after}"
        )


class Started:
    """Wait until a given turn has shown something: the agent is inside its script."""

    def __init__(self, session: Session) -> None:
        self.turn_id: str | None = None
        self.event = anyio.Event()
        self.finished = 0
        session.subscribe(self._on)

    def _on(self, mutation: Mutation) -> None:
        # The agent's own words: not the warning a session reopen adds before the prompt.
        if (
            isinstance(mutation, PartUpdated)
            and mutation.turn_id == self.turn_id
            and isinstance(mutation.part, MessagePart)
        ):
            self.event.set()
        if isinstance(mutation, TurnFinished):
            self.finished += 1

    async def wait(self, turn_id: str) -> None:
        self.turn_id = turn_id
        with anyio.fail_after(10):
            await self.event.wait()
        self.event = anyio.Event()


async def prompt_and_cancel(
    session: Session, started: Started, steps: list[dict[str, Any]], reason: str = "cancelled"
) -> None:
    turn = await session.prompt(script(*steps))
    await started.wait(turn.id)
    result = await session.stop()
    assert result is not None and result is turn.result
    assert result.stop_reason == reason, result


@pytest.mark.anyio
async def test_200_prompt_and_cancel_cycles_leak_nothing(agent: Agent) -> None:
    warmup, cycles = 10, 200
    steps = [{"say": "working"}, {"wait_cancel": True}]
    with anyio.fail_after(100):
        async with agent.client() as client:
            session = await client.new_session()
            started = Started(session)
            for _ in range(warmup):
                await prompt_and_cancel(session, started, steps)
            before = counts()
            for _ in range(cycles):
                await prompt_and_cancel(session, started, steps)
            after = counts()
            assert client.processes_started == 1  # the agent honoured every cancel
            assert started.finished == warmup + cycles
            assert len(session.history) == warmup + cycles
            pid = client.pid
    assert_no_growth(before, after, cycles)
    assert pid is not None and not alive(pid)
    assert len(agent.sent("session/cancel")) == warmup + cycles


@pytest.mark.anyio
async def test_cycles_that_kill_and_restart_the_agent_leak_nothing(agent: Agent) -> None:
    # The agent ignores every cancel, so each stop() kills it after the grace period and the
    # next prompt starts a fresh process: pipes, reader tasks and watchers must all go.
    warmup, cycles = 3, 25
    steps = [{"ignore_cancel": True}, {"say": "deaf"}, {"wait_cancel": True}]
    with anyio.fail_after(100):
        async with agent.client(cancel_grace=0.05) as client:
            session = await client.new_session()
            started = Started(session)
            for _ in range(warmup):
                await prompt_and_cancel(session, started, steps)
            before = counts()
            for _ in range(cycles):
                await prompt_and_cancel(session, started, steps)
            after = counts()
            assert client.processes_started == warmup + cycles
    assert_no_growth(before, after, cycles)


def test_the_counters_can_see_a_leak(tmp_path: Path) -> None:
    before = counts()
    leaked = [open(tmp_path / f"f{i}", "w") for i in range(SLACK + 1)]
    try:
        with pytest.raises(AssertionError, match="fds grew"):
            assert_no_growth(before, counts(), 1)
    finally:
        for f in leaked:
            f.close()


# -- kernels ---------------------------------------------------------------------------------------


class Kernel:
    """A python3 kernel through jupyter_client, as JupyterLab runs one (no nbclient)."""

    def __init__(self, tmp_path: Path) -> None:
        self.km = KernelManager(kernel_name="python3")
        self.env = kernel_env(tmp_path)
        self.cwd = str(tmp_path)
        self.kc: Any = None

    def start(self) -> None:
        self.km.start_kernel(env=self.env, cwd=self.cwd)
        self.connect()

    def connect(self) -> None:
        if self.kc is not None:
            self.kc.stop_channels()
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code: str) -> str:
        out: queue.Queue[str] = queue.Queue()

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.put(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.put("ERROR " + msg["content"]["ename"] + ": " + msg["content"]["evalue"])

        reply = self.kc.execute_interactive(code, timeout=60, output_hook=hook)
        text = "".join(out.queue)
        assert reply["content"]["status"] == "ok", text
        return text

    def agent_pid(self) -> int:
        self.run("%%agent\nhello")
        pid = int(
            self.run(
                "from acp_notebook.magics import instance\n"
                "print(instance(get_ipython()).runtime.hosts['demo'].client.pid)"
            )
        )
        assert alive(pid)
        return pid

    def stop(self) -> None:
        if self.kc is not None:
            self.kc.stop_channels()
        if self.km.has_kernel:
            self.km.shutdown_kernel(now=True)


@pytest.mark.parametrize("how", ["shutdown", "restart", "kill"])
def test_kernel_shutdown_restart_or_kill_leaves_no_agent(tmp_path: Path, how: str) -> None:
    kernel = Kernel(tmp_path)
    kernel.start()
    try:
        pid = kernel.agent_pid()
        if how == "shutdown":  # JupyterLab's "Shut Down Kernel": a shutdown_request
            kernel.km.shutdown_kernel(now=False)
        elif how == "restart":  # "Restart Kernel"; then the new kernel runs an agent too
            kernel.km.restart_kernel(now=False)
            kernel.connect()
        else:  # the kernel process SIGKILLed: no atexit, the agent sees its stdin close
            kernel.km.shutdown_kernel(now=True)
        wait_until(lambda: process_gone(pid), 15, f"agent pid {pid} to exit after {how}")
        if how == "restart":
            second = kernel.agent_pid()
            assert second != pid
            kernel.km.shutdown_kernel(now=False)
            wait_until(lambda: process_gone(second), 15, f"agent pid {second} to exit")
    finally:
        kernel.stop()
