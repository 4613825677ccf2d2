"""A session: its state, its turns, and the agent's requests that belong to it."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import (
    AgentExitedError,
    AgentStartError,
    CapabilityError,
    ClientClosedError,
    NotOfferedError,
    ProtocolError,
    RequestError,
    RequestTimeoutError,
)
from ..protocol import content
from ..protocol import jsonrpc as rpc
from ..protocol.fold import SessionFold
from ..protocol.limits import token_counts
from ..protocol.mutations import (
    Delta,
    Mutation,
    RequestWarning,
    SessionChanged,
    TurnFinished,
    TurnStarted,
)
from ..protocol.result import TurnRecord, TurnResult, finish
from ..protocol.state import PermissionPart, TerminalView, Usage
from .attachments import load_parts
from .connection import RpcError
from .permissions import (
    Assessment,
    PermissionHandler,
    PermissionPolicy,
    PermissionRequest,
    assess,
    pick_option,
)
from .terminal import Terminals
from .turn import TurnHandle
from .workspace import Workspace

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("acp_notebook")

Subscriber = Callable[[Mutation], None]


class Session:
    """An ACP session, from `client.new_session()`, `load_session()` or `resume_session()`.

    `prompt()` assigns input to a turn and returns its handle; `subscribe()` streams what happens;
    `stop()` cancels the running turn. The Python object outlives agent restarts: if the agent
    process dies, the next prompt starts a fresh one and resumes (or reloads, or recreates) the
    session on it.
    """

    def __init__(self, client: Client, session_id: str, cwd: str,
                 additional_directories: list[str], mcp_servers: list[dict[str, Any]]) -> None:
        self._client = client
        self._id = session_id
        self._epoch = client._epoch
        self.cwd = cwd
        self.additional_directories = additional_directories
        self.mcp_servers = mcp_servers
        opts = client.options
        self._fold = SessionFold(limits=opts.limits)
        self._subscribers: list[Subscriber] = []
        self.permission_policy: PermissionPolicy = opts.permission_policy
        self.permission_handler: PermissionHandler | None = opts.permission_handler
        self.workspace = Workspace([cwd, *additional_directories], opts.protected_paths,
                                   opts.protect_notebooks)
        self.terminals = (Terminals(client._tg, self.workspace, cwd, self._terminal_output,
                                    client.terminal_slots, opts.terminal_output_limit)
                          if opts.terminal else None)
        self._next: TurnHandle | None = None
        self._running: TurnHandle | None = None
        self._wake = anyio.Event()
        self._permissions: dict[str, tuple[PermissionPart, anyio.CancelScope]] = {}
        self._muted = False  # while a reopen replays history we already have
        self._closed = False
        self._last_mode: str | None = None
        client._tg.start_soon(self._worker, name=f"acp session {session_id}")

    # -- state -----------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The agent's session id (it changes if the agent had to start a new session)."""
        return self._id

    @property
    def client(self) -> Client:
        return self._client

    @property
    def mode(self) -> str | None:
        return self._fold.current_mode_id

    @property
    def modes(self) -> list[dict[str, Any]]:
        return self._fold.modes

    @property
    def config_options(self) -> list[dict[str, Any]]:
        return self._fold.config_options

    @property
    def commands(self) -> list[dict[str, Any]]:
        return self._fold.commands

    @property
    def title(self) -> str | None:
        title = self._fold.info.get("title")
        return title if isinstance(title, str) else None

    @property
    def info(self) -> dict[str, Any]:
        return self._fold.info

    @property
    def usage(self) -> Usage | None:
        return self._fold.usage

    @property
    def history(self) -> list[TurnRecord]:
        """Every finished turn, including turns replayed by `session/load`."""
        return self._fold.history

    @property
    def ambient(self) -> TurnRecord:
        """Updates that arrived outside any turn."""
        return self._fold.ambient

    @property
    def running(self) -> TurnHandle | None:
        return self._running

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def terminal_views(self) -> dict[str, TerminalView]:
        return self.terminals.views if self.terminals else {}

    # -- subscribers -----------------------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(mutation)` for everything that happens; returns `unsubscribe()`.

        Callbacks run inline, in order, on the event loop: keep them quick.
        """
        self._subscribers.append(callback)
        self._fold.emit = self._publish

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)
            if not self._subscribers:
                self._fold.emit = None

        return unsubscribe

    def _publish(self, mutation: Mutation) -> None:
        for callback in tuple(self._subscribers):
            try:
                callback(mutation)
            except Exception:  # a broken renderer must not break the stream
                log.exception("acp_notebook subscriber %r failed", callback)

    def _on_update(self, update: Any) -> None:
        if not self._muted:
            self._fold.apply(update)

    # -- prompting -------------------------------------------------------------------------------

    async def prompt(self, query: str | list[Any], *,
                     permission_policy: PermissionPolicy | None = None,
                     permission_handler: PermissionHandler | None = None) -> TurnHandle:
        """Assign input to a turn and return its handle at once.

        If a turn is running, the input joins the next turn (two calls may get the same handle).
        `query` is a string or a list of parts: text, `{"type": "context", "tag", "context"}`,
        `{"type": "file", "url": path or data URL}`, or ACP content blocks.
        `permission_policy` and `permission_handler` apply to this turn only (default: the
        session's); input merged into a turn that has its own keeps that turn's.
        """
        if self._closed:
            raise ClientClosedError("the session is closed")
        parts = content.normalize(query)
        caps = content.PromptCaps.from_wire(
            (self._client.agent_capabilities or {}).get("promptCapabilities"))
        blocks = await load_parts(parts, caps, self.cwd, self._attachment_dir())
        turn = self._next
        if turn is not None:
            turn.merge(blocks)
        else:
            turn = self._next = TurnHandle(self, blocks)
            self._wake.set()
        turn.permission_policy = turn.permission_policy or permission_policy
        turn.permission_handler = turn.permission_handler or permission_handler
        return turn

    def _attachment_dir(self) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in self._id)[:80]
        return Path(self.cwd) / ".acp_notebook" / safe / "attachments"

    async def _worker(self) -> None:
        while not self._closed:
            await self._wake.wait()
            self._wake = anyio.Event()
            while self._next is not None:
                turn, self._next = self._next, None
                self._running = turn
                try:
                    await self._run(turn)
                except BaseException as exc:
                    # The worker itself was cancelled (the client's task group is torn down by an
                    # outer cancel scope or an interrupt) or hit a bug: the turn must still end,
                    # or stop(), close() and anyone awaiting `turn.finished` would wait forever.
                    self._abandon(turn, exc)
                    if not isinstance(exc, Exception):
                        raise  # cancellation goes on; a bug in one turn must not end the client
                    log.exception("acp_notebook: turn %s failed inside the client", turn.id)
                finally:
                    self._running = None

    async def _run(self, turn: TurnHandle) -> None:
        fold = self._fold
        opts = self._client.options
        record = fold.begin_turn(turn.id, turn.prompt)
        record.terminals = {}
        self._emit(TurnStarted(turn.id))
        stop_reason: str | None = None
        error: str | None = None
        tokens: dict[str, Any] | None = None
        max_attempts = opts.max_retries + 1
        attempt = 0
        while True:
            attempt += 1
            retryable = False
            if turn.cancel_requested:
                stop_reason = "cancelled"
                break
            try:
                await self._ensure_live()
                if turn.cancelling():
                    # stop() came while the agent (re)started or the session reopened: there
                    # was nothing to send session/cancel on, so it was lost and the prompt went
                    # out anyway. Not sending it is the cancellation.
                    stop_reason = "cancelled"
                    break
                response = None
                turn._abandon_scope = anyio.CancelScope()  # a scope is entered once: per attempt
                with turn._abandon_scope:
                    response = await self._client._request(
                        "session/prompt", {"sessionId": self._id, "prompt": turn.prompt},
                        deadline=False)
                if turn._abandon_scope.cancelled_caught:
                    stop_reason = "cancelled"
                    error = (f"the agent did not answer session/cancel within "
                             f"{opts.cancel_grace:g} s; the turn was given up (not the agent: "
                             "other sessions are using it)")
                    break
                response = response if isinstance(response, dict) else {}
                stop_reason = str(response.get("stopReason") or "end_turn")
                tokens = token_counts(response.get("usage"), opts.limits)
                break
            except RequestError as exc:
                if turn.cancelling():  # a cancellation-looking error is a cancellation
                    stop_reason = "cancelled"
                    break
                error = str(exc)
                retryable = exc.code == rpc.INTERNAL_ERROR
            except (AgentExitedError, ProtocolError) as exc:
                if turn.cancelling():
                    stop_reason = "cancelled"
                    if self._client._killed_for_cancel:
                        error = (f"the agent did not answer session/cancel within "
                                 f"{opts.cancel_grace:g} s and was stopped; the next prompt "
                                 "starts a fresh agent process")
                    break
                error = str(exc)
                retryable = True
            except (ClientClosedError, AgentStartError, RequestTimeoutError) as exc:
                # AgentStartError: the agent died and the fresh process cannot start (a bad
                # key, a removed binary). It used to escape the worker and take down the client
                # with every session; it fails this turn, and the next prompt tries again.
                # RequestTimeoutError: reopening the session on a fresh agent was not answered.
                error = str(exc)
            will_retry = (retryable and not fold.visible_output and attempt < max_attempts
                          and not turn.cancelling())
            self._emit(RequestWarning(error or "request failed", "model_request", turn.id,
                                      attempt, max_attempts, will_retry))
            if not will_retry:
                break
            fold.add_error(f"attempt {attempt} of {max_attempts} failed, retrying: {error}",
                           "warning")
            error = None
            await anyio.sleep(opts.retry_backoff * attempt)
        if error is not None:
            fold.add_error(error)
            # The agent failed or died mid-turn: nothing will finish its tool calls, and the
            # record (and a saved notebook) must not show them running forever.
            fold.mark_unfinished("failed")
        self._resolve_pending_permissions(None, "cancel")
        if self.terminals is not None:
            ids = record.terminal_ids()
            if stop_reason != "end_turn" or error is not None:
                self.terminals.kill_many(ids)
                # Killed commands exit within milliseconds: wait so the record shows how.
                with anyio.move_on_after(1.0):
                    await self.terminals.wait_exited(ids)
            record.terminals = {tid: v for tid, v in self.terminals.views.items() if tid in ids}
        fold.end_turn()
        result = finish(record, stop_reason=stop_reason, error=error, usage=fold.usage,
                        session_id=self._id, agent=self._client.agent_name, tokens=tokens)
        turn._resolve(result)
        self._emit(TurnFinished(turn.id, result))

    def _abandon(self, turn: TurnHandle, exc: BaseException) -> None:
        if turn.result is not None:
            return
        self._resolve_pending_permissions(None, "cancel")
        cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
        record = self._fold.end_turn() or TurnRecord(turn_id=turn.id, prompt=turn.prompt)
        result = finish(record, stop_reason="cancelled" if cancelled else None,
                        error=("the client was closed while the turn ran" if cancelled
                               else f"client error: {type(exc).__name__}: {exc}"),
                        usage=self._fold.usage, session_id=self._id,
                        agent=self._client.agent_name)
        turn._resolve(result)
        self._emit(TurnFinished(turn.id, result))

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
        queued, running = self._next, self._running
        if queued is not None:
            await self._cancel_turn(queued)
        if running is None:
            return None
        await self._cancel_turn(running)
        return await running.wait()

    async def _cancel_turn(self, turn: TurnHandle) -> None:
        if turn.result is not None or turn.cancel_requested:
            return
        turn.cancel_requested = True
        if turn is self._next:  # never sent: it ends cancelled without reaching the agent
            self._next = None
            record = TurnRecord(turn_id=turn.id, prompt=turn.prompt)
            result = finish(record, stop_reason="cancelled", error=None, usage=self.usage,
                            session_id=self._id, agent=self._client.agent_name)
            turn._resolve(result)
            self._emit(TurnFinished(turn.id, result))
            return
        if turn is not self._running:
            return
        self._fold.mark_cancelled()
        self._resolve_pending_permissions(None, "cancel")
        conn = self._client._connection
        if conn is not None and conn.closed is None and self._epoch == self._client._epoch:
            with contextlib.suppress(Exception):
                await conn.notify("session/cancel", {"sessionId": self._id})
            self._client._tg.start_soon(self._cancel_watchdog, turn, conn)

    async def _cancel_watchdog(self, turn: TurnHandle, conn: Any) -> None:
        with anyio.move_on_after(self._client.options.cancel_grace):
            await turn._done.wait()
            return
        if turn.result is None and conn is self._client._connection:
            others = [s for s in self._client.sessions if s is not self and s.running]
            if others:
                # Killing the shared process would fail their turns too: give this one up
                # ($/cancel_request goes out) and leave the agent to them.
                turn._abandon_scope.cancel()
            else:
                self._client._kill_for_cancel()

    # -- requests from the agent -----------------------------------------------------------------

    async def handle(self, method: str, params: Any) -> Any:
        if method == "session/request_permission":
            return await self._request_permission(params)
        if method == "fs/read_text_file" and self._client.options.fs:
            return await self.workspace.read(params)
        if method == "fs/write_text_file" and self._client.options.fs:
            # A turn that changed something must not be re-sent by a retry: it would act twice.
            self._fold.visible_output = True
            return await self.workspace.write(params)
        if method.startswith("terminal/") and self.terminals is not None:
            handler = {
                "terminal/create": self.terminals.create,
                "terminal/output": self.terminals.output,
                "terminal/wait_for_exit": self.terminals.wait_for_exit,
                "terminal/kill": self.terminals.kill,
                "terminal/release": self.terminals.release,
            }.get(method)
            if handler is not None:
                if method == "terminal/create":
                    self._fold.visible_output = True  # a command ran: no retry either
                result = await handler(params)
                if method == "terminal/create":
                    self._track_terminal(result["terminalId"])
                return result
        raise RpcError(rpc.METHOD_NOT_FOUND, f"method not found: {method}")

    async def _request_permission(self, params: Any) -> dict[str, Any]:
        # The agent is not trusted: `assess` decides what the request is taken to be, and only
        # a regular request of known kinds may be allowed by the policy (see permissions.py).
        raw_call = params.get("toolCall") if isinstance(params, dict) else None
        call_id = raw_call.get("toolCallId") if isinstance(raw_call, dict) else None
        earlier = self._fold.target.tool_calls.get(call_id) if isinstance(call_id, str) else None
        request = assess(params, earlier)
        options = request.options
        part = self._fold.add_permission(request.tool_call, options)
        if request.problems:
            self._fold.add_error("the policy cannot decide this permission request: "
                                 + "; ".join(request.problems), "warning")
        running = self._running
        if running is not None and running.cancel_requested:
            self._fold.resolve_permission(part, None, "cancel")
            return _outcome(None)
        policy = (running.permission_policy if running is not None else None) \
            or self.permission_policy
        handler = (running.permission_handler if running is not None else None) \
            or self.permission_handler
        decision = policy.judge(request)
        option_id = pick_option(options, "allow") if decision == "allow" else None
        if decision == "allow" and option_id is None:
            decision = "ask"  # allowed, but no allow option offered: never pick another kind
        by = "policy"
        if decision == "ask" and handler is not None and options:
            return await self._ask(handler, request, part)
        if decision != "allow":
            # "reject", or "ask" with nobody to ask: fail closed. No reject option offered:
            # `cancelled`, the one outcome that allows nothing.
            option_id = pick_option(options, "reject")
            by = "policy" if decision == "reject" else "policy (nobody to ask)"
        self._fold.resolve_permission(part, option_id, by)
        return _outcome(option_id)

    async def _ask(self, handler: PermissionHandler, request: Assessment,
                   part: PermissionPart) -> dict[str, Any]:
        options = request.options
        option_id: str | None = None
        by = "user"
        scope = anyio.CancelScope()
        self._permissions[part.part_id] = (part, scope)
        try:
            with scope:
                try:
                    option_id = await handler(PermissionRequest(
                        part, request.label, request.tool_call, self._id, request.problems))
                except Exception as exc:  # the handler gave up (a timeout, a bug): fail closed
                    option_id, by = None, f"rejected: {exc or type(exc).__name__}"
                if option_id is not None and option_id not in {o["optionId"] for o in options}:
                    raise RpcError(rpc.INVALID_PARAMS, f"unknown option id {option_id!r}")
                if option_id is None:
                    option_id = pick_option(options, "reject")
            if scope.cancelled_caught:  # stop()
                if part.outcome == "pending":
                    self._fold.resolve_permission(part, None, "cancel")
                return _outcome(None)
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside this scope (the agent's $/cancel_request, the
            # connection closing): the connection answers `cancelled`; record it so too,
            # instead of leaving the request "pending" in the turn forever.
            if part.outcome == "pending":
                self._fold.resolve_permission(part, None, "cancel")
            raise
        finally:
            self._permissions.pop(part.part_id, None)
        self._fold.resolve_permission(part, option_id, by)
        return _outcome(option_id)

    def _resolve_pending_permissions(self, option_id: str | None, by: str) -> None:
        for part, scope in list(self._permissions.values()):
            if part.outcome == "pending":
                self._fold.resolve_permission(part, option_id, by)
            scope.cancel()

    def _track_terminal(self, terminal_id: str) -> None:
        record = self._fold.turn
        if record is not None and self.terminals is not None:
            record.terminals[terminal_id] = self.terminals.views[terminal_id]

    def _terminal_output(self, view: TerminalView, text: str) -> None:
        if self._subscribers:
            turn_id = self._fold.turn.turn_id if self._fold.turn else None
            self._publish(Delta(turn_id, view.terminal_id, "terminal", text))

    # -- session operations ----------------------------------------------------------------------

    async def set_mode(self, mode_id: str) -> None:
        """`session/set_mode` (legacy modes; prefer config options where the agent has them)."""
        if not self.modes and not self.mode:
            raise CapabilityError("the agent offers no session modes")
        known = {m.get("id") for m in self.modes}
        if known and mode_id not in known:
            raise NotOfferedError(f"unknown mode {mode_id!r}; the agent offers: "
                                  f"{', '.join(sorted(str(k) for k in known))}")
        await self._ensure_live()
        await self._client._request("session/set_mode", {"sessionId": self._id, "modeId": mode_id})
        self._fold.current_mode_id = mode_id
        self._last_mode = mode_id
        self._emit(SessionChanged("mode"))

    async def set_config_option(self, config_id: str, value: str | bool) -> list[dict[str, Any]]:
        """`session/set_config_option`; returns (and keeps) the complete new option list."""
        option = next((o for o in self.config_options if o.get("id") == config_id), None)
        if option is None:
            offered = ", ".join(str(o.get("id")) for o in self.config_options) or "none"
            raise NotOfferedError(
                f"unknown config option {config_id!r}; the agent offers: {offered}")
        params: dict[str, Any] = {"sessionId": self._id, "configId": config_id, "value": value}
        if option.get("type") == "boolean":
            if not isinstance(value, bool):
                raise NotOfferedError(f"config option {config_id!r} takes true or false")
            params["type"] = "boolean"
        elif isinstance(value, bool):
            # A bool for a select option used to be sent as a boolean change, which the agent
            # can only refuse: a bad value is a ValueError before anything is sent.
            raise NotOfferedError(f"config option {config_id!r} takes one of its values, "
                                  f"not {value!r}")
        else:
            allowed = _select_values(option)
            if allowed and value not in allowed:
                raise NotOfferedError(f"{value!r} is not a value of {config_id!r}; choose from: "
                                      f"{', '.join(sorted(allowed))}")
        await self._ensure_live()
        response = await self._client._request("session/set_config_option", params)
        if isinstance(response, dict):
            self._fold.set_config_options(response.get("configOptions"))
        return self.config_options

    async def close(self) -> None:
        """End the session: cancel its turn, kill its terminals, `session/close` if supported."""
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            if self._running is not None or self._next is not None:
                with anyio.move_on_after(self._client.options.cancel_grace + 2):
                    await self.stop()
            self._closed = True
            self._wake.set()
            if self.terminals is not None:
                await self.terminals.aclose()
            caps = self._client.session_capabilities
            conn = self._client._connection
            if (caps.get("close") is not None and conn is not None and conn.closed is None
                    and self._epoch == self._client._epoch):
                with anyio.move_on_after(5), contextlib.suppress(Exception):
                    await self._client._request("session/close", {"sessionId": self._id})
            self._client._forget(self)

    # -- agent restarts --------------------------------------------------------------------------

    async def _ensure_live(self) -> None:
        await self._client._live_connection()
        if self._epoch != self._client._epoch:
            await self._reopen()

    async def _reopen(self) -> None:
        """Re-establish this session on a fresh agent process."""
        client = self._client
        old = self._id
        base = {"sessionId": old, "cwd": self.cwd, "mcpServers": self.mcp_servers}
        if self.additional_directories:
            base["additionalDirectories"] = self.additional_directories
        response: Any = None
        try:
            if client.session_capabilities.get("resume") is not None:
                response = await client._request("session/resume", base)
            elif client.agent_capabilities.get("loadSession"):
                self._muted = True  # the replay is history we already hold
                try:
                    response = await client._request("session/load", base)
                finally:
                    self._muted = False
            else:
                raise CapabilityError("no resume")
        except (CapabilityError, RequestError):
            new_id, response = await client._open_new(self.cwd, self.mcp_servers,
                                                       self.additional_directories)
            self._id = new_id
            self._fold.add_error("the agent was restarted and cannot resume sessions: this is a "
                                 "new session, without the earlier conversation", "warning")
            self._emit(SessionChanged("session_id"))
        self._epoch = client._epoch
        client._register(self, old)
        if isinstance(response, dict):
            self._fold.set_modes(response.get("modes"))
            self._fold.set_config_options(response.get("configOptions"))
        if self._last_mode is not None and self._last_mode != self.mode:
            with contextlib.suppress(RequestError):
                await client._request("session/set_mode",
                                      {"sessionId": self._id, "modeId": self._last_mode})

    def __repr__(self) -> str:
        return f"<Session {self._id} agent={self._client.agent_name!r} cwd={self.cwd!r}>"


def _outcome(option_id: str | None) -> dict[str, Any]:
    if option_id is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def _select_values(option: dict[str, Any]) -> set[str]:
    values: set[str] = set()
    for item in option.get("options") or []:
        if isinstance(item, dict) and "value" in item:
            values.add(str(item["value"]))
        elif isinstance(item, dict):  # a group
            values.update(str(o.get("value")) for o in item.get("options") or []
                          if isinstance(o, dict))
    return values

