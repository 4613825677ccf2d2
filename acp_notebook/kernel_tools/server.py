"""The kernel's MCP server: a Unix socket on the kernel's event loop, one token per session.

Transport (issue 9, item 2). Agents start MCP servers as commands, so each session's
`mcpServers` gets a stdio entry that runs the relay (`python -m acp_notebook.kernel_tools.relay`,
`relay.py`). The relay connects to this socket and sends a token; after `OK` it only copies
bytes. The MCP protocol (the official `mcp` SDK's low-level `Server`) is spoken here, in the
kernel, because the tools need the user's namespace and must run the agent's code on the
kernel's own loop.

Who may connect: the socket lives in a directory made by `mkdtemp` (mode 0700) and is chmod
0600, so only this user's processes reach it; and each session gets its own random token (32
bytes, compared by its SHA-256 digest, never kept in argv: the relay takes it from its
environment, and blanks it there at once, so `/proc/<pid>/environ` shows it only for the first
moment of the relay's life; the agent that starts the relay has it, in its memory). A token
belongs to the session whose `mcpServers` carries it; once that session is
closed, or was never opened, the token is refused and its open connections are closed, which
ends their relays. When the kernel exits, the socket goes and so do the relays; the directory is
removed at a clean exit (a kernel killed outright leaves it, with a socket nobody listens on).

Bounded (issue 20, item 7): 957 connections opened with a token were each kept, until the kernel
ran out of file descriptors; `accept` then failed with EMFILE, which ended the listener for the
kernel's life. Now a connection must show its token within `HANDSHAKE_TIMEOUT`, at most
`MAX_PENDING` may be showing one (past that, the oldest silent one is refused to make room: a
relay shows its token as it connects, so silent connections kept open cannot keep it out), a
token holds at most `MAX_PER_TOKEN` connections and the kernel `MAX_CONNECTIONS`; a connection
past a bound gets `ERR` and is closed at once. Out of
descriptors (EMFILE, ENFILE), the accept loop frees a spare descriptor it keeps for this, takes
the waiting connection, refuses it and goes on; it never stops for an error of one accept.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
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

from ..notebook.runtime import Runtime
from .relay import HELLO, MAX_HELLO, OK, TOKEN_ENV  # the handshake's one definition, stdlib-only

if TYPE_CHECKING:
    from ..client.session import Session
    from ..notebook.host import Host
    from ..notebook.options import CellOptions

log = logging.getLogger("acp_notebook")

SERVER_NAME = "kernel"  # the entry's name: agents show tools as kernel/list_variables or so
HANDSHAKE_TIMEOUT = 5.0  # seconds a connection has to show its token
MAX_PENDING = 8  # connections still to show a token
MAX_PER_TOKEN = 4  # a session's relays (an agent may restart one before the old one is gone)
MAX_CONNECTIONS = 32  # all the kernel's open connections
OUT_OF_FDS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_TRANSIENT = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EINTR})  # retried at once
BACKOFF_MAX = 1.0  # seconds between accepts while out of descriptors with no spare one
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
        from .run import CellGate

        self.shell = shell
        self.runtime = runtime
        base = os.environ.get("XDG_RUNTIME_DIR") or None
        if base is not None and not os.access(base, os.W_OK):
            base = None
        self.directory = Path(tempfile.mkdtemp(prefix="acpnb-mcp-", dir=base))  # mode 0700
        self.path = self.directory / "kernel.sock"
        self._grants: dict[bytes, Grant] = {}
        #: The connections that have not shown a token yet, oldest first (see `_connection`).
        self._waiting: list[anyio.CancelScope] = []
        self._open: dict[bytes, int] = {}  # a token's digest: its open connections
        #: Turns whose cell said --no-kernel-tools: every call during them is refused.
        self.refused: weakref.WeakSet[object] = weakref.WeakSet()
        # Bound and listening before the first entry leaves: an agent may start the relay while
        # it answers session/new, before this loop gets to run anything.
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._socket.bind(str(self.path))
            os.chmod(self.path, 0o600)
            self._socket.listen(64)
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
            "args": ["-P", "-m", "acp_notebook.kernel_tools.relay", "--socket", str(self.path)],
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
            async with listener, anyio.create_task_group() as group:
                await self._accept_all(listener, group)
        except Exception:
            log.exception("acp_notebook: the kernel's MCP server stopped")

    async def _accept_all(self, listener: SocketListener, group: anyio.abc.TaskGroup) -> None:
        """Accept for ever; an accept that fails ends nothing (anyio's `serve` ended with it)."""
        spare = _spare()
        backoff = 0.05
        warned = False
        try:
            while True:
                try:
                    stream = await listener.accept()
                except (OSError, anyio.BrokenResourceError) as error:
                    # anyio says BrokenResourceError, from the accept's OSError
                    exc = error if isinstance(error, OSError) else error.__cause__
                    if not isinstance(exc, OSError):
                        raise
                    if exc.errno not in OUT_OF_FDS:  # that connection's (ECONNABORTED...)
                        log.debug("acp_notebook: an accept of the kernel tools failed: %s", exc)
                        await anyio.sleep(0 if exc.errno in _TRANSIENT else backoff)
                        backoff = min(backoff * 2, BACKOFF_MAX)
                        continue
                    if not warned:
                        log.warning("acp_notebook: the kernel is out of file descriptors: %s", exc)
                        warned = True
                    if spare is not None:  # freed, it lets the waiting connection in, refused
                        os.close(spare)
                        _refuse_waiting(self._socket)
                    spare = _spare()
                    if spare is None:  # none to free: wait for one (the connection waits too)
                        await anyio.sleep(backoff)
                        backoff = min(backoff * 2, BACKOFF_MAX)
                    else:  # accept fails with EMFILE whether a connection waits or not
                        await anyio.wait_readable(self._socket)
                    continue
                backoff, warned = 0.05, False
                group.start_soon(self._connection, stream)
        finally:
            if spare is not None:
                os.close(spare)

    async def _connection(self, stream: SocketStream) -> None:
        if self._total() >= MAX_CONNECTIONS and not self._waiting:
            await _refuse(stream, "too many connections to the kernel's tools")
            return
        if len(self._waiting) >= MAX_PENDING or self._total() >= MAX_CONNECTIONS:
            # The oldest silent one makes room, not the newcomer: refusing newcomers let any
            # process of the user (the agent's shell) keep 8 silent connections open, renewed
            # at each deadline, and every other session's relay was refused for as long. A relay
            # shows its token as it connects; only a silent connection grows old here.
            self._waiting.pop(0).cancel()
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            scope = anyio.CancelScope()
            self._waiting.append(scope)
            try:
                with scope:
                    key = await self._handshake(stream, buffered)
            finally:
                with contextlib.suppress(ValueError):  # gone already if it made room
                    self._waiting.remove(scope)
            if scope.cancel_called:
                await _refuse(stream, "too many connections are waiting to show a token")
                return
            if key is None:
                return
            grant = self._grants[key]
            self._open[key] = self._open.get(key, 0) + 1
            try:
                from .tools import serve

                async with anyio.create_task_group() as group:
                    group.start_soon(self._watch, grant, group.cancel_scope)
                    await serve(self, grant, stream, buffered)
                    group.cancel_scope.cancel()
            finally:
                self._open[key] -= 1
                if not self._open[key]:
                    del self._open[key]

    def _total(self) -> int:
        return len(self._waiting) + sum(self._open.values())

    async def _handshake(
        self, stream: SocketStream, buffered: BufferedByteReceiveStream
    ) -> bytes | None:
        """The token's digest once the connection showed a live one in time (and answered
        `OK`), else None (answered `ERR` and why)."""
        key = None
        reason = "bad handshake"
        with contextlib.suppress(Exception), anyio.move_on_after(HANDSHAKE_TIMEOUT):
            line = await buffered.receive_until(b"\n", MAX_HELLO)
            hello, _, token = line.partition(b" ")
            if hello == HELLO:
                key = _digest(token.decode("utf-8", "replace").strip())
                grant = self._grants.get(key)
                reason = "unknown token"
                if grant is not None and not self.alive(grant):
                    grant, reason = None, "the session this token belonged to has ended"
                elif grant is not None and self._open.get(key, 0) >= MAX_PER_TOKEN:
                    grant, reason = None, "too many connections with this token"
                elif grant is not None and self._total() > MAX_CONNECTIONS:
                    grant, reason = None, "too many connections to the kernel's tools"
                key = key if grant is not None else None
        with contextlib.suppress(Exception):
            await stream.send(OK + b"\n" if key is not None else b"ERR " + reason.encode() + b"\n")
        return key

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


async def _refuse(stream: SocketStream, reason: str) -> None:
    """Say why (one `ERR` line, as the handshake does) and close, without waiting on the peer."""
    async with stream:
        with contextlib.suppress(Exception), anyio.move_on_after(1):
            await stream.send(b"ERR " + reason.encode() + b"\n")


def _refuse_waiting(listening: socket.socket) -> None:
    """Take the connection that waits, if one does (a descriptor was just freed for it), say
    why it is refused and close it: refused at once, it is not left to hang in the backlog."""
    try:
        conn, _ = listening.accept()
    except OSError:  # none waits (BlockingIOError), or the descriptor was taken meanwhile
        return
    with conn:
        conn.setblocking(False)
        with contextlib.suppress(OSError):
            conn.send(b"ERR the kernel is out of file descriptors\n")


def _spare() -> int | None:
    """A descriptor kept to be freed when the kernel has none left (see `_accept_all`)."""
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


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
