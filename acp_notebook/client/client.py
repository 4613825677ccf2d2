"""The client: one agent process (restarted when needed), its sessions, and `connect()`.

`registry.py` routes updates to sessions, `opening.py` opens them. The "session link" below is
what a Session uses of its Client: public (no private access across classes), not user API."""

from __future__ import annotations

import contextlib
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from ..errors import (
    AcpError,
    AgentExitedError,
    ClientClosedError,
    InvalidCommandError,
    RequestTimeoutError,
)
from ..protocol import schema
from ..protocol.wirelog import WireLog
from . import auth, handshake, opening, wirefile
from .connection import Connection
from .options import ClientOptions
from .process import AgentProcess
from .registry import SessionRegistry
from .serving.terminal import TerminalSlots
from .session import Session
from .threads import run_in_daemon_thread
from .transport import AgentTransport

log = logging.getLogger("acp_notebook")


class Client:
    """A connection to one ACP agent command. Use `connect()` to get one."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str | None] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        options: ClientOptions | None = None,
    ) -> None:
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
        #: The sessions by id; routes each session/update to its session (see registry.py).
        self.registry: SessionRegistry[Session] = SessionRegistry(
            lambda: self.options.limits, self._on_protocol_error
        )
        self._killed_for_cancel = False
        self._authenticated = False
        self._closed = False
        self.processes_started = 0
        self.terminal_slots = TerminalSlots(self.options.max_terminals)
        self.protocol_errors: deque[str] = deque(maxlen=100)
        #: The last JSON-RPC messages each way, across agent restarts (`%agent log`).
        self.wire_log = WireLog(self.options.wire_log_size)
        self._masked: set[str] = set()  # see mask()

    # -- lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self.live_connection()
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
        """Close every session and stop the agent process (what leaving `async with` does)."""
        await self._shutdown()

    async def _shutdown(self) -> None:
        with anyio.CancelScope(shield=True):
            if not self._closed:
                self._closed = True
                for session in self.sessions:
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
        wirefile.detach(self.wire_log)

    @property
    def closed(self) -> bool:
        """Whether `aclose()` ran: a closed client opens no session and sends nothing."""
        return self._closed

    @property
    def agent_name(self) -> str:
        """The agent as people call it: its title, else its name, else its command."""
        info = self.agent_info
        return str(info.get("title") or info.get("name") or Path(self.command[0]).name)

    @property
    def session_capabilities(self) -> dict[str, Any]:
        """The agent's `sessionCapabilities` (list, resume, close…), `{}` when it sent none."""
        caps = self.agent_capabilities.get("sessionCapabilities")
        return caps if isinstance(caps, dict) else {}

    @property
    def dropped_updates(self) -> int:
        """Updates for sessions the agent never opened: dropped, and counted here."""
        return self.registry.dropped_updates

    @property
    def pid(self) -> int | None:
        """The agent process's id; None in process (`in_process`) or before it started."""
        return self._process.pid if self._process else None

    @property
    def stderr_tail(self) -> str:
        """The last 64 KiB the agent wrote to stderr (older output is dropped), for errors."""
        return self._process.stderr.text() if self._process else ""

    @property
    def stderr_mark(self) -> int:
        """How much the agent has written to stderr so far: `stderr_since`'s argument."""
        return self._process.stderr.total if self._process else 0

    def stderr_since(self, mark: int) -> str:
        """The tail of what the agent wrote to stderr after `stderr_mark` read `mark`."""
        return self._process.stderr.text(since=mark) if self._process else ""

    def mask(self, secrets: Iterable[str]) -> None:
        """Mask these values too wherever this client logs or quotes its agent (the protocol
        log file, stderr in errors), for this process and the ones restarted after it: the
        keys of the MCP servers its sessions are given, say."""
        new = set(secrets) - self._masked
        if new:
            self._masked |= new
            if self._process is not None:
                self._process.redactor.add(new)

    # -- the agent process -----------------------------------------------------------------------

    async def live_connection(self) -> Connection:
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
        process.redactor.add(self._masked)
        await process.start(self._tg)
        self.processes_started += 1
        garbage: list[str] = []  # what the agent wrote to stdout that is not JSON-RPC
        not_acp = anyio.Event()

        def on_protocol_error(message: str) -> None:
            if not garbage:
                garbage.append(message)
                not_acp.set()
            self._on_protocol_error(message)

        wirefile.attach(
            self.wire_log,
            self.options.log_file,
            agent=self.agent_name,
            pid=process.pid,
            redactor=process.redactor,
        )
        conn = Connection(
            process,
            on_update=self.registry.route_update,
            on_request=self.registry.route_request,
            on_protocol_error=on_protocol_error,
            wire=self.wire_log,
            trace=self.options.trace,
        )
        self._process, self._connection = process, conn
        self._tg.start_soon(conn.run, self._tg, name=f"acp reader {process.pid}")
        self._tg.start_soon(
            watch_exit, process, conn, self._release_terminals, name=f"acp exit {process.pid}"
        )
        # Build the schema models (about a second, once) now rather than inside the first turn,
        # and in a thread: the kernel's loop keeps serving widgets and other sessions meanwhile.
        await run_in_daemon_thread(schema.models)
        params = handshake.initialize_params(self.options)
        response = await handshake.initialize(
            self._tg, process, conn, params, self.options.initialize_timeout, garbage, not_acp
        )
        agent = await handshake.accept(response, process, conn)
        self.protocol_version = agent.protocol_version
        self.agent_info = agent.info
        self.agent_capabilities = agent.capabilities
        self.auth_methods = agent.auth_methods
        self._epoch += 1
        return conn

    def _release_terminals(self) -> None:
        # Nobody is left to release a dead agent's terminals (a fresh process cannot know
        # their ids): end their commands now.
        for session in self.sessions:
            if session.terminals is not None:
                session.terminals.release_all()

    # -- the session link: what sessions use of their client --------------------------------------

    @property
    def epoch(self) -> int:
        """Which agent process this is (+1 per start): a session opened on another reopens."""
        return self._epoch

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        """The client's task group: session workers, terminals and watchdogs run in it."""
        return self._tg

    @property
    def connection(self) -> Connection | None:
        """The connection to the current agent process (possibly closed), or None."""
        return self._connection

    @property
    def authenticated(self) -> bool:
        """Whether `authenticate` succeeded on the current agent process."""
        return self._authenticated

    async def request(self, method: str, params: Any, *, deadline: bool = True) -> Any:
        """A request on the live connection; `deadline=False` only for session/prompt, whose
        end is the caller's (a cell's --timeout, stop()). Raises RequestTimeoutError."""
        conn = await self.live_connection()
        timeout = self.options.request_timeout if deadline else None
        try:
            return await conn.request(method, params, timeout=timeout)
        except TimeoutError as exc:
            if isinstance(exc, AcpError) or timeout is None:
                raise
            raise RequestTimeoutError(
                method, repr(self.agent_name[:100]), timeout, "; the request was cancelled"
            ) from None

    async def open_new(
        self,
        cwd: str,
        mcp_servers: list[dict[str, Any]],
        additional_directories: list[str],
        system_prompt: str,
    ) -> tuple[str, dict[str, Any]]:
        """`session/new` (authenticating if needed): the id and the answer (see opening.py)."""
        return await opening.open_new(self, cwd, mcp_servers, additional_directories, system_prompt)

    @property
    def killed_for_cancel(self) -> bool:
        """Whether the current agent process was killed because a turn ignored session/cancel."""
        return self._killed_for_cancel

    def kill_agent(self, *, for_cancel: bool = False) -> None:
        """Kill the agent process now; sessions come back on a fresh one at their next request.
        `for_cancel`: a turn ignored session/cancel (its result will say so)."""
        if self._process is not None:
            self._killed_for_cancel = self._killed_for_cancel or for_cancel
            self._process.kill()

    def _on_protocol_error(self, message: str) -> None:
        # The message quotes the agent's own output, which may echo its API keys: it is logged
        # (to the cell's stderr in a kernel) and kept, so mask them as the stderr tail is.
        if self._process is not None:
            message = self._process.redactor.text(message)
        self.protocol_errors.append(message)
        # Shown where the user looks: the running turns of this agent. Only an error no turn
        # shows is logged (in a kernel the log lands in whichever cell started the agent).
        if not self.registry.show_in_turns(message):
            log.warning("acp_notebook: %s", message)

    @property
    def sessions(self) -> list[Session]:
        """The sessions this client opened and has not closed."""
        return self.registry.all()

    # -- sessions --------------------------------------------------------------------------------

    async def new_session(
        self,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: list[dict[str, Any]] | None = None,
        additional_directories: Sequence[str] = (),
        system_prompt: str | None = None,
    ) -> Session:
        """`session/new`. The session's workspace (for fs and terminals) is `cwd` plus
        `additional_directories`. `system_prompt` ("": none) is sent in place of the
        client's (`ClientOptions.system_prompt`), where the agent takes one; the session
        re-sends it when it is reopened or forked."""
        return await opening.new_session(
            self, cwd, mcp_servers, additional_directories, system_prompt
        )

    async def load_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: list[dict[str, Any]] | None = None,
        additional_directories: Sequence[str] = (),
        system_prompt: str | None = None,
    ) -> Session:
        """`session/load`: the agent replays the conversation, which becomes `session.history`."""
        return await opening.load_session(
            self, session_id, cwd, mcp_servers, additional_directories, system_prompt
        )

    async def resume_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: list[dict[str, Any]] | None = None,
        additional_directories: Sequence[str] = (),
        system_prompt: str | None = None,
    ) -> Session:
        """`session/resume`: continue a session without replaying it."""
        return await opening.resume_session(
            self, session_id, cwd, mcp_servers, additional_directories, system_prompt
        )

    async def fork_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: list[dict[str, Any]] | None = None,
        additional_directories: Sequence[str] = (),
        system_prompt: str | None = None,
    ) -> Session:
        """`session/fork` (unstable; where the agent advertises `sessionCapabilities.fork`): a
        new session that starts from the conversation of `session_id`, left as it was.
        `session.snapshot()` makes such a point to fork from."""
        return await opening.fork_session(
            self, session_id, cwd, mcp_servers, additional_directories, system_prompt
        )

    async def list_sessions(
        self, cwd: str | os.PathLike[str] | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """`session/list`, following cursors; each item has sessionId, cwd, title?, updatedAt?."""
        return await opening.list_sessions(self, cwd, limit)

    async def authenticate(
        self, method_id: str, *, on_output: Callable[[str], None] | None = None
    ) -> None:
        """Authenticate with one of `auth_methods`: an agent method is one request; a terminal
        method runs the agent's login command (its output to `on_output`), then restarts the
        agent (`client/auth.py`). Raises `NotOfferedError`, `AuthFailedError`."""
        if await auth.authenticate(self, method_id, on_output) == "agent":
            self._authenticated = True

    async def logout(self) -> None:
        """`logout`, where the agent offers it (`agentCapabilities.auth.logout`)."""
        await auth.logout(self)
        self._authenticated = False

    async def delete_session(self, session_id: str) -> None:
        """`session/delete` (`sessionCapabilities.delete`); closes it here first if open."""
        await opening.delete_session(self, session_id)

    async def restart_agent(self) -> None:
        """Stop the agent process and wait for its connection to close: the next request
        starts and initializes a fresh one (sessions come back on it at their next request)."""
        conn = self._connection
        self.kill_agent()
        if conn is not None:
            with anyio.move_on_after(5):
                await conn.closed_event.wait()

    def __repr__(self) -> str:
        return f"<Client {self.agent_name!r} pid={self.pid} sessions={len(self.registry)}>"


@contextlib.asynccontextmanager
async def connect(
    command: Sequence[str],
    env: Mapping[str, str | None] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """Start an ACP agent and connect to it; the agent process ends with the block.

    `command` is the agent's argv (a list). `env` adds to (None removes from) the full
    environment. `options` are the fields of `ClientOptions` (fs, terminal, permission_policy,
    cancel_grace, max_retries, ...).
    """
    if isinstance(command, str):
        raise InvalidCommandError("command must be a list of strings, e.g. ['gemini', '--acp']")
    async with Client(command, env, cwd, ClientOptions(**options)) as client:
        yield client


# What happens when the agent process exits: its terminals are released and, within half a second,
# its connection is closed with an `AgentExitedError` that quotes its last stderr. Closing it
# here, not only on end-of-file, matters: if the agent dies while a child of it keeps stdout
# open, the reader never sees EOF, and every turn would wait for its deadline.
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
