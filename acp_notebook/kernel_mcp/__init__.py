"""The relay an agent starts to reach its kernel's MCP tools: `python -m acp_notebook.kernel_mcp`.

The MCP server itself runs inside the kernel, on the kernel's event loop, where the user's
variables live (`acp_notebook/notebook/kernel_server.py`). An agent can only start MCP servers
as commands (stdio), so the session's `mcpServers` names this relay: it connects to the kernel's
Unix socket (`--socket PATH`, mode 0600 in a private 0700 directory), proves itself with the
token in its environment (`ACP_NOTEBOOK_KERNEL_TOKEN`, never in argv, which other users can
read in `ps`; at its start it blanks the token in its environment block, which processes of the
same user read in `/proc/<pid>/environ`, see `relay.scrub_environ`), and then copies bytes both
ways: the agent's stdin to the kernel, the kernel's
answers to its stdout. It exits when stdin closes (the agent is done or gone) or when the kernel
closes the socket (the kernel ended, or the session the token belongs to did): no process stays
behind. Standard library only, so it starts in tens of milliseconds and needs nothing the kernel
does not have.
"""

from __future__ import annotations

#: The environment variable that carries the token; the relay blanks it in its environment.
TOKEN_ENV = "ACP_NOTEBOOK_KERNEL_TOKEN"
#: The first line the relay sends: this, a space, the token, a newline.
HELLO = b"ACPNB-KERNEL-MCP/1"
#: The kernel's answer to a good token; anything else is a refusal, its reason after "ERR ".
OK = b"OK"
#: The longest handshake line either side accepts.
MAX_HELLO = 512
