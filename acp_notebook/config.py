"""Agents as data: the built-in registry, user entries from traitlets config and a TOML file.

An entry is a command line plus optional environment and working directory. `--agent NAME` picks
an entry; `--agent "any command line"` runs that command as an ACP agent. Nothing here starts a
process.

MCP servers are data too (`client/mcp_config.py`): `[mcp.NAME]` tables of the same file and
`c.AcpNotebook.mcp_servers`; an agent's `mcp = ["NAME", ...]` names the ones each of its sessions
gets, `%%agent --mcp NAME` adds more.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .client.mcp_config import McpServerSpec, parse_mcp_entry
from .client.serving.regular_file import read_regular
from .errors import ConfigError

DEMO = "demo"
ENV_DEFAULT = "ACP_NOTEBOOK_AGENT"
ENV_AGENTS_FILE = "ACP_NOTEBOOK_AGENTS_FILE"
#: The largest agents file read: a few agent and MCP tables take kilobytes.
MAX_AGENTS_FILE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class AgentSpec:
    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    description: str = ""
    source: str = "built-in"
    #: MCP servers (by name) every session of this agent gets. Not compared: changing them
    #: needs no agent restart, they apply to the sessions opened next.
    mcp: tuple[str, ...] = field(default=(), compare=False)

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    @property
    def available(self) -> bool:
        """Whether the program can be found (not whether it speaks ACP)."""
        exe = self.command[0]
        return bool(shutil.which(exe)) or (os.path.isabs(exe) and os.access(exe, os.X_OK))


def builtin_agents() -> dict[str, AgentSpec]:
    """The well-known ACP agents; flags as their projects document them today."""
    entries = [
        AgentSpec(
            DEMO,
            (sys.executable, "-m", "acp_notebook.demo_agent"),
            description="embedded demo agent: no network, no key",
        ),
        AgentSpec("gemini", ("gemini", "--acp"), description="Gemini CLI"),
        AgentSpec(
            "claude",
            ("npx", "-y", "@agentclientprotocol/claude-agent-acp"),
            description="Claude Code through its ACP adapter",
        ),
        AgentSpec(
            "codex",
            ("npx", "-y", "@agentclientprotocol/codex-acp"),
            description="Codex through its ACP adapter",
        ),
        AgentSpec("opencode", ("opencode", "acp"), description="OpenCode"),
        AgentSpec("goose", ("goose", "acp"), description="goose"),
        AgentSpec("fast-agent", ("fast-agent-acp",), description="fast-agent"),
    ]
    return {a.name: a for a in entries}


def parse_entry(name: str, entry: Any, source: str) -> AgentSpec:
    """One user entry: `{command = "x" | ["x", ...], args = [...], env = {...}, cwd = "..."}`."""
    if isinstance(entry, str | list):
        entry = {"command": entry}
    if not isinstance(entry, Mapping):
        raise ConfigError(f"agent {name!r} in {source}: expected a table, got {entry!r}")
    unknown = set(entry) - {"command", "args", "env", "cwd", "description", "mcp"}
    if unknown:
        raise ConfigError(
            f"agent {name!r} in {source}: unknown field(s) "
            f"{', '.join(sorted(unknown))} (command, args, env, cwd, description, mcp)"
        )
    command = entry.get("command")
    if isinstance(command, str):
        argv = shlex.split(command)
    elif isinstance(command, list) and all(isinstance(c, str) for c in command):
        argv = list(command)
    else:
        raise ConfigError(
            f"agent {name!r} in {source}: command must be a string or a list of strings"
        )
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"agent {name!r} in {source}: args must be a list of strings")
    if not argv:
        raise ConfigError(f"agent {name!r} in {source}: command is empty")
    env = entry.get("env", {})
    if not isinstance(env, Mapping) or not all(isinstance(k, str) for k in env):
        raise ConfigError(f"agent {name!r} in {source}: env must be a table of strings")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigError(f"agent {name!r} in {source}: cwd must be a string")
    mcp = entry.get("mcp", [])
    if not isinstance(mcp, list) or not all(isinstance(m, str) for m in mcp):
        raise ConfigError(
            f"agent {name!r} in {source}: mcp must be a list of MCP server names, "
            'e.g. mcp = ["files"]'
        )
    return AgentSpec(
        name,
        tuple(argv + args),
        {k: str(v) for k, v in env.items()},
        os.path.expanduser(cwd) if cwd else None,
        str(entry.get("description", "")),
        source,
        tuple(dict.fromkeys(mcp)),
    )


def default_agents_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "acp_notebook" / "agents.toml"


def read_agents_file(path: Path) -> dict[str, Any]:
    """The TOML file as data (nothing if it does not exist).

    Read with `read_regular`: a FIFO named as the agents file blocked the extension's load for
    good, and /dev/zero filled the kernel's memory. Deep nesting (`a = [[[[...`) made tomllib
    raise RecursionError, a traceback instead of a ConfigError naming the file."""
    try:
        raw = read_regular(path, MAX_AGENTS_FILE_BYTES)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"cannot read {path}: its tables or arrays nest too deeply") from None


def load_agents_file(
    path: Path, data: dict[str, Any] | None = None
) -> tuple[dict[str, AgentSpec], str | None]:
    """`[agents.NAME]` tables, and an optional top-level `default = "NAME"`."""
    if data is None:
        data = read_agents_file(path)
    agents = data.get("agents", {})
    if not isinstance(agents, dict):
        raise ConfigError(f"{path}: [agents] must be a table of agent tables")
    default = data.get("default")
    return (
        {n: parse_entry(n, e, str(path)) for n, e in agents.items()},
        default if isinstance(default, str) else None,
    )


def load_mcp_table(path: Path, data: dict[str, Any]) -> dict[str, McpServerSpec]:
    """`[mcp.NAME]` tables of the agents file."""
    table = data.get("mcp", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [mcp] must be a table of MCP server tables")
    return {n: parse_mcp_entry(n, e, str(path)) for n, e in table.items()}


@dataclass
class Registry:
    agents: dict[str, AgentSpec]
    default: str | None = None
    #: MCP servers one can name with `--mcp NAME` or an agent's `mcp = [...]`.
    mcp: dict[str, McpServerSpec] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        config_agents: Mapping[str, Any] | None = None,
        config_default: str | None = None,
        agents_file: str | None = None,
        config_mcp: Mapping[str, Any] | None = None,
    ) -> Registry:
        """Built-ins, then the TOML file, then traitlets config: later entries win by name."""
        agents = builtin_agents()
        path = Path(agents_file or os.environ.get(ENV_AGENTS_FILE) or default_agents_file())
        data = read_agents_file(path)
        file_agents, file_default = load_agents_file(path, data)
        agents.update(file_agents)
        for name, entry in (config_agents or {}).items():
            agents[name] = parse_entry(name, entry, "config (AcpNotebook.agents)")
        mcp = load_mcp_table(path, data)
        for name, entry in (config_mcp or {}).items():
            mcp[name] = parse_mcp_entry(name, entry, "config (AcpNotebook.mcp_servers)")
        default = os.environ.get(ENV_DEFAULT) or config_default or file_default
        return cls(agents, default or None, mcp)

    def mcp_servers(self, agent: AgentSpec, names: Sequence[str] = ()) -> list[McpServerSpec]:
        """The MCP servers a session of `agent` gets: its `mcp` defaults, then `names` (each
        once); an unknown name is a `ConfigError` naming it, where it came from, and the known."""
        out: dict[str, McpServerSpec] = {}
        asked = [(n, f"agent {agent.name!r} ({agent.source}, mcp = [...])") for n in agent.mcp]
        asked += [(n, f"--mcp {n}") for n in names]
        for name, where in asked:
            if name in out:
                continue
            if name not in self.mcp:
                known = ", ".join(sorted(self.mcp)) or "none"
                raise ConfigError(
                    f"unknown MCP server {name!r} (from {where}). Configured: {known}; add it "
                    f"as c.AcpNotebook.mcp_servers[{name!r}] or an [mcp.{name}] table in the "
                    "agents file"
                )
            out[name] = self.mcp[name]
        return list(out.values())

    def resolve(self, name_or_command: str | None) -> tuple[AgentSpec, str]:
        """The spec for `--agent` (or the default), and a note for the user when one is due."""
        note = ""
        if not name_or_command:
            if self.default:
                name_or_command = self.default
            else:
                return self.agents[DEMO], (
                    "No agent is configured, so this runs the embedded demo agent. Choose one "
                    f"with --agent NAME, the {ENV_DEFAULT} environment variable, or "
                    "c.AcpNotebook.default_agent."
                )
        if name_or_command in self.agents:
            return self.agents[name_or_command], note
        listed = registry_agent(name_or_command)
        if listed is not None:
            return listed, note
        argv = shlex.split(name_or_command)
        if len(argv) == 1 and not (shutil.which(argv[0]) or os.path.sep in argv[0]):
            raise ConfigError(
                f"unknown agent {name_or_command!r}. Known agents: "
                f"{', '.join(sorted(self.agents))}; or an agent of the ACP registry (%agent "
                'registry lists them), or a full command line, e.g. --agent "my-agent --acp"'
            )
        return AgentSpec(name_or_command, tuple(argv), source="command line"), note


def registry_agent(agent_id: str) -> AgentSpec | None:
    """`--agent <id>` of an agent of the ACP registry (its cached copy: `client/acp_registry.py`),
    as it runs here; None if the copy lists no such agent. One it lists that cannot run here is
    a `ConfigError` saying what to install."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,99}", agent_id):
        return None
    # Here, not at the top: the registry's models need pydantic, which loading the extension
    # must not import (tests/kernel/test_light_load.py).
    from .client import acp_registry

    found = acp_registry.cached_agent(agent_id)
    if found is None:
        return None
    agent, run = found
    if not run.command:
        raise ConfigError(
            f"{agent_id!r} is an agent of the ACP registry ({agent.name}), not installed here: "
            f"install {run.hint}"
        )
    return AgentSpec(
        agent_id,
        run.command,
        run.env,
        description=f"{agent.name} {agent.version} (ACP registry)",
        source="ACP registry",
    )
