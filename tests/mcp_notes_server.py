"""A tiny stdio MCP server for tests, on the official `mcp` SDK: one tool, `read_note`, whose
answer carries `NOTES_WORD` from its environment (so a test sees the env it was given).

Run as `python tests/mcp_notes_server.py`; no network.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server: MCPServer = MCPServer("notes")


@server.tool()
def read_note(key: str) -> str:
    """Read the note stored under `key`."""
    return f"note {key}: {os.environ.get('NOTES_WORD', 'none')}"


if __name__ == "__main__":
    server.run("stdio")
