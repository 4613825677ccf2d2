"""The kernel's MCP server: a Unix socket on the kernel's event loop, one token per session.

Transport (issue 9, item 2). Agents start MCP servers as commands, so each session's
`mcpServers` gets a stdio entry that runs the relay (`python -m acp_notebook.kernel_mcp`). The
relay connects to this socket and sends a token; after `OK` it only copies bytes. The MCP
protocol (the official `mcp` SDK's low-level `Server`) is spoken here, in the kernel, because
the tools need the user's namespace and must run the agent's code on the kernel's own loop.

Who may connect: the socket lives in a directory made by `mkdtemp` (mode 0700) and is chmod
0600, so only this user's processes reach it; and each session gets its own random token (32
bytes, compared by its SHA-256 digest, never kept in argv: the relay takes it from its
environment). A token belongs to the session whose `mcpServers` carries it; once that session is
closed, or was never opened, the token is refused and its open connections are closed, which
ends their relays. When the kernel exits, the socket goes and so do the relays; the directory is
removed at a clean exit (a kernel killed outright leaves it, with a socket nobody listens on).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import socket
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import SocketListener, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from .runtime import Runtime

if TYPE_CHECKING:
    from ..client.session import Session
    from .host import Host
    from .options import CellOptions

log = logging.getLogger("acp_notebook")

# The relay's side of the handshake (acp_notebook/kernel_mcp/__init__.py, which stays stdlib-only
# and imports nothing of the package; tests/test_kernel_mcp.py checks that both agree).
TOKEN_ENV = "ACP_NOTEBOOK_KERNEL_TOKEN"
HELLO = b"ACPNB-KERNEL-MCP/1"
OK = b"OK"
MAX_HELLO = 512
SERVER_NAME = "kernel"  # the entry's name: agents show tools as kernel/list_variables or so
HANDSHAKE_TIMEOUT = 10.0
UNBOUND_GRACE = 120.0  # seconds a token may wait for its session to open
WATCH_INTERVAL = 0.5


@dataclass
class Grant:
    """One session's right to the tools: its token and its `mcpServers` entry."""

    token: str
    entry: dict[str, Any]
    created: float
    session: Session | None = None
    revoked: bool = False


