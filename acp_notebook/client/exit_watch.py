"""What happens when the agent process exits: its terminals are released and, within half a
second, its connection is closed with an `AgentExitedError` that quotes its last stderr.

Closing it here, not only on end-of-file, matters: if the agent dies while a child of it keeps
stdout open, the reader never sees EOF, and every turn would wait for its deadline.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from ..errors import AgentExitedError
from .connection import Connection
from .transport import AgentTransport


async def watch_exit(
    process: AgentTransport, conn: Connection, release_terminals: Callable[[], None]
) -> None:
    """Wait for `process` to exit, then end what it leaves behind."""
    await process.wait_exit()
    release_terminals()
    with anyio.move_on_after(0.5):
        await conn.closed_event.wait()
        return
    tail = process.stderr.text()
    conn.close(
        AgentExitedError(
            f"the agent process exited with code {process.returncode}"
            + (f"; its last stderr output:\n{tail}" if tail else ""),
            returncode=process.returncode,
            stderr_tail=tail,
        )
    )
