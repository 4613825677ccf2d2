"""Serving the agent's requests for one session: permission, fs/*, terminal/*.

The agent is not trusted: permission requests are read by `permissions.assess` and decided by
the turn's (or the session's) policy and handler; files go through the session's `Workspace`;
commands through its `Terminals`. What happens is recorded in the session's fold.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio

from ...errors import ElicitationError, RpcError
from ...protocol import jsonrpc as rpc
from ...protocol import methods
from ...protocol.elicitation import ElicitationPart
from ...protocol.fold import SessionFold
from ...protocol.state import PermissionPart, ToolCallPart
from ..turn import TurnHandle
from .checkpoints import Checkpoints
from .elicit import ElicitationHandler, answer
from .permissions import (
    Assessment,
    PermissionHandler,
    PermissionPolicy,
    PermissionRequest,
    assess,
    pick_option,
)
from .terminal import Terminals
from .workspace import Workspace


class RequestOwner(Protocol):
    """What serving needs of its session (the `Session` provides it)."""

    permission_policy: PermissionPolicy
    permission_handler: PermissionHandler | None
    elicitation_handler: ElicitationHandler | None

    @property
    def id(self) -> str: ...
    @property
    def running(self) -> TurnHandle | None: ...


class AgentRequests:
    """Answers the requests the agent sends about one session."""

    def __init__(
        self,
        owner: RequestOwner,
        fold: SessionFold,
        workspace: Workspace,
        terminals: Terminals | None,
        fs: Callable[[], bool],
    ) -> None:
        self._owner = owner
        self._fold = fold
        self._workspace = workspace
        self._terminals = terminals
        self._fs = fs  # read when asked: fs/* is served only if the client offered it
        #: Keeps each file's previous content before a write (None: no checkpoints).
        self.checkpoints: Checkpoints | None = None
        # Pending requests, by part id: the part, its scope, the fold it is recorded in (the
        # session's, or a subagent's).
        self._permissions: dict[str, tuple[PermissionPart, anyio.CancelScope, SessionFold]] = {}
        self._elicitations: dict[str, tuple[ElicitationPart, anyio.CancelScope, SessionFold]] = {}

    async def handle(self, method: str, params: Any) -> Any:
        """Answer one request; unknown or not offered: METHOD_NOT_FOUND."""
        if method == methods.REQUEST_PERMISSION:
            return await self._request_permission(params)
        if method == methods.ELICITATION_CREATE:
            return await self._elicit(params)
        if method == methods.FS_READ_TEXT_FILE and self._fs():
            return await self._workspace.read(params)
        if method == methods.FS_WRITE_TEXT_FILE and self._fs():
            # A turn that changed something must not be re-sent by a retry: it would act twice.
            self._fold.visible_output = True
            if self.checkpoints is None:
                return await self._workspace.write(params)
            running = self._owner.running  # the previous content is kept first (revert)
            return await self.checkpoints.around(params, running.id if running else None)
        if method in methods.TERMINAL_METHODS and self._terminals is not None:
            return await self._terminal(self._terminals, method, params)
        raise RpcError(rpc.METHOD_NOT_FOUND, f"method not found: {method}")

    async def _terminal(self, terminals: Terminals, method: str, params: Any) -> Any:
        handler: Callable[[Any], Awaitable[Any]] = {
            methods.TERMINAL_CREATE: terminals.create,
            methods.TERMINAL_OUTPUT: terminals.output,
            methods.TERMINAL_WAIT_FOR_EXIT: terminals.wait_for_exit,
            methods.TERMINAL_KILL: terminals.kill,
            methods.TERMINAL_RELEASE: terminals.release,
        }[method]
        if method == methods.TERMINAL_CREATE:
            self._fold.visible_output = True  # a command ran: no retry either
        result = await handler(params)
        if method == methods.TERMINAL_CREATE:
            self._track_terminal(terminals, result["terminalId"])
        return result

    def _track_terminal(self, terminals: Terminals, terminal_id: str) -> None:
        record = self._fold.turn
        if record is not None:
            record.terminals[terminal_id] = terminals.views[terminal_id]

    # -- permissions -----------------------------------------------------------------------------

    async def ask_for_client(
        self, call: ToolCallPart, options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The client's own permission request about `call`, a tool call it made itself
        (`SessionFold.client_call`): the same assessment, policy, handler and buttons as the
        agent's requests, about the call as the client made it (nothing the agent sent is in
        it, nor can be: the fold refuses the agent's updates for the call)."""
        # All of the call as it is shown (a handler in Python sees the code the person would).
        tool_call = {
            "toolCallId": call.tool_call_id,
            "kind": call.tool_kind,
            "title": call.title,
            "content": list(call.content),
        }
        params = {"sessionId": self._owner.id, "toolCall": tool_call, "options": options}
        return await self._request_permission(params, call)

    async def _request_permission(
        self, params: Any, own: ToolCallPart | None = None
    ) -> dict[str, Any]:
        # The agent is not trusted: `assess` decides what the request is taken to be, and only
        # a regular request of known kinds may be allowed by the policy (see permissions.py).
        # `own`: the client's own call, which the request (built by the client) is about.
        fold, subagent = self._fold_for(params) if own is None else (self._fold, None)
        raw_call = params.get("toolCall") if isinstance(params, dict) else None
        call_id = raw_call.get("toolCallId") if isinstance(raw_call, dict) else None
        if own is None and fold.refused(methods.REQUEST_PERMISSION, call_id):
            return _outcome(None)  # about the client's own call: nothing of it is the agent's
        if own is not None:
            earlier: ToolCallPart | None = own
        else:
            earlier = fold.target.tool_calls.get(call_id) if isinstance(call_id, str) else None
        request = assess(params, earlier)
        options = request.options
        part = (
            fold.add_client_permission(own, options)
            if own is not None
            else fold.add_permission(request.tool_call, options)
        )
        if request.problems:
            fold.add_error(
                "the policy cannot decide this permission request: " + "; ".join(request.problems),
                "warning",
            )
        running = self._owner.running
        if running is not None and running.cancel_requested:
            fold.resolve_permission(part, None, "cancel")
            return _outcome(None)
        policy = (
            running.permission_policy if running is not None else None
        ) or self._owner.permission_policy
        handler = (
            running.permission_handler if running is not None else None
        ) or self._owner.permission_handler
        decision = policy.judge(request)
        option_id = pick_option(options, "allow") if decision == "allow" else None
        if decision == "allow" and option_id is None:
            decision = "ask"  # allowed, but no allow option offered: never pick another kind
        by = "policy"
        if decision == "ask" and handler is not None and options:
            return await self._ask(handler, request, part, fold, subagent)
        if decision != "allow":
            # "reject", or "ask" with nobody to ask: fail closed. No reject option offered:
            # `cancelled`, the one outcome that allows nothing.
            option_id = pick_option(options, "reject")
            by = "policy" if decision == "reject" else "policy (nobody to ask)"
        fold.resolve_permission(part, option_id, by)
        return _outcome(option_id)

    async def _ask(
        self,
        handler: PermissionHandler,
        request: Assessment,
        part: PermissionPart,
        fold: SessionFold,
        subagent: str | None,
    ) -> dict[str, Any]:
        options = request.options
        option_id: str | None = None
        by = "user"
        scope = anyio.CancelScope()
        self._permissions[part.part_id] = (part, scope, fold)
        try:
            with scope:
                try:
                    option_id = await handler(
                        PermissionRequest(
                            part,
                            request.label,
                            request.tool_call,
                            self._owner.id,
                            request.problems,
                            subagent,
                        )
                    )
                except Exception as exc:  # the handler gave up (a timeout, a bug): fail closed
                    # str(exc), not exc: an exception object is always true, and TimeoutError()
                    # would be recorded as "rejected: " with no reason at all.
                    option_id, by = None, f"rejected: {str(exc) or type(exc).__name__}"
                if option_id is not None and option_id not in {o["optionId"] for o in options}:
                    raise RpcError(rpc.INVALID_PARAMS, f"unknown option id {option_id!r}")
                if option_id is None:
                    option_id = pick_option(options, "reject")
            if scope.cancelled_caught:  # stop()
                if part.outcome == "pending":
                    fold.resolve_permission(part, None, "cancel")
                return _outcome(None)
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside this scope (the agent's $/cancel_request, the
            # connection closing): the connection answers `cancelled`; record it so too,
            # instead of leaving the request "pending" in the turn forever.
            if part.outcome == "pending":
                fold.resolve_permission(part, None, "cancel")
            raise
        finally:
            self._permissions.pop(part.part_id, None)
        fold.resolve_permission(part, option_id, by)
        return _outcome(option_id)

    def cancel_pending(self) -> None:
        """Answer every pending permission request `cancelled`, and every elicitation `cancel`
        (the turn ends or is stopped)."""
        for part, scope, fold in list(self._permissions.values()):
            if part.outcome == "pending":
                fold.resolve_permission(part, None, "cancel")
            scope.cancel()
        for asked, scope, fold in list(self._elicitations.values()):
            if asked.outcome == "pending":
                fold.resolve_elicitation(asked, "cancel", None, "cancel")
            scope.cancel()

    def _fold_for(self, params: Any) -> tuple[SessionFold, str | None]:
        """Where a request is recorded, and who asks: a subagent's own fold (its card in the
        turn) and its name, when the request names one of the session's subagents."""
        sid = params.get("sessionId") if isinstance(params, dict) else None
        children = self._fold.children
        child = children.fold_of(sid) if sid != self._owner.id else None
        if child is None or not isinstance(sid, str):
            return self._fold, None
        return child, children.name_of(sid)

    # -- elicitation -----------------------------------------------------------------------------

    async def _elicit(self, params: Any) -> dict[str, Any]:
        """`elicitation/create`: shown in the turn, answered by the turn's (or the session's)
        handler; with none, declined. An answer is checked against the form before it is sent."""
        fold, _ = self._fold_for(params)
        try:
            part = fold.add_elicitation(params)
        except ElicitationError as exc:
            raise RpcError(rpc.INVALID_PARAMS, str(exc)) from None
        running = self._owner.running
        handler = (
            running.elicitation_handler if running is not None else None
        ) or self._owner.elicitation_handler
        if part.mode == "url" and not part.link.ok:
            # Nobody is asked to follow a link that would mislead; the card says why.
            fold.resolve_elicitation(part, "decline", None, "refused")
            return {"action": part.outcome}
        if handler is None or (running is not None and running.cancel_requested):
            by = "nobody to answer" if handler is None else "cancel"
            fold.resolve_elicitation(part, "decline" if handler is None else "cancel", None, by)
            return {"action": part.outcome}
        scope = anyio.CancelScope()
        self._elicitations[part.part_id] = (part, scope, fold)
        action, content, by = "cancel", None, "cancel"
        try:
            with scope:
                try:
                    action, content = answer(part, await handler(part))
                    by = "user"
                except ElicitationError as exc:
                    by = f"cancelled: the answer does not fit the form: {exc}"
                except Exception as exc:  # the handler gave up (nobody answered in time): decline
                    action, by = "decline", f"declined: {str(exc) or type(exc).__name__}"
        finally:
            self._elicitations.pop(part.part_id, None)
            if part.outcome == "pending":
                fold.resolve_elicitation(part, action, content, by)
        return {"action": action, **({"content": content} if content is not None else {})}


def _outcome(option_id: str | None) -> dict[str, Any]:
    if option_id is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": option_id}}
