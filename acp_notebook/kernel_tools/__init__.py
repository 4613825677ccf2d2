"""The kernel's tools for agents: an MCP server in the kernel, its tools, and the relay to it.

- `server.py`: the Unix socket on the kernel's loop, one token per session, the bounds on
  connections; `kernel_mcp_entry` is the `mcpServers` entry a session is given.
- `relay.py`: the stdlib-only program that entry runs (`python -m acp_notebook.kernel_tools.relay`).
- `tools.py`: the MCP `Server` on one connection: the tools' schemas (`TOOLS`) and their dispatch.
  A new tool is registered there; its own code lives in a module of this folder.
- `variables.py`, `cells.py`: what the read tools read (the user's variables; the notebook's
  cells and errors); `card.py`, `run.py`: `run_code`, the card and permission the person sees,
  then the run, bounded and stoppable; `snapshots.py` and
  `tracebacks.py` mask and bound what they return; `context.py` gives the same readings to
  `%%agent --with / --error / --cells`; `cell_errors.py` is the light `post_run_cell` hook.

This file imports nothing: `python -m acp_notebook.kernel_tools.relay` runs it first, and the
relay must start in tens of milliseconds on the standard library alone.
"""
