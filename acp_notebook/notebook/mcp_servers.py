"""The MCP servers of a session this kernel opens: its `mcpServers`, built in one place.

`session_servers` is the one function that makes the list sent in `session/new` (and in
`session/load` or `session/resume` of a stored session): the agent's `mcp = [...]` defaults, then
the cell's `--mcp NAME`s, from `c.AcpNotebook.mcp_servers` and `[mcp.NAME]` tables
(`client/mcp_config.py`). An http or sse server goes only to an agent that advertises it
(`mcpCapabilities.http` / `.sse` in `initialize`); otherwise `McpTransportError` names the server,
the agent and the transport. Other entries the kernel offers (its own tools) are appended here.

The servers' keys (secret-looking env and header values) are added to the kernel's redactor and
the client's, so no display, transcript or protocol log shows them; `status_lines` names
variables and headers, never their values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..client.mcp_config import McpServerSpec, bare_url, mcp_secrets
from ..config import AgentSpec
from ..display import views
from ..errors import ConfigError, McpTransportError
from .host import Host

if TYPE_CHECKING:
    from ..client.client import Client
    from ..client.session import Session
    from .options import CellOptions

MAX_SHOWN = 50  # servers listed by %agent status


def planned(host: Host, spec: AgentSpec, names: Sequence[str] = ()) -> list[McpServerSpec]:
    """The configured servers a session of `spec` gets with `--mcp names`, checked before the
    agent starts: an unknown or malformed one is a usage error naming it."""
    try:
        return host.registry().mcp_servers(spec, names)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


async def session_servers(
    host: Host, spec: AgentSpec, client: Client, opts: CellOptions | None = None
) -> list[dict[str, Any]]:
    """The `mcpServers` of a session of `spec` that this kernel opens on `client` (started:
    its capabilities are known). `opts`: the cell's options; None for a command such as
    `%agent resume`, which gets the agent's defaults."""
    servers = planned(host, spec, opts.mcp if opts is not None else ())
    check_transports(client, spec, servers)
    try:
        entries = [server.to_acp() for server in servers]
    except ConfigError as exc:  # a stdio command not on the PATH
        raise UsageError(str(exc)) from None
    from ..kernel_tools.server import (
        kernel_mcp_entry,
    )  # its server (the mcp SDK) loads on first use

    kernel = kernel_mcp_entry(host, opts)  # the kernel's own tools, unless turned off
    if kernel is not None:
        entries.append(kernel)
    secrets = mcp_secrets(entries)
    host.runtime.redactor.add(secrets)
    client.mask(secrets)
    return entries


def check_transports(client: Client, spec: AgentSpec, servers: Sequence[McpServerSpec]) -> None:
    """Raise `McpTransportError` for an http or sse server the agent did not advertise."""
    caps = client.agent_capabilities.get("mcpCapabilities")
    caps = caps if isinstance(caps, dict) else {}
    for server in servers:
        if server.transport != "stdio" and caps.get(server.transport) is not True:
            raise McpTransportError(
                f"MCP server {server.name!r} is an {server.transport} server, and agent "
                f"{spec.name!r} does not take {server.transport} MCP servers (its initialize "
                f"answer has no mcpCapabilities.{server.transport}); give it a stdio server "
                "instead"
            )


def check_reused(session: Session, name: str, servers: Sequence[McpServerSpec]) -> None:
    """A session is given its servers when it opens: a cell that asks for one the running
    session was opened without gets a usage error (not a turn without the tools it expects)."""
    given = {s.get("name") for s in session.mcp_servers if isinstance(s, dict)}
    missing = [s.name for s in servers if s.name not in given]
    if missing:
        raise UsageError(
            f"session {name!r} was opened without MCP server(s) {', '.join(missing)}; servers "
            "are given when a session opens: add --new to start this session anew with them, "
            "or use another --session name"
        )


def status_lines(session: Session) -> list[str]:
    """One line per server of the session, as `%agent status` lists them: name, transport,
    program or address, and the names of its env variables or headers (never their values)."""
    lines = []
    for server in session.mcp_servers[:MAX_SHOWN]:
        server = server if isinstance(server, dict) else {}
        lines.append(f"{views.text(server.get('name'), 80)} ({_where(server)})")
    extra = len(session.mcp_servers) - MAX_SHOWN
    return lines + ([f"… {extra} more"] if extra > 0 else [])


def _where(server: dict[str, Any]) -> str:
    kind = server.get("type", "stdio")
    if kind == "stdio":
        args = server.get("args")
        argv = [server.get("command"), *(args if isinstance(args, list) else [])]
        what = " ".join(views.text(a, 200) for a in argv)
        names = _names(server.get("env"))
        label = "env"
    else:
        url = server.get("url")
        what = bare_url(url) if isinstance(url, str) else "?"
        names = _names(server.get("headers"))
        label = "headers"
    extra = f"; {label}: {', '.join(names)}" if names else ""
    return views.text(f"{views.text(kind, 10)}: {what}{extra}", 400)


def _names(pairs: Any) -> list[str]:
    if not isinstance(pairs, list):
        return []
    return [views.text(p.get("name"), 60) for p in pairs[:20] if isinstance(p, dict)]
