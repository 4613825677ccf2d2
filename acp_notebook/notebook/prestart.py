"""The default agent and its session started in the background (`c.AcpNotebook.prestart` when the
extension loads, `%agent start`), so the first `%%agent` cell does not wait for them.

The start opens the session a cell would open (`start.open_session`, the same name, options,
stored session and MCP servers) and puts it among the kernel's named sessions, so a cell uses it
as it uses any open session. It never raises in the kernel: its failure is kept and said by the
first cell that would have used the session (`start.prestarted`), or by `%agent status`.
A cell of the same agent waits for a start under way (within its --timeout; its Stop and the
kernel's interrupt cancel it, which stops the agent); a cell of another agent does not wait.
Unloading the extension or closing every agent cancels it (`Runtime.stop_prestart`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..config import AgentSpec
from . import mcp_servers
from .host import Host
from .runtime import Prestarted
from .start import agent_text, open_session, start_error_message
from .stored_sessions import Memory

if TYPE_CHECKING:
    from ..client.client import Client

log = logging.getLogger("acp_notebook")


def begin(host: Host, spec: AgentSpec) -> Prestarted:
    """Start `spec` and its default session in a task on the kernel's loop; returns at once (a
    start already under way for the same agent is kept). At the extension's load the loop does
    not run yet: the task starts with it."""
    runtime = host.runtime
    current = runtime.prestart
    if current is not None and current.agent == spec.name and not current.task.done():
        return current
    runtime.remember(spec)
    options = host.client_options()  # read now, as a cell would: they must match its own
    memory = Memory.of(host.remember_sessions, host.user_ns)
    loop = asyncio.get_event_loop()
    task = loop.create_task(
        _open(host, spec, options, memory), name=f"acp_notebook prestart {spec.name}"
    )
    runtime.prestart = Prestarted(spec.name, spec.name, task)
    return runtime.prestart


async def _open(
    host: Host, spec: AgentSpec, options: dict[str, Any], memory: Memory | None
) -> str | None:
    async def servers(client: Client) -> list[dict[str, Any]]:
        return await mcp_servers.session_servers(host, spec, client)

    try:
        await open_session(host.runtime, spec, spec.name, False, options, memory, servers)
    except Exception as exc:  # kept for the first cell: nothing may raise in the kernel's loop
        log.info("acp_notebook: the background start of %r failed: %r", spec.name, exc)
        return agent_text(host, start_error_message(exc, spec))
    return None