class KernelServer:
    """The socket, the tokens, and the connections of one kernel (one per `Runtime`)."""

    def __init__(self, shell: Any, runtime: Runtime) -> None:
        from .kernel_tools_run import CellGate

        self.shell = shell
        self.runtime = runtime
        base = os.environ.get("XDG_RUNTIME_DIR") or None
        if base is not None and not os.access(base, os.W_OK):
            base = None
        self.directory = Path(tempfile.mkdtemp(prefix="acpnb-mcp-", dir=base))  # mode 0700
        self.path = self.directory / "kernel.sock"
        self._grants: dict[bytes, Grant] = {}
        #: Turns whose cell said --no-kernel-tools: every call during them is refused.
        self.refused: weakref.WeakSet[object] = weakref.WeakSet()
        # Bound and listening before the first entry leaves: an agent may start the relay while
        # it answers session/new, before this loop gets to run anything.
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._socket.bind(str(self.path))
            os.chmod(self.path, 0o600)
            self._socket.listen(16)
        except OSError:
            self._socket.close()
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self.gate = CellGate(shell.events)
        self._task = asyncio.get_running_loop().create_task(self._serve(), name="acpnb kernel mcp")
        atexit.register(shutil.rmtree, self.directory, True)

    # -- tokens ----------------------------------------------------------------------------------

    def entry(self) -> dict[str, Any]:
        """A fresh token and the stdio `mcpServers` entry that carries it (ACP's shape: no
        `type`, `args` and `env` arrays). `-P`: the agent's working directory is not put on the
        relay's path, so no module there can stand in for it."""
        token = secrets.token_urlsafe(32)
        package_root = str(Path(__file__).resolve().parents[2])
        entry = {
            "name": SERVER_NAME,
            "command": sys.executable,
            "args": ["-P", "-m", "acp_notebook.kernel_mcp", "--socket", str(self.path)],
            "env": [
                {"name": TOKEN_ENV, "value": token},
                {"name": "PYTHONPATH", "value": package_root},
            ],
        }
        self._prune()
        self._grants[_digest(token)] = Grant(token, entry, time.monotonic())
        self.runtime.redactor.add({token})  # never shown: %agent log, transcripts, errors
        return entry

    def session_of(self, grant: Grant) -> Session | None:
        """The live session a token belongs to (found by its entry the first time); None if it
        is closed or not open (yet)."""
        if grant.session is None and not grant.revoked:
            for named in list(self.runtime.sessions.values()):
                if any(_token_of(e) == grant.token for e in named.session.mcp_servers):
                    grant.session = named.session
                    break
        session = grant.session
        if session is not None and (session.closed or session.client.closed):
            grant.revoked = True
        return None if grant.revoked else session

    def alive(self, grant: Grant) -> bool:
        """Whether the token is still honoured: its session is open, or may still open."""
        if self.session_of(grant) is not None:
            return True
        if grant.session is None and not grant.revoked:
            return time.monotonic() - grant.created < UNBOUND_GRACE
        return False

    def _prune(self) -> None:
        for key, grant in list(self._grants.items()):
            if not self.alive(grant):
                del self._grants[key]

    # -- serving ---------------------------------------------------------------------------------

    async def _serve(self) -> None:
        try:
            listener = await SocketListener.from_socket(self._socket)
            async with listener:
                await listener.serve(self._connection)
        except Exception:
            log.exception("acp_notebook: the kernel's MCP server stopped")

    async def _connection(self, stream: SocketStream) -> None:
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            grant = await self._handshake(stream, buffered)
            if grant is None:
                return
            from .kernel_server_mcp import serve

            async with anyio.create_task_group() as group:
                group.start_soon(self._watch, grant, group.cancel_scope)
                await serve(self, grant, stream, buffered)
                group.cancel_scope.cancel()

    async def _handshake(
        self, stream: SocketStream, buffered: BufferedByteReceiveStream
    ) -> Grant | None:
        grant = None
        reason = "bad handshake"
        with contextlib.suppress(Exception), anyio.move_on_after(HANDSHAKE_TIMEOUT):
            line = await buffered.receive_until(b"\n", MAX_HELLO)
            hello, _, token = line.partition(b" ")
            if hello == HELLO:
                grant = self._grants.get(_digest(token.decode("utf-8", "replace").strip()))
                reason = "unknown token"
                if grant is not None and not self.alive(grant):
                    grant, reason = None, "the session this token belonged to has ended"
        with contextlib.suppress(Exception):
            await stream.send(
                OK + b"\n" if grant is not None else b"ERR " + reason.encode() + b"\n"
            )
        return grant

    async def _watch(self, grant: Grant, scope: anyio.CancelScope) -> None:
        """Close the connection once its session ends (its relay exits on the EOF)."""
        # Polled: a session ends in many ways (closed, its agent stopped, the runtime cleared)
        # and none of them signals; a check twice a second costs nothing.
        while self.alive(grant):  # noqa: ASYNC110
            await anyio.sleep(WATCH_INTERVAL)
        scope.cancel()

    def close(self) -> None:
        """Stop listening, close every connection, remove the socket's directory."""
        self._task.cancel()
        self._socket.close()
        self.gate.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def _digest(token: str) -> bytes:
    # Looked up by digest: a dict lookup by the token itself would compare it char by char.
    return hashlib.sha256(token.encode()).digest()


def _token_of(entry: Any) -> str | None:
    env = entry.get("env") if isinstance(entry, dict) else None
    for item in env if isinstance(env, list) else []:
        if isinstance(item, dict) and item.get("name") == TOKEN_ENV:
            value = item.get("value")
            return value if isinstance(value, str) else None
    return None


_SERVERS: weakref.WeakKeyDictionary[Runtime, KernelServer] = weakref.WeakKeyDictionary()


def server_of(runtime: Runtime) -> KernelServer | None:
    """The kernel's MCP server, if one was started."""
    return _SERVERS.get(runtime)


def kernel_mcp_entry(host: Host, opts: CellOptions | None = None) -> dict[str, Any] | None:
    """The kernel tools' entry for a new session's `mcpServers`, or None when they are off
    (`c.AcpNotebook.kernel_tools = False`, `%%agent --no-kernel-tools`) or cannot be offered
    (no Unix sockets here). Starts the kernel's server on first use; call it on the kernel's
    loop, from a cell."""
    if not host.kernel_tools or (opts is not None and opts.no_kernel_tools):
        return None
    if not hasattr(socket, "AF_UNIX"):
        return None
    server = _SERVERS.get(host.runtime)
    if server is None:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            return None
        try:
            server = _SERVERS[host.runtime] = KernelServer(shell, host.runtime)
        except OSError as exc:  # no socket here (a path too long, a full disk): no tools
            log.warning("acp_notebook: the kernel tools are not offered: %s", exc)
            return None
    return server.entry()


def refuse_turn(runtime: Runtime, turn: object) -> None:
    """`%%agent --no-kernel-tools` in a session that has the tools: they refuse this turn."""
    server = _SERVERS.get(runtime)
    if server is not None:
        server.refused.add(turn)
