"""MCP servers as data: one entry of `c.AcpNotebook.mcp_servers` or `[mcp.NAME]`, checked, and
its ACP `McpServer` form for `session/new`.

```toml
[mcp.files]                       # stdio: the agent starts it
command = "npx"                   # a string (split as a shell would) or a list
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env = { LOG_LEVEL = "info" }

[mcp.tracker]                     # http (or type = "sse"): the agent connects to it
type = "http"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ..." }
```

Nothing here starts a process or opens a connection. A stdio command is resolved on the PATH
when the session opens (ACP wants an absolute path). Values of secret-looking env variables and
headers (`secrets()`) are masked wherever the kernel shows or logs text; `describe()` names the
env variables and headers, never their values.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..protocol.redact import maskable, secret_args, secret_values

TRANSPORTS = ("stdio", "http", "sse")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_FIELDS = {
    "stdio": {"type", "command", "args", "env", "description"},
    "http": {"type", "url", "headers", "description"},
    "sse": {"type", "url", "headers", "description"},
}


@dataclass(frozen=True)
class McpServerSpec:
    """One configured MCP server. `transport` is stdio (`command`, `env`) or http/sse (`url`,
    `headers`); `source` says where it was configured, for error messages."""

    name: str
    transport: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    source: str = "config"

    def secrets(self) -> set[str]:
        """What must never be shown: secret-looking env and header values, secret options."""
        args = secret_args(self.command) if self.command else set()  # (it wants one argument)
        return secret_values(self.env) | header_secrets(self.headers) | args

    def describe(self) -> str:
        """One line for `%agent status`: transport, program or address, the names (not the
        values) of its env variables or headers. A URL loses its query and user info."""
        if self.transport == "stdio":
            what = shlex.join(self.command)
            names = sorted(self.env)
            label = "env"
        else:
            what = bare_url(self.url)
            names = sorted(self.headers)
            label = "headers"
        extra = f" ({label}: {', '.join(names)})" if names else ""
        return f"{self.transport}: {what}{extra}"

    def to_acp(self) -> dict[str, Any]:
        """The `McpServer` object of `session/new` (stdio: no `type`, an absolute command)."""
        if self.transport == "stdio":
            return {
                "name": self.name,
                "command": resolve_command(self),
                "args": list(self.command[1:]),
                "env": [{"name": k, "value": v} for k, v in self.env.items()],
            }
        return {
            "type": self.transport,
            "name": self.name,
            "url": self.url,
            "headers": [{"name": k, "value": v} for k, v in self.headers.items()],
        }


def resolve_command(server: McpServerSpec) -> str:
    """The stdio program as an absolute path (the agent may run it from anywhere)."""
    program = server.command[0]
    found = shutil.which(program)
    if found is None and os.sep in program and os.access(program, os.X_OK):
        found = program
    if found is None:
        raise ConfigError(
            f"MCP server {server.name!r} ({server.source}): command {program!r} is not found "
            "on the PATH"
        )
    return os.path.abspath(found)


def mcp_secrets(servers: Iterable[Any]) -> set[str]:
    """The secrets in ACP `McpServer` objects (`session/new`'s `mcpServers`, whoever built
    them): values of secret-looking env variables and headers, secret options in args."""
    found: set[str] = set()
    for server in servers:
        if not isinstance(server, Mapping):
            continue
        for key, read in (("env", secret_values), ("headers", header_secrets)):
            pairs = server.get(key)
            if isinstance(pairs, list):
                found |= read(
                    {
                        str(p.get("name")): p.get("value")
                        for p in pairs
                        if isinstance(p, Mapping) and isinstance(p.get("value"), str)
                    }
                )
        args = server.get("args")
        if isinstance(args, list) and args and all(isinstance(a, str) for a in args):
            found |= secret_args(args)
    return found


_AUTH_HEADERS = {"authorization", "proxy-authorization"}


def header_secrets(headers: Mapping[str, str | None]) -> set[str]:
    """Values of secret-looking headers; `Authorization` (which the environment's rule, made
    to spare AUTHOR, does not catch) always. "Bearer KEY" is masked whole and as KEY alone."""
    found = set()
    for name, value in headers.items():
        if value and (name.lower() in _AUTH_HEADERS or secret_values({name: value})):
            found.add(value)
            found.add(value.split(" ", 1)[-1].strip())
    return {v for v in found if maskable(v)}


def bare_url(url: str) -> str:
    """An address without its query, fragment or user info (where keys hide)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urllib.parse.urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def parse_mcp_entry(name: Any, entry: Any, source: str) -> McpServerSpec:
    """One entry; a `ConfigError` naming the server and `source` says what is wrong."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"MCP server name {name!r} in {source}: use letters, digits, '_', '.' or '-' "
            "(at most 64 characters)"
        )
    where = f"MCP server {name!r} in {source}"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a table, got {type(entry).__name__}")
    kind = entry.get("type", "http" if "url" in entry else "stdio")
    if kind not in TRANSPORTS:
        raise ConfigError(f"{where}: type must be one of {', '.join(TRANSPORTS)}, not {kind!r}")
    unknown = set(entry) - _FIELDS[kind]
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) for a {kind} server: {', '.join(sorted(map(str, unknown)))}"
            f" (it takes {', '.join(sorted(_FIELDS[kind] - {'type'}))})"
        )
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{where}: description must be a string")
    if kind == "stdio":
        command, env = _stdio(entry, where)
        return McpServerSpec(name, kind, command, env, description=description, source=source)
    url = entry.get("url")
    scheme = urllib.parse.urlsplit(url).scheme if isinstance(url, str) else ""
    if not isinstance(url, str) or scheme not in ("http", "https") or len(url) > 8192:
        raise ConfigError(f"{where}: url must be an http:// or https:// address")
    headers = _strings(entry.get("headers", {}), where, "headers")
    return McpServerSpec(
        name, kind, url=url, headers=headers, description=description, source=source
    )


def _stdio(entry: Mapping[str, Any], where: str) -> tuple[tuple[str, ...], dict[str, str]]:
    command = entry.get("command")
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ConfigError(f"{where}: cannot split command: {exc}") from None
    elif isinstance(command, list) and all(isinstance(c, str) for c in command):
        argv = list(command)
    else:
        raise ConfigError(
            f"{where}: a stdio server needs command, a string or a list of strings "
            "(or give url for an http server)"
        )
    if not argv or not argv[0]:
        raise ConfigError(f"{where}: command is empty")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where}: args must be a list of strings")
    return tuple(argv + args), _strings(entry.get("env", {}), where, "env")


def _strings(table: Any, where: str, what: str) -> dict[str, str]:
    if not isinstance(table, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in table.items()
    ):
        raise ConfigError(f'{where}: {what} must be a table of strings (NAME = "value")')
    return dict(table)
