"""What one kernel holds: a connection per agent, named sessions, and their clean-up.

Each agent's client lives in its own task on the kernel's event loop (`AgentHost`), because
`connect()` is a context manager and a cell only runs for a while: the host task enters it,
waits until asked to close, and so keeps the task group that runs the reader and the sessions'
turns alive between cells.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import weakref
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..client.client import Client, connect
from ..client.session import Session
from ..config import AgentSpec
from ..display.masking import REDACTOR, install_log_mask
from ..protocol.redact import secret_args, secret_values
from .cell_forks import Story
from .ledger import Ledger


class AgentHost:
    """One agent's client, alive until `close()`."""

    def __init__(self, spec: AgentSpec, options: dict[str, Any]) -> None:
        self.spec = spec
        self.options = options
        self.client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done() and self.client is not None

    async def start(self) -> Client:
        if self.running:
            assert self.client is not None
            return self.client
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        self._stop = asyncio.Event()
        self._task = loop.create_task(
            self._main(ready, self._stop), name=f"acp_notebook agent {self.spec.name}"
        )
        try:
            # Shielded: cancelling the caller (a cell's --timeout, an interrupt) must not cancel
            # `ready` behind the host task's back; the task is stopped below instead.
            return await asyncio.shield(ready)
        except BaseException:
            await self._abort()
            raise

    async def _abort(self) -> None:
        """Stop a start that was given up: the agent process must not outlive the cell."""
        task = self._task
        if task is None or task.done():
            return
        task.cancel()  # connect() stops the process on the way out
        with anyio.CancelScope(shield=True):
            await asyncio.wait({task}, timeout=10)

    async def _main(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        try:
            async with connect(
                list(self.spec.command), dict(self.spec.env), self.spec.cwd, **self.options
            ) as client:
                self.client = client
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done() and isinstance(exc, Exception):
                ready.set_exception(exc)
            elif not ready.done():
                ready.cancel()  # the start was given up (_abort): nobody awaits `ready`
            elif isinstance(exc, Exception):
                # The client died after it started: its turns already ended with the error;
                # the log keeps the cause (this task has no one awaiting it).
                log.error("acp_notebook: agent %r stopped: %r", self.spec.name, exc)
            elif not isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.client = None

    async def close(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._task), 30)
        self._task = None

    def pids(self) -> list[int]:
        pid = self.client.pid if self.client else None
        return [pid] if pid else []


@dataclass
class Prestarted:
    """An agent and its session started in the background (`notebook/prestart.py`): the task's
    result is None once the session is open, else what its failure says."""

    agent: str
    session: str
    task: asyncio.Task[str | None]

    @property
    def error(self) -> str | None:
        """The failure, once the start ended with one."""
        if not self.task.done() or self.task.cancelled():
            return None
        return self.task.result()


@dataclass
class NamedSession:
    name: str
    agent: str
    session: Session  # a cell run again on a fork of its point replaces it (`cell_forks`)
    #: The cells whose turns make its conversation, with their fork points (`cell_forks.py`).
    story: Story = field(default_factory=Story)


class Runtime:
    """The kernel's agents and sessions. One per IPython shell."""

    def __init__(self) -> None:
        self.hosts: dict[str, AgentHost] = {}
        self.sessions: dict[str, NamedSession] = {}
        self.last_session: str | None = None  # what %agent status/stop mean without --session
        self.prestart: Prestarted | None = None  # c.AcpNotebook.prestart, %agent start
        self._said: set[str] = set()  # notices shown once per kernel (first_time)
        # Everything this kernel shows or saves passes through it (see publish.py); it reads
        # os.environ anew at each use, so a key a cell sets later is masked too.
        self.redactor = REDACTOR
        self.ledger = Ledger()  # every %%agent turn of this kernel: %agent ledger, the budget
        install_log_mask()
        _RUNTIMES.add(self)

    async def client(self, spec: AgentSpec, options: dict[str, Any]) -> Client:
        host = self.hosts.get(spec.name)
        if host is not None and host.spec != spec:
            await self.close_agent(spec.name)
            host = None
        if host is None:
            host = self.hosts[spec.name] = AgentHost(spec, options)
            self.remember(spec)
        try:
            return await host.start()
        except BaseException:
            self.hosts.pop(spec.name, None)
            raise

    def first_time(self, notice: str) -> bool:
        """True the first time this kernel asks about `notice` (shown once, not in every cell)."""
        if notice in self._said:
            return False
        self._said.add(notice)
        return True

    def remember(self, spec: AgentSpec) -> None:
        """Mask what this agent is given as secrets: its `env` values and secret options."""
        self.redactor.add(secret_values(spec.env) | secret_args(spec.command))

    def changed_options(self, agent: str, options: dict[str, Any]) -> list[str]:
        """Options the running agent was started with that differ now (permission policy
        aside: it applies per turn)."""
        host = self.hosts.get(agent)
        if host is None or not host.running:
            return []
        keys = (set(host.options) | set(options)) - {"permission_policy"}
        return sorted(k for k in keys if host.options.get(k) != options.get(k))

    def find(self, name: str) -> NamedSession | None:
        entry = self.sessions.get(name)
        if entry is not None and (entry.session.closed or entry.session.client.closed):
            del self.sessions[name]
            return None
        return entry

    def add(
        self, name: str, agent: str, session: Session, story: Story | None = None
    ) -> NamedSession:
        entry = self.sessions[name] = NamedSession(name, agent, session, story or Story())
        self.last_session = name
        return entry

    async def close_session(self, name: str) -> bool:
        entry = self.sessions.pop(name, None)
        if entry is None:
            return False
        await entry.session.close()
        return True

    def other_sessions(self, agent: str, name: str) -> list[str]:
        """Names of the agent's sessions other than `name`."""
        return [n for n, e in self.sessions.items() if e.agent == agent and n != name]

    async def close_agent(self, agent: str) -> None:
        pre = self.prestart
        if pre is not None and pre.agent == agent and pre.task is not asyncio.current_task():
            await self.stop_prestart()
        for name in [n for n, e in self.sessions.items() if e.agent == agent]:
            self.sessions.pop(name, None)
        host = self.hosts.pop(agent, None)
        if host is not None:
            await host.close()

    async def restart_agent(self, agent: str) -> None:
        """Kill the agent process; sessions come back on a fresh process at their next prompt."""
        host = self.hosts.get(agent)
        client = host.client if host else None
        if client is not None:
            client.kill_agent()

    async def close_all(self) -> None:
        await self.stop_prestart()
        self.sessions.clear()
        for agent in list(self.hosts):
            await self.close_agent(agent)

    async def stop_prestart(self) -> None:
        """Cancel a background start still under way: its agent process is stopped."""
        pre, self.prestart = self.prestart, None
        if pre is not None and not pre.task.done():
            pre.task.cancel()  # AgentHost.start stops the process it started (_abort)
            with anyio.CancelScope(shield=True):
                await asyncio.wait({pre.task}, timeout=15)

    def kill_all_now(self) -> None:
        """Synchronous last resort at interpreter exit: SIGKILL every agent process group."""
        for host in self.hosts.values():
            for pid in host.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)


log = logging.getLogger("acp_notebook")

_RUNTIMES: weakref.WeakSet[Runtime] = weakref.WeakSet()


@atexit.register
def _kill_agents_at_exit() -> None:
    # A kernel shutting down or restarting exits the interpreter: no agent may outlive it.
    for runtime in list(_RUNTIMES):
        runtime.kill_all_now()
