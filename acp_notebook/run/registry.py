"""`acp-notebook agents`: the agents of the ACP registry, as a terminal shows them: each one's
id (what `--agent` takes), name, version and description, and how it runs here (the command,
or what to install). Everything of the registry is the network's: escaped (`shown`), cut."""

from __future__ import annotations

from ..client import acp_registry
from ..config import Registry
from ..errors import ConfigError
from .console import Console, shown
from .printer import Line


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
    for agent in acp_registry.listed(listing, table):
        lines.append(Line(shown(f"{agent.id:<24} {agent.here:<14} {agent.runs_as()}"), "bold"))
        about = " ".join(f"{agent.name} {agent.version}: {agent.description}".split())
        lines.append(Line(shown(f"    {about}  {agent.table_note()}".rstrip())))
    lines.append(Line("Run one with --agent ID (in a cell: %%agent --agent ID).", "dim"))
    console.write(lines)
    return 0
