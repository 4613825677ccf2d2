"""A session: its state, its turns, and the agent's requests that belong to it.

The work is split by job: `runner.TurnRunner` runs the turns (queue, attempts, cancellation),
`serving.AgentRequests` answers the agent's permission, fs and terminal requests. The Session
holds the state they share (the fold) and the public API.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from ..errors import CapabilityError, ClientClosedError, ProtocolError, RequestError
from ..protocol import content, methods
from ..protocol import jsonrpc as rpc
from ..protocol.costs import CostLimit
from ..protocol.fold import SessionFold
from ..protocol.limits import MAX_ID_CHARS
from ..protocol.mutations import Delta, Mutation, SessionChanged, TurnFinished
from ..protocol.session_facts import check_mode, config_change
from ..protocol.state import ToolCallPart, Usage
from ..protocol.terminals import TerminalView
from ..protocol.turn import TurnRecord, TurnResult
from .attachments import load_parts
from .host import SessionHost
from .runner import TurnRunner
from .serving.checkpoints import Checkpoints
from .serving.elicit import ElicitationHandler
from .serving.permissions import PermissionHandler, PermissionPolicy
from .serving.requests import AgentRequests
from .serving.terminal import Terminals
from .serving.workspace import Workspace
from .structured import terms
from .turn import TurnHandle

log = logging.getLogger("acp_notebook")

Subscriber = Callable[[Mutation], None]


def setup_params(
    session_id: str | None,
    cwd: str,
    mcp_servers: list[dict[str, Any]],
    additional_directories: list[str],
    system_prompt: str,
) -> dict[str, Any]:
    """The params of session/new (no `session_id`), load, resume and fork: the system prompt
    is re-sent on each (the agent does not keep it, the spec says), "" sends none."""
    params: dict[str, Any] = {"cwd": cwd, "mcpServers": mcp_servers}
    if session_id is not None:
        params = {"sessionId": session_id, **params}
    if additional_directories:
        params["additionalDirectories"] = additional_directories
    if system_prompt:
        params["systemPrompt"] = {
            "mode": "append",
            "content": [{"type": "text", "text": system_prompt}],
        }
    return params


def answered_id(method: str, response: Any) -> str:
    """The `sessionId` the agent answered `method` (session/new, session/fork) with: a string
    of 1 to `MAX_ID_CHARS` characters, else `ProtocolError` (the client keeps the id, shows it
    and sends it back, as it does a subagent's)."""
    sid = response.get("sessionId") if isinstance(response, dict) else None
    if type(sid) is str and len(sid) > MAX_ID_CHARS:
        raise ProtocolError(
            f"{method} answered with a sessionId of {len(sid):,} characters: not a session id "
            f"(at most {MAX_ID_CHARS:,})"
        )
    if type(sid) is not str or not sid:
        raise ProtocolError(f"{method} answered without a sessionId: {rpc.excerpt(repr(response))}")
    return sid


class Session:
    """An ACP session, from `client.new_session()`, `load_session()` or `resume_session()`.

    `prompt()` assigns input to a turn and returns its handle; `subscribe()` streams what happens;
    `stop()` cancels the running turn. The Python object outlives agent restarts: if the agent
    process dies, the next prompt starts a fresh one and resumes (or reloads, or recreates) the
    session on it.
    """

    def __init__(
        self,
        client: SessionHost,
        session_id: str,
        cwd: str,
        additional_directories: list[str],
        mcp_servers: list[dict[str, Any]],
        system_prompt: str = "",
    ) -> None:
        self._client = client
        self._id = session_id
        self._epoch = client.epoch
        self.cwd = cwd
        self.additional_directories = additional_directories
        self.mcp_servers = mcp_servers
        #: The instructions the session was opened with (`systemPrompt`, append), re-sent when
        #: it is reopened or forked; "" when none was sent.
        self.system_prompt = system_prompt
        opts = client.options
        self._fold = SessionFold(limits=opts.limits)
        # A subagent the agent announces on this session: its updates and requests come here.
        self._fold.children.on_child = lambda child_id: client.registry.adopt(child_id, self)
        self._subscribers: list[Subscriber] = []
        self.permission_policy: PermissionPolicy = opts.permission_policy
        self.permission_handler: PermissionHandler | None = opts.permission_handler
        #: Answers the agent's `elicitation/create` for this session (see client/serving/elicit.py).
        self.elicitation_handler: ElicitationHandler | None = opts.elicitation_handler
        self.workspace = Workspace(
            [cwd, *additional_directories], opts.protected_paths, opts.protect_notebooks
        )
        self.terminals = self._terminals(cwd) if opts.terminal else None
        #: Per turn, the files it wrote through the client; `revert()` puts them back.
        self.checkpoints = Checkpoints(
            [cwd, *additional_directories],
            self.workspace,
            self._state_dir,
            lambda: self.running is not None,
        )
        self.revert = self.checkpoints.revert
        self._requests = AgentRequests(
            self, self._fold, self.workspace, self.terminals, fs=lambda: client.options.fs
        )
        self._requests.checkpoints = self.checkpoints
        self._runner = TurnRunner(
            client,
            self._fold,
            self._emit,
            session_id=lambda: self._id,
            on_current_agent=self._on_current_agent,
            ensure_live=self._ensure_live,
            cancel_permissions=self._requests.cancel_pending,
            terminals=self.terminals,
        )
        self._muted = False  # while a reopen replays history we already have
        self._closed = False
        self._last_mode: str | None = None
        client.task_group.start_soon(self._runner.work, name=f"acp session {session_id}")

    # -- state -----------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The agent's session id (it changes if the agent had to start a new session)."""
        return self._id

    @property
    def client(self) -> SessionHost:
        """The client this session belongs to."""
        return self._client

    @property
    def running(self) -> TurnHandle | None:
        """The turn running now, None between turns."""
        return self._runner.running

    @property
    def closed(self) -> bool:
        """Whether the session was closed (`close()`, or its client closed)."""
        return self._closed

    @property
    def terminal_views(self) -> dict[str, TerminalView]:
        """The client terminals of this session by terminal id, for the views that draw them."""
        return self.terminals.views if self.terminals else {}

    # -- what the agent last told (read-only views of the fold: the fold alone changes them) ------

    @property
    def mode(self) -> str | None:
        return self._fold.facts.current_mode_id

    @property
    def modes(self) -> list[dict[str, Any]]:
        return self._fold.facts.modes

    @property
    def config_options(self) -> list[dict[str, Any]]:
        return self._fold.facts.config_options

    @property
    def commands(self) -> list[dict[str, Any]]:
        return self._fold.facts.commands

    @property
    def title(self) -> str | None:
        title = self._fold.facts.info.get("title")
        return title if isinstance(title, str) else None

    @property
    def info(self) -> dict[str, Any]:
        return self._fold.facts.info

    @property
    def usage(self) -> Usage | None:
        return self._fold.facts.usage

    @property
    def history(self) -> list[TurnRecord]:
        """Every finished turn, including turns replayed by `session/load`."""
        return self._fold.history

    @property
    def ambient(self) -> TurnRecord:
        """Updates that arrived outside any turn."""
        return self._fold.ambient

    @property
    def turn_record(self) -> TurnRecord | None:
        """The live record of the turn in progress (what the agent sent so far), or None.

        For views that redraw a running turn; it is mutated as updates arrive: read, don't keep.
        """
        return self._fold.turn

    # -- subscribers -----------------------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(mutation)` for everything that happens; returns `unsubscribe()`.

        Callbacks run inline, in order, on the event loop: keep them quick.
        """
        self._subscribers.append(callback)
        self._fold.emit = self._emitter()

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)
            self._fold.emit = self._emitter() if self._subscribers else None

        return unsubscribe

    def _emitter(self) -> Callable[[Mutation], None]:
        """What the fold calls per mutation (once per streamed chunk). The usual one subscriber,
        a cell's view, is called straight, guarded as in `_publish`, without its copy and loop."""
        if len(self._subscribers) != 1:
            return self._publish
        callback = self._subscribers[0]

        def emit(mutation: Mutation) -> None:
            try:
                callback(mutation)
            except Exception:  # a broken renderer must not break the stream
                log.exception("acp_notebook subscriber %r failed", callback)

        return emit

    def _publish(self, mutation: Mutation) -> None:
        for callback in tuple(self._subscribers):
            try:
                callback(mutation)
            except Exception:  # a broken renderer must not break the stream
                log.exception("acp_notebook subscriber %r failed", callback)

    # -- prompting -------------------------------------------------------------------------------

    async def prompt(
        self,
        query: str | list[Any],
        *,
        permission_policy: PermissionPolicy | None = None,
        permission_handler: PermissionHandler | None = None,
        output_type: Any = None,
        max_cost: float | CostLimit | None = None,
    ) -> TurnHandle:
        """Assign input to a turn and return its handle at once.

        If a turn is running, the input joins the next turn (two calls may get the same handle).
        `query` is a string or a list of parts: text, `{"type": "context", "tag", "context"}`,
        `{"type": "file", "url": path or data URL}`, or ACP content blocks.
        `permission_policy` and `permission_handler` apply to this turn only (default: the
        session's); input merged into a turn that has its own keeps that turn's.

        `output_type` (a pydantic model or type, or a JSON-schema dict): the answer is validated
        into `result.output`, re-asked once on an error (`client.structured`). `max_cost` (USD):
        a turn whose reported cost passes it is cancelled, and its result is `over_budget`.
        """
        if self._closed:
            raise ClientClosedError("the session is closed")
        parts = content.normalize(query)
        spec, limit = terms(output_type, max_cost, self._runner.queued, parts)
        caps = content.PromptCaps.from_wire(
            (self._client.agent_capabilities or {}).get("promptCapabilities")
        )
        blocks = await load_parts(
            parts,
            caps,
            self.cwd,
            self._state_dir("attachments"),
            [self.cwd, *self.additional_directories],
            self.workspace.protected,
        )
        # A file is read in a thread, which a cancellation waits for; the code after it runs on
        # without a checkpoint. A caller cancelled meanwhile (the chat's Stop, an interrupt) must
        # get the cancellation here, before its input joins a turn it no longer wants.
        await anyio.lowlevel.checkpoint_if_cancelled()
        turn = self._runner.queued
        if turn is not None:
            turn.merge(blocks)
        else:
            turn = self._runner.enqueue(
                TurnHandle(self, blocks, cancel=self._runner.cancel, on_end=self._turn_ended)
            )
        turn.permission_policy = turn.permission_policy or permission_policy
        turn.permission_handler = turn.permission_handler or permission_handler
        turn.add_terms(spec, limit)
        return turn

    def _turn_ended(self, result: TurnResult) -> None:
        self._emit(TurnFinished(result.turn_id, result))

    def _state_dir(self, kind: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in self._id)[:80]
        return Path(self.cwd) / ".acp_notebook" / safe / kind

    def _emit(self, mutation: Mutation) -> None:
        if self._subscribers:
            self._publish(mutation)

    # -- cancellation ----------------------------------------------------------------------------

    async def stop(self) -> TurnResult | None:
        """Cancel the running turn (and input queued behind it); returns the turn's result.

        Sends `session/cancel`, marks unfinished tool calls cancelled, answers pending permission
        requests with `cancelled`, and waits for the agent's answer. An agent that does not answer
        within the grace period (`cancel_grace`, 5 s by default) is killed.
        """
        return await self._runner.stop()

    # -- session operations ----------------------------------------------------------------------

    async def set_mode(self, mode_id: str) -> None:
        """`session/set_mode` (legacy modes; prefer config options where the agent has them)."""
        check_mode(self.modes, self.mode, mode_id)
        await self._ensure_live()
        await self._client.request(
            methods.SESSION_SET_MODE, {"sessionId": self._id, "modeId": mode_id}
        )
        self._fold.facts.set_mode(mode_id)
        self._last_mode = mode_id

    async def set_config_option(self, config_id: str, value: str | bool) -> list[dict[str, Any]]:
        """`session/set_config_option`; returns (and keeps) the complete new option list."""
        params = {"sessionId": self._id, **config_change(self.config_options, config_id, value)}
        await self._ensure_live()
        response = await self._client.request(methods.SESSION_SET_CONFIG_OPTION, params)
        if isinstance(response, dict):
            self._fold.facts.set_config_options(response.get("configOptions"))
        return self.config_options

    def setup_params(self, session_id: str) -> dict[str, Any]:
        """The params that reopen (load, resume) or fork `session_id` as this session was
        opened: its workspace, MCP servers and system prompt."""
        return setup_params(
            session_id, self.cwd, self.mcp_servers, self.additional_directories, self.system_prompt
        )

    async def snapshot(self) -> str:
        """`session/fork` of this session as it stands (unstable, `sessionCapabilities.fork`),
        kept as a point to fork from later (`client.fork_session`): the fork's id. The client
        neither routes nor keeps it open: its updates are dropped quietly, and it is closed at
        once where the agent can close sessions (a fork is made from its saved conversation)."""
        client = self._client
        if client.session_capabilities.get("fork") is None:
            raise CapabilityError(f"{client.agent_name} cannot fork sessions")
        if self.running is not None:
            raise CapabilityError("the session has a turn running: no point to fork from")
        await self._ensure_live()
        with client.registry.opening():
            response = await client.request(methods.SESSION_FORK, self.setup_params(self._id))
            sid = answered_id(methods.SESSION_FORK, response)
            client.registry.ignore(sid)
        if client.session_capabilities.get("close") is not None:
            with anyio.move_on_after(5), contextlib.suppress(RequestError):
                await client.request(methods.SESSION_CLOSE, {"sessionId": sid})
        return sid

    async def close(self) -> None:
        """End the session: cancel its turn, kill its terminals, `session/close` if supported."""
        if self._closed:
            return
        client = self._client
        with anyio.CancelScope(shield=True):
            if self._runner.busy:
                with anyio.move_on_after(client.options.cancel_grace + 2):
                    await self.stop()
            self._closed = True
            self._runner.shutdown()
            if self.terminals is not None:
                await self.terminals.aclose()
            conn = client.connection
            if (
                client.session_capabilities.get("close") is not None
                and conn is not None
                and conn.closed is None
                and self._on_current_agent()
            ):
                with anyio.move_on_after(5), contextlib.suppress(Exception):
                    await client.request(methods.SESSION_CLOSE, {"sessionId": self._id})
            client.registry.forget(self)

    async def delete(self) -> None:
        """Close the session, then `session/delete` it at the agent (gone from its list)."""
        await self._client.delete_session(self._id)

    # -- what the client and the runner use ------------------------------------------------------

    def receive(self, update: Any) -> None:
        """A `session/update` the agent sent for this session (the client routes it here)."""
        if not self._muted:
            self._fold.apply(update)
            if self._runner.budgeted:  # most turns have no budget: no call per streamed chunk
                self._runner.watch_cost()

    def receive_child(self, child_id: str, update: Any) -> None:
        """A `session/update` for a subagent announced on this session: into its card."""
        if not self._muted:
            self._fold.children.apply(child_id, update)

    def client_call(
        self, kind: str, title: str, content: list[dict[str, Any]]
    ) -> ToolCallPart | None:
        """A tool call the client makes for the agent (the kernel tools' `run_code`): a card in
        the running turn like the agent's, but the client's own (`SessionFold.client_call`: an
        id the agent cannot guess, and its updates for it refused). None if the turn is past
        its limits and could not show it whole. Ask about it with `ask_for`, change it with
        `client_update`."""
        return self._fold.client_call(kind, title, content)

    def client_update(self, call: ToolCallPart, status: str, content: list[dict[str, Any]]) -> None:
        """The client's own `call` is `status` now and shows `content`."""
        self._fold.client_update(call, status, content)

    async def ask_for(self, call: ToolCallPart, options: list[dict[str, Any]]) -> Any:
        """Ask permission for the client's own `call` (same policy, handler, buttons and
        record as the agent's requests); the `session/request_permission` answer."""
        return await self._requests.ask_for_client(call, options)

    def report(self, message: str, level: str = "error") -> None:
        """Show the client's `message` in the running turn (outside a turn: in `ambient`)."""
        self._fold.add_error(message, level)

    def apply_answer(self, response: Any) -> None:
        """Keep the modes and config options of a session/new, load or resume answer."""
        if isinstance(response, dict):
            self._fold.facts.set_modes(response.get("modes"))
            self._fold.facts.set_config_options(response.get("configOptions"))

    def begin_replay(self) -> None:
        """session/load is about to replay the conversation: it becomes `history`."""
        self._fold.begin_replay()

    def end_replay(self) -> None:
        """A `session/load` replay is over: updates from now on belong to live turns."""
        self._fold.end_replay()

    def discard(self) -> None:
        """The session never opened (its session/load failed): closed, telling nobody."""
        self._closed = True
        self._runner.shutdown()

    async def handle(self, method: str, params: Any) -> Any:
        """Answer a request the agent sent about this session (permission, fs/*, terminal/*)."""
        return await self._requests.handle(method, params)

    def _terminals(self, cwd: str) -> Terminals:
        client = self._client
        return Terminals(
            client.task_group,
            self.workspace,
            cwd,
            self._terminal_output,
            client.terminal_slots,
            client.options.terminal_output_limit,
        )

    def _terminal_output(self, view: TerminalView, text: str) -> None:
        if self._subscribers:
            turn_id = self._fold.turn.turn_id if self._fold.turn else None
            self._publish(Delta(turn_id, view.terminal_id, "terminal", text))

    # -- agent restarts --------------------------------------------------------------------------

    def _on_current_agent(self) -> bool:
        """Whether the session is open on the client's current agent process."""
        return self._epoch == self._client.epoch

    async def _ensure_live(self) -> None:
        await self._client.live_connection()
        if not self._on_current_agent():
            await self._reopen()

    async def _reopen(self) -> None:
        """Re-establish this session on a fresh agent process."""
        client = self._client
        old = self._id
        base = self.setup_params(old)
        response: Any = None
        try:
            if client.session_capabilities.get("resume") is not None:
                response = await client.request(methods.SESSION_RESUME, base)
            elif client.agent_capabilities.get("loadSession"):
                self._muted = True  # the replay is history we already hold
                try:
                    response = await client.request(methods.SESSION_LOAD, base)
                finally:
                    self._muted = False
            else:
                raise CapabilityError("no resume")
        except (CapabilityError, RequestError):
            new_id, response = await client.open_new(
                self.cwd, self.mcp_servers, self.additional_directories, self.system_prompt
            )
            self._id = new_id
            self._fold.add_error(
                "the agent was restarted and cannot resume sessions: this is a "
                "new session, without the earlier conversation",
                "warning",
            )
            self._emit(SessionChanged("session_id"))
        self._epoch = client.epoch
        client.registry.register(self, old)
        self.apply_answer(response)
        if self._last_mode is not None and self._last_mode != self.mode:
            with contextlib.suppress(RequestError):
                await client.request(
                    methods.SESSION_SET_MODE, {"sessionId": self._id, "modeId": self._last_mode}
                )

    def __repr__(self) -> str:
        return f"<Session {self._id} agent={self._client.agent_name!r} cwd={self.cwd!r}>"
