"""The client: one agent process (restarted when needed), its sessions, and `connect()`."""

from __future__ import annotations

import contextlib
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from .. import __version__
from ..errors import (
    AcpError,
    AgentExitedError,
    AgentStartError,
    AgentStartTimeoutError,
    AuthRequiredError,
    CapabilityError,
    ClientClosedError,
    ProtocolError,
    RequestError,
    RequestTimeoutError,
)
from ..protocol import jsonrpc as rpc
from ..protocol import schema
from ..protocol.limits import DEFAULT_LIMITS, Limits, bounded, count
from ..protocol.state import DEFAULT_OUTPUT_LIMIT
from .connection import Connection, RpcError
from .permissions import PermissionHandler, PermissionPolicy
from .process import AgentProcess
from .session import Session
from .terminal import DEFAULT_MAX_TERMINALS, TerminalSlots
from .transport import AgentTransport, TransportFactory

log = logging.getLogger("acp_notebook")

PROTOCOL_VERSION = 1
_NOT_ACP_GRACE = 5.0  # seconds to answer initialize once the agent wrote non-JSON-RPC to stdout


@dataclass
class ClientOptions:
    """How the client behaves; every field has a keyword of the same name in `connect()`."""

    fs: bool = True  # offer fs/read_text_file and fs/write_text_file, confined to the workspace
    terminal: bool = False  # offer terminal/* (agents then run commands through the client)
    max_terminals: int = DEFAULT_MAX_TERMINALS  # unreleased terminals at once, all sessions
    terminal_output_limit: int = DEFAULT_OUTPUT_LIMIT  # bytes kept per terminal, at most
    permission_policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    permission_handler: PermissionHandler | None = None
    protected_paths: Sequence[str | os.PathLike[str]] = ()
    protect_notebooks: bool = True  # refuse fs/write_text_file to any *.ipynb
    cancel_grace: float = 5.0
    max_retries: int = 5
    retry_backoff: float = 0.25
    initialize_timeout: float = 60.0
    # Every other request but session/prompt (bounded by the caller: a cell's --timeout, a
    # cancel) waits this long for its answer, then `$/cancel_request` and RequestTimeoutError.
    # Generous: session/new and session/load may start MCP servers or replay a long history,
    # and the spec lets agents take their time; what it must not do is never end. None: no limit.
    request_timeout: float | None = 120.0
    stderr_limit: int = 64 * 1024
    auth_method: str | None = None  # authenticate with this method when session/new needs it
    client_name: str = "acp_notebook"
    #: Caps on what the agent can make the client keep (parts, text, plan entries...).
    limits: Limits = DEFAULT_LIMITS
    #: How each agent start reaches the agent; None: `command` as a subprocess (`AgentProcess`).
    #: `transport.in_process(serve)` runs a Python agent on a thread of this process instead.
    transport: TransportFactory | None = None

    def __post_init__(self) -> None:
        for name in ("initialize_timeout", "request_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:  # `not >`: NaN is refused too
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")


class Client:
    """A connection to one ACP agent command. Use `connect()` to get one."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str | None] | None = None,
                 cwd: str | os.PathLike[str] | None = None,
                 options: ClientOptions | None = None) -> None:
        self.command = [str(c) for c in command]
        self.env = dict(env or {})
        self.cwd = str(Path(cwd or os.getcwd()).resolve())
        self.options = options or ClientOptions()
        self.agent_info: dict[str, Any] = {}
        self.agent_capabilities: dict[str, Any] = {}
        self.auth_methods: list[dict[str, Any]] = []
        self.protocol_version: int | None = None
        self._tg: anyio.abc.TaskGroup = None  # type: ignore[assignment]  # set in __aenter__
        self._process: AgentTransport | None = None
        self._connection: Connection | None = None
        self._epoch = 0
        self._restart_lock = anyio.Lock()
        self._sessions: dict[str, Session] = {}
        # Updates for a session id not registered yet, kept only while a session is being
        # opened (see _on_update); any other update for an unknown id is dropped and counted.
        self._orphans: dict[str, list[Any]] = {}
        self._orphan_room = [0, 0]  # updates, characters left
        self._opening = 0
        self.dropped_updates = 0
        self._killed_for_cancel = False
        self._authenticated = False
        self._closed = False
        self.processes_started = 0
        self.terminal_slots = TerminalSlots(self.options.max_terminals)
        self.protocol_errors: deque[str] = deque(maxlen=100)

    # -- lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._live_connection()
        except BaseException:
            # Exit the task group cleanly and raise the error itself, not an exception group.
            await self._shutdown()
            await self._tg.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        await self._shutdown()
        if isinstance(exc_info[1], Exception):
            # An error raised in the `async with` body must reach the caller as itself: handing
            # it to the task group would wrap it in an ExceptionGroup (`except ValueError` in
            # user code would then miss it). Cancellations still go through the task group.
            await self._tg.__aexit__(None, None, None)
            return None
        return await self._tg.__aexit__(*exc_info)

    async def aclose(self) -> None:
        await self._shutdown()

    async def _shutdown(self) -> None:
        with anyio.CancelScope(shield=True):
            if not self._closed:
                self._closed = True
                for session in list(self._sessions.values()):
                    with anyio.move_on_after(self.options.cancel_grace + 5):
                        await session.close()
            await self._stop_process()
            self._tg.cancel_scope.cancel()

    async def _stop_process(self) -> None:
        process, conn = self._process, self._connection
        if process is not None:
            await process.aclose(grace=2.0)
        if conn is not None:
            conn.close(ClientClosedError("the client was closed"))

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def agent_name(self) -> str:
        return str(self.agent_info.get("title") or self.agent_info.get("name")
                   or Path(self.command[0]).name)

    @property
    def session_capabilities(self) -> dict[str, Any]:
        caps = self.agent_capabilities.get("sessionCapabilities")
        return caps if isinstance(caps, dict) else {}

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def stderr_tail(self) -> str:
        return self._process.stderr.text() if self._process else ""

    # -- the agent process -----------------------------------------------------------------------

    async def _live_connection(self) -> Connection:
        """The current connection, starting a fresh agent process if the last one is gone."""
        if self._closed:
            raise ClientClosedError("the client is closed")
        conn = self._connection
        if conn is not None and conn.closed is None:
            return conn
        async with self._restart_lock:
            conn = self._connection
            if conn is not None and conn.closed is None:
                return conn
            if self._process is not None:
                await self._process.aclose(grace=0.5)
            return await self._start()

    async def _start(self) -> Connection:
        self._killed_for_cancel = False
        self._authenticated = False
        start = self.options.transport or AgentProcess
        process = start(self.command, self.env, self.cwd, self.options.stderr_limit)
        await process.start(self._tg)
        self.processes_started += 1
        garbage: list[str] = []  # what the agent wrote to stdout that is not JSON-RPC
        not_acp = anyio.Event()

        def on_protocol_error(message: str) -> None:
            if not garbage:
                garbage.append(message)
                not_acp.set()
            self._on_protocol_error(message)

        conn = Connection(process, on_update=self._on_update, on_request=self._on_request,
                          on_protocol_error=on_protocol_error)
        self._process, self._connection = process, conn
        self._tg.start_soon(conn.run, self._tg, name=f"acp reader {process.pid}")
        self._tg.start_soon(self._watch_exit, process, conn, name=f"acp exit {process.pid}")
        # Build the schema models (about a second, once) now rather than inside the first turn,
        # and in a thread: the kernel's loop keeps serving widgets and other sessions meanwhile.
        await anyio.to_thread.run_sync(schema.models)
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": self.options.fs, "writeTextFile": self.options.fs},
                "terminal": self.options.terminal,
                "session": {"configOptions": {"boolean": {}}},
            },
            "clientInfo": {"name": self.options.client_name, "title": "acp_notebook",
                           "version": __version__},
        }
        # A command that is not an ACP agent (a CLI without its --acp flag, a wrapper printing a
        # banner) writes text to stdout and then waits for a human: that used to hang for the
        # whole initialize_timeout (60 s). Stdout is for JSON-RPC only, so once it carries
        # something else, the initialize answer gets a few seconds more, not a minute.
        watchdog = anyio.CancelScope()

        async def give_up_on_garbage() -> None:
            with watchdog:
                await not_acp.wait()
                await anyio.sleep(_NOT_ACP_GRACE)
                conn.close(ProtocolError(
                    f"the agent did not answer initialize within {_NOT_ACP_GRACE:g} s after "
                    f"writing output that is not ACP JSON-RPC to stdout ({garbage[0]}). Is this "
                    f"the command of an ACP agent? Some need a flag such as --acp (command: "
                    f"{process.display})"))

        self._tg.start_soon(give_up_on_garbage, name=f"acp not-acp watchdog {process.pid}")
        try:
            response = await conn.request("initialize", params,
                                          timeout=self.options.initialize_timeout)
        except ProtocolError as exc:  # from the watchdog
            await process.aclose(grace=0.5)
            raise AgentStartError(str(exc) + _tail(process)) from None
        except TimeoutError:
            await process.aclose(grace=0.5)
            raise AgentStartTimeoutError(
                "initialize", repr(process.display), self.options.initialize_timeout,
                " and was stopped" + _tail(process)) from None
        except AgentExitedError as exc:
            wrote = f"; before that, {garbage[0]}" if garbage else ""
            raise AgentStartError(f"the agent exited during initialize (command: "
                                  f"{process.display}): {exc}{wrote}") from None
        except RequestError as exc:
            await process.aclose(grace=0.5)
            raise AgentStartError(f"the agent refused initialize: {exc}") from None
        finally:
            watchdog.cancel()
        if not isinstance(response, dict):
            await process.aclose(grace=0.5)
            raise ProtocolError(f"the agent's initialize answer is not an object: "
                                f"{rpc.excerpt(repr(response))}")
        version = response.get("protocolVersion")
        if version != PROTOCOL_VERSION:
            await process.aclose(grace=0.5)
            raise ProtocolError(
                f"the agent speaks ACP protocol version {rpc.excerpt(repr(version))}; "
                f"acp_notebook speaks "
                f"version {PROTOCOL_VERSION}. Use an agent release that supports version 1.")
        if conn.malformed:
            log.warning("agent wrote %d malformed lines before initialize", conn.malformed)
        self.protocol_version = version
        self.agent_info = _obj(response.get("agentInfo"))
        self.agent_capabilities = _obj(response.get("agentCapabilities"))
        self.auth_methods = [m for m in response.get("authMethods") or [] if isinstance(m, dict)]
        self._epoch += 1
        return conn

    async def _watch_exit(self, process: AgentTransport, conn: Connection) -> None:
        # If the agent dies but a child of it keeps stdout open, the reader never sees EOF:
        # close the connection shortly after the exit anyway, so turns end within a second.
        await process.wait_exit()
        # Nobody is left to release the dead agent's terminals (a fresh process cannot know
        # their ids): end their commands now.
        for session in self.sessions:
            if session.terminals is not None:
                session.terminals.release_all()
        with anyio.move_on_after(0.5):
            await conn.closed_event.wait()
            return
        tail = process.stderr.text()
        conn.close(AgentExitedError(
            f"the agent process exited with code {process.returncode}"
            + (f"; its last stderr output:\n{tail}" if tail else ""),
            returncode=process.returncode, stderr_tail=tail))

    def _kill_for_cancel(self) -> None:
        if self._process is not None:
            self._killed_for_cancel = True
            self._process.kill()

    async def _request(self, method: str, params: Any, *, deadline: bool = True) -> Any:
        """A request on the live connection; `deadline=False` only for session/prompt, whose
        end is the caller's (a cell's --timeout, stop()). Raises RequestTimeoutError."""
        conn = await self._live_connection()
        timeout = self.options.request_timeout if deadline else None
        try:
            return await conn.request(method, params, timeout=timeout)
        except TimeoutError as exc:
            if isinstance(exc, AcpError) or timeout is None:
                raise
            raise RequestTimeoutError(method, repr(self.agent_name[:100]), timeout,
                                      "; the request was cancelled") from None

    # -- routing ---------------------------------------------------------------------------------

    def _on_update(self, params: Any) -> None:
        sid = params.get("sessionId") if isinstance(params, dict) else None
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is not None:
            session._on_update(params.get("update"))
            return
        if not isinstance(sid, str):
            self._on_protocol_error(
                f"session/update without a sessionId: {rpc.excerpt(repr(params))}")
            return
        # A new session's first updates may come in the same read as the session/new answer,
        # before the answer is handled: keep a few while a session is being opened. At any other
        # time nobody will ever take them: drop and count (an agent inventing ids kept 400 MB).
        update = params.get("update")
        limits = self.options.limits
        if self._opening:
            size = count(update, limits.orphan_chars)
            room = self._orphan_room
            if room[0] > 0 and size <= room[1]:
                room[0] -= 1
                room[1] -= size
                self._orphans.setdefault(sid, []).append(update)
                return
        elif self._orphans:
            self._drop_orphans()
        self._drop_updates(1, sid)

    def _drop_updates(self, n: int, sid: str) -> None:
        if not self.dropped_updates:
            self._on_protocol_error(
                f"the agent sent updates for a session it did not open "
                f"({rpc.excerpt(sid, 80)}); they are dropped and counted in "
                f"client.dropped_updates")
        self.dropped_updates += n

    def _drop_orphans(self) -> None:
        for sid, updates in self._orphans.items():
            self._drop_updates(len(updates), sid)
        self._orphans.clear()

    @contextlib.contextmanager
    def _opening_session(self) -> Iterator[None]:
        """While a session/new or session/resume is in flight (its id is not registered yet)."""
        if not self._opening:
            limits = self.options.limits
            self._drop_orphans()
            self._orphan_room = [limits.orphan_updates, limits.orphan_chars]
        self._opening += 1
        try:
            yield
        finally:
            # Its updates stay until the caller registers the session (no await in between);
            # the next update for an unknown id after that drops what is left.
            self._opening -= 1

    async def _on_request(self, method: str, params: Any) -> Any:
        sid = params.get("sessionId") if isinstance(params, dict) else None
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            if method in _SESSION_METHODS:
                raise RpcError(rpc.INVALID_PARAMS, f"unknown session: {rpc.excerpt(repr(sid))}")
            raise RpcError(rpc.METHOD_NOT_FOUND, f"method not found: {method}")
        return await session.handle(method, params)

    def _on_protocol_error(self, message: str) -> None:
        # The message quotes the agent's own output, which may echo its API keys: it is logged
        # (to the cell's stderr in a kernel) and kept, so mask them as the stderr tail is.
        if self._process is not None:
            message = self._process.redactor.text(message)
        self.protocol_errors.append(message)
        # Shown where the user looks: the running turns of this agent. Only an error no turn
        # shows is logged (in a kernel the log lands in whichever cell started the agent).
        shown = False
        for session in self._sessions.values():
            if session.running is not None:
                session._fold.add_error(message)
                shown = True
        if not shown:
            log.warning("acp_notebook: %s", message)

    def _register(self, session: Session, old_id: str | None = None) -> None:
        if old_id is not None and self._sessions.get(old_id) is session:
            del self._sessions[old_id]
        self._sessions[session.id] = session
        for update in self._orphans.pop(session.id, ()):
            session._on_update(update)
        if not self._opening:
            self._drop_orphans()

    def _forget(self, session: Session) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]

    @property
    def sessions(self) -> list[Session]:
        return list(self._sessions.values())

    # -- sessions --------------------------------------------------------------------------------

    def _directories(self, additional: Sequence[str]) -> list[str]:
        dirs = [str(Path(d).resolve()) for d in additional]
        if dirs and self.session_capabilities.get("additionalDirectories") is None:
            raise CapabilityError(f"{self.agent_name} does not take additional directories "
                                  "(no sessionCapabilities.additionalDirectories)")
        return dirs

    def _session_cwd(self, cwd: str | os.PathLike[str] | None) -> str:
        return str(Path(cwd).resolve()) if cwd is not None else self.cwd

    async def _open_new(self, cwd: str, mcp_servers: list[dict[str, Any]],
                        additional_directories: list[str]) -> tuple[str, dict[str, Any]]:
        params: dict[str, Any] = {"cwd": cwd, "mcpServers": mcp_servers}
        if additional_directories:
            params["additionalDirectories"] = additional_directories
        try:
            with self._opening_session():
                response = await self._request("session/new", params)
        except RequestError as exc:
            if exc.code != rpc.AUTH_REQUIRED:
                raise
            if self.options.auth_method is None or self._authenticated:
                raise AuthRequiredError(exc.method, exc.code, exc.message, exc.data,
                                        self.auth_methods) from None
            await self.authenticate(self.options.auth_method)
            with self._opening_session():
                response = await self._request("session/new", params)
        response = _obj(response)
        sid = response.get("sessionId")
        if not isinstance(sid, str):
            raise ProtocolError(f"session/new answered without a sessionId: "
                                f"{rpc.excerpt(repr(response))}")
        return sid, response

    async def new_session(self, cwd: str | os.PathLike[str] | None = None, *,
                          mcp_servers: list[dict[str, Any]] | None = None,
                          additional_directories: Sequence[str] = ()) -> Session:
        """`session/new`. The session's workspace (for fs and terminals) is `cwd` plus
        `additional_directories`."""
        path = self._session_cwd(cwd)
        dirs = self._directories(additional_directories)
        servers = list(mcp_servers or [])
        sid, response = await self._open_new(path, servers, dirs)
        return self._adopt(sid, path, dirs, servers, response)

    def _adopt(self, sid: str, cwd: str, dirs: list[str], servers: list[dict[str, Any]],
               response: Any) -> Session:
        session = Session(self, sid, cwd, dirs, servers)
        response = _obj(response)
        session._fold.set_modes(response.get("modes"))
        session._fold.set_config_options(response.get("configOptions"))
        self._register(session)
        return session

    async def load_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                           mcp_servers: list[dict[str, Any]] | None = None,
                           additional_directories: Sequence[str] = ()) -> Session:
        """`session/load`: the agent replays the conversation, which becomes `session.history`."""
        if not self.agent_capabilities.get("loadSession"):
            raise CapabilityError(f"{self.agent_name} cannot load sessions (no loadSession)")
        path = self._session_cwd(cwd)
        dirs = self._directories(additional_directories)
        servers = list(mcp_servers or [])
        session = Session(self, session_id, path, dirs, servers)
        session._fold.begin_replay()
        self._register(session)  # replayed updates arrive before the answer
        params: dict[str, Any] = {"sessionId": session_id, "cwd": path, "mcpServers": servers}
        if dirs:
            params["additionalDirectories"] = dirs
        try:
            response = await self._request("session/load", params)
        except BaseException:
            self._forget(session)
            session._closed = True
            session._wake.set()
            raise
        session._fold.end_replay()
        response = _obj(response)
        session._fold.set_modes(response.get("modes"))
        session._fold.set_config_options(response.get("configOptions"))
        return session

    async def resume_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                             mcp_servers: list[dict[str, Any]] | None = None,
                             additional_directories: Sequence[str] = ()) -> Session:
        """`session/resume`: continue a session without replaying it."""
        if self.session_capabilities.get("resume") is None:
            raise CapabilityError(f"{self.agent_name} cannot resume sessions")
        path = self._session_cwd(cwd)
        dirs = self._directories(additional_directories)
        servers = list(mcp_servers or [])
        params: dict[str, Any] = {"sessionId": session_id, "cwd": path, "mcpServers": servers}
        if dirs:
            params["additionalDirectories"] = dirs
        with self._opening_session():
            response = await self._request("session/resume", params)
        return self._adopt(session_id, path, dirs, servers, response)

    async def list_sessions(self, cwd: str | os.PathLike[str] | None = None,
                            limit: int = 1000) -> list[dict[str, Any]]:
        """`session/list`, following cursors; each item has sessionId, cwd, title?, updatedAt?."""
        if self.session_capabilities.get("list") is None:
            raise CapabilityError(f"{self.agent_name} cannot list sessions")
        limits = self.options.limits
        limit = min(limit, limits.listed_sessions)
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[int] = set()  # hashes: a cursor may be long
        for _ in range(limits.list_pages):
            params: dict[str, Any] = {}
            if cwd is not None:
                params["cwd"] = self._session_cwd(cwd)
            if cursor is not None:
                params["cursor"] = cursor
            response = _obj(await self._request("session/list", params))
            sessions = response.get("sessions")
            page = [s for s in (sessions if isinstance(sessions, list) else [])[:limit]
                    if isinstance(s, dict)]
            out.extend(bounded(s, limits.value_chars)[0] for s in page[:limit - len(out)])
            cursor = response.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or len(out) >= limit:
                break
            if not page or hash(cursor) in seen:
                # An agent paging for ever (153,000 empty pages in 20 s) or in a circle.
                log.warning("acp_notebook: session/list stopped: the agent sent %s",
                            "an empty page with a cursor" if not page else "a cursor again")
                break
            seen.add(hash(cursor))
        else:
            log.warning("acp_notebook: session/list stopped after %d pages", limits.list_pages)
        return out

    async def authenticate(self, method_id: str) -> None:
        known = {m.get("id") for m in self.auth_methods}
        if method_id not in known:
            raise ValueError(f"unknown auth method {method_id!r}; the agent offers: "
                             f"{', '.join(str(k) for k in known) or 'none'}")
        method = next(m for m in self.auth_methods if m.get("id") == method_id)
        if method.get("type") not in (None, "agent"):
            raise CapabilityError(
                f"auth method {method_id!r} is of type {method.get('type')!r}: run the agent's "
                "login in a terminal, then reconnect")
        await self._request("authenticate", {"methodId": method_id})
        self._authenticated = True

    def __repr__(self) -> str:
        return f"<Client {self.agent_name!r} pid={self.pid} sessions={len(self._sessions)}>"


_SESSION_METHODS = frozenset({"session/request_permission", "fs/read_text_file",
                              "fs/write_text_file", "terminal/create", "terminal/output",
                              "terminal/wait_for_exit", "terminal/kill", "terminal/release"})


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _tail(process: AgentTransport) -> str:
    tail = process.stderr.text()
    return f"; its last stderr output:\n{tail}" if tail else ""


@contextlib.asynccontextmanager
async def connect(command: Sequence[str], env: Mapping[str, str | None] | None = None,
                  cwd: str | os.PathLike[str] | None = None, **options: Any
                  ) -> AsyncIterator[Client]:
    """Start an ACP agent and connect to it; the agent process ends with the block.

    `command` is the agent's argv (a list). `env` adds to (None removes from) the full
    environment. `options` are the fields of `ClientOptions` (fs, terminal, permission_policy,
    cancel_grace, max_retries, ...).
    """
    if isinstance(command, str):
        raise TypeError("command must be a list of strings, e.g. ['gemini', '--acp']")
    async with Client(command, env, cwd, ClientOptions(**options)) as client:
        yield client
