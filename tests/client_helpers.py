"""Helpers for the client-core tests (tests/client/test_client_*.py).

Tests drive the scripted agent (tests/agents/scripted/) through the real client, as a process
or, in modules marked `pytest.mark.scripted_agent("in_process")`, on a thread of the test's own
process behind the client's in-process transport (see tests/conftest.py's `agent` fixture).
They synchronise on events (subscribed mutations, turn results, the agent's --record file), never
on sleeps; each test is bounded by pytest-timeout and by `anyio.fail_after` inside.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from acp_notebook.client.client import Client, connect
from acp_notebook.client.session import Session
from acp_notebook.protocol.mutations import Mutation, PartUpdated
from acp_notebook.protocol.state import ToolCallPart
from acp_notebook.protocol.turn import TurnResult
from tests.agents.script import agent_command, in_process, script


class Agent:
    """Where one test's scripted agent records what the client sent, and its working directory.

    `in_process`: `client()` runs the agent in this process (no spawn); else as a subprocess.
    """

    def __init__(self, tmp_path: Path, in_process: bool = False) -> None:
        self.in_process = in_process
        self.tmp = tmp_path
        self.cwd = tmp_path / "work"
        self.cwd.mkdir(exist_ok=True)
        self.record = tmp_path / "record.jsonl"

    def command(self, *flags: str) -> list[str]:
        return agent_command("--record", str(self.record), *flags)

    @asynccontextmanager
    async def client(
        self, *flags: str, env: dict[str, str | None] | None = None, **options: Any
    ) -> AsyncIterator[Client]:
        options.setdefault("retry_backoff", 0.01)
        if self.in_process:
            options.setdefault("transport", in_process())
        async with connect(self.command(*flags), env=env, cwd=self.cwd, **options) as client:
            yield client

    @asynccontextmanager
    async def session(
        self, *flags: str, bound: float = 20, **options: Any
    ) -> AsyncIterator[Session]:
        """A new session on a client of its own (`client(*flags, **options)`), closed after; the
        whole `async with` block bounded to `bound` seconds (TimeoutError past it)."""
        with anyio.fail_after(bound):
            async with self.client(*flags, **options) as client:
                yield await client.new_session()

    def messages(self) -> list[dict[str, Any]]:
        """Everything the client sent so far, in order (the agent writes it before handling)."""
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def sent(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages() if m.get("method") == method]

    def responses(self) -> list[dict[str, Any]]:
        """The client's answers to the agent's own requests."""
        return [m for m in self.messages() if "method" not in m and "id" in m]


class Watcher:
    """Collects a session's mutations; `wait_for(pred)` returns the first that matches."""

    def __init__(self, session: Session) -> None:
        self.items: list[Mutation] = []
        self._event = anyio.Event()
        self.unsubscribe = session.subscribe(self._on)

    def _on(self, mutation: Mutation) -> None:
        self.items.append(mutation)
        self._event.set()

    async def wait_for(self, pred: Callable[[Mutation], bool], timeout: float = 15) -> Mutation:
        with anyio.fail_after(timeout):
            seen = 0
            while True:
                for item in self.items[seen:]:
                    if pred(item):
                        return item
                seen = len(self.items)
                self._event = anyio.Event()
                await self._event.wait()

    async def tool_call(self, tool_call_id: str, status: str | None = None) -> ToolCallPart:
        def match(m: Mutation) -> bool:
            return (
                isinstance(m, PartUpdated)
                and isinstance(m.part, ToolCallPart)
                and m.part.tool_call_id == tool_call_id
                and (status is None or m.part.status == status)
            )

        found = await self.wait_for(match)
        assert isinstance(found, PartUpdated) and isinstance(found.part, ToolCallPart)
        return found.part

    def of(self, kind: type) -> list[Any]:
        return [m for m in self.items if isinstance(m, kind)]


def reports(text: str, prefix: str) -> list[Any]:
    """The JSON values the scripted agent reported as `PREFIX <json>`, in order."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    pos = text.find(prefix)
    while pos != -1:
        value, end = decoder.raw_decode(text, pos + len(prefix))
        out.append(value)
        pos = text.find(prefix, end)
    return out


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (no psutil here: read /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def gone(pid: int, timeout: float = 5) -> bool:
    """Wait (on a pidfd, no polling) until a process that is not our child has exited.

    A SIGKILL is delivered asynchronously: right after killpg() the target may still run.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        with anyio.move_on_after(timeout):
            await anyio.wait_readable(fd)
            return True
        return not alive(pid)
    finally:
        os.close(fd)


def tool_call(call_id: str, title: str = "A tool", **fields: Any) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": title, **fields}


def tool_update(call_id: str, **fields: Any) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call_update", "toolCallId": call_id, **fields}


async def run_script(session: Session, *steps: dict[str, Any]) -> TurnResult:
    """A turn of the scripted agent doing `steps`, to its end."""
    return await (await session.prompt(script(*steps))).finished
