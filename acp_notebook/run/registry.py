"""`acp-notebook agents`: the agents of the ACP registry, as a terminal shows them: each one's
id (what `--agent` takes), name, version and description, and how it runs here (the command,
or what to install). Everything of the registry is the network's: escaped (`shown`), cut."""

from __future__ import annotations

import shlex

from ..client import acp_registry
from ..config import Registry
from ..errors import ConfigError
from .console import Console, shown
from .printer import Line

#: How a registry agent runs here (`acp_registry.Runner.status`).
HERE = {"installed": "installed", "npx": "via npx", "uvx": "via uvx", "missing": "not installed"}


def main(console: Console, *, online: bool = True) -> int:
    """Print the listing; 1 when there is neither the registry nor a copy of it."""
    try:
        listing = acp_registry.load(online=online)
    except ConfigError as exc:
        console.write([Line(shown(f"acp-notebook agents: {exc}"), "bold")])
        return 1
    try:
        table = Registry.build().agents
    except ConfigError:
        table = {}  # a broken agents file is `run`'s to report; the listing goes on
    lines = [Line(shown(acp_registry.describe_source(listing)), "dim")]
    for agent in listing.agents:
        run = acp_registry.runner(agent)
        how = shlex.join(run.command) if run.command else f"install {run.hint}"
        mine = "  (the agent table has an entry of this name)" if agent.id in table else ""
        lines.append(
            Line(shown(f"{agent.id:<24} {HERE.get(run.status, run.status):<14} {how}"), "bold")
        )
        about = " ".join(f"{agent.name} {agent.version}: {agent.description}".split())
        lines.append(Line(shown(f"    {about[:300]}{mine}")))
    lines.append(Line("Run one with --agent ID (in a cell: %%agent --agent ID).", "dim"))
    console.write(lines)
    return 0
