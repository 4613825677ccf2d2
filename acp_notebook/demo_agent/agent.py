"""The demo agent's dispatcher: one handler per ACP method, each prompt turn in its own thread."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

from . import methods
from .session import COMMANDS, CONFIG_CHOICES, MODES, Session
from .turn import DemoTurn
from .wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    JSON,
    METHOD_NOT_FOUND,
    NOT_FOUND,
    PARSE_ERROR,
    RpcError,
    Turn,
    Wire,
    log,
)

VERSION = "0.1.0"
#: Closed sessions kept to fork from (a client forks the points it closed at once).
MAX_CLOSED = 200


class DemoAgent:
    """Dispatches the client's messages; each prompt turn runs in a thread of its own."""

    def __init__(self, wire: Wire, speed: float) -> None:
        self.wire, self.speed = wire, speed
        self.sessions: dict[str, Session] = {}
        #: Closed sessions, which can still be forked (the newest `MAX_CLOSED`).
        self.closed: dict[str, Session] = {}
        self.client_caps: JSON = {}
        self.threads: list[threading.Thread] = []
        self.handlers: dict[str, Callable[[Any, JSON], JSON | None]] = {
            methods.INITIALIZE: self.initialize,
            methods.SESSION_NEW: self.new_session,
            methods.SESSION_LOAD: self.load_session,
            methods.SESSION_RESUME: self.resume_session,
            methods.SESSION_LIST: self.list_sessions,
            methods.SESSION_CLOSE: self.close_session,
            methods.SESSION_FORK: self.fork_session,
            methods.SESSION_SET_MODE: self.set_mode,
            methods.SESSION_SET_CONFIG_OPTION: self.set_config_option,
            methods.SESSION_PROMPT: self.prompt,
        }

    # -- plumbing ---------------------------------------------------------------------------

    def handle_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            message = json.loads(raw)
        except ValueError:
            self.wire.fail(None, PARSE_ERROR, "Parse error")
            return
        if not isinstance(message, dict):
            self.wire.fail(None, INVALID_REQUEST, "Invalid request")
            return
        self.handle(message)

    def handle(self, message: JSON) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            if "id" in message:
                self.wire.resolve(message)
            return
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            self.on_notification(method, params)
            return
        request_id = message["id"]
        handler = self.handlers.get(method)
        if handler is None:
            self.wire.fail(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
            return
        try:
            result = handler(request_id, params)
        except RpcError as error:
            self.wire.fail(request_id, error.code, error.message, error.data)
        except Exception as error:  # a demo bug must not kill the connection
            log(f"{method} failed: {error!r}")
            self.wire.fail(request_id, INTERNAL_ERROR, f"Internal error: {error}")
        else:
            if result is not None:  # None: the handler has answered already
                self.wire.respond(request_id, result)

    def on_notification(self, method: str, params: JSON) -> None:
        if method == methods.SESSION_CANCEL:
            session = self.sessions.get(str(params.get("sessionId")))
            if session is not None and session.turn is not None:
                session.turn.cancel()
        elif method == methods.CANCEL_REQUEST:
            # Only prompts last long enough to be worth cancelling this way.
            for session in self.sessions.values():
                if session.turn is not None and session.turn.request_id == params.get("requestId"):
                    session.turn.cancel()
        # Other notifications (unknown `_` ones included) are ignored, as the spec asks.

    def update(self, session: Session, update: JSON) -> None:
        self.wire.notify(methods.SESSION_UPDATE, {"sessionId": session.id, "update": update})

    def session(self, params: JSON) -> Session:
        session = self.sessions.get(str(params.get("sessionId")))
        if session is None:
            raise RpcError(
                NOT_FOUND,
                "Resource not found: unknown session (sessions of the "
                "demo agent live only as long as its process)",
                {"sessionId": params.get("sessionId")},
            )
        return session

    def can(self, capability: str) -> bool:
        """Whether the client advertised `fs.readTextFile`, `fs.writeTextFile` or `terminal`."""
        value: Any = self.client_caps
        for key in capability.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        return value is True

    def shutdown(self) -> None:
        for session in self.sessions.values():
            if session.turn is not None:
                session.turn.cancel()
        for thread in self.threads:
            thread.join(timeout=1)

    # -- requests ---------------------------------------------------------------------------

    def initialize(self, request_id: Any, params: JSON) -> JSON:
        caps = params.get("clientCapabilities")
        self.client_caps = caps if isinstance(caps, dict) else {}
        return {
            "protocolVersion": 1,
            "agentInfo": {
                "name": "acp-notebook-demo",
                "title": "acp_notebook demo agent",
                "version": VERSION,
            },
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "fork": {}},
            },
            "authMethods": [],
        }

    def new_session(self, request_id: Any, params: JSON) -> None:
        self.opened(request_id, self.created(params))

    def fork_session(self, request_id: Any, params: JSON) -> None:
        """session/fork (unstable): a new session with the conversation of a live or closed
        one, which is left as it was."""
        sid = str(params.get("sessionId"))
        source = self.sessions.get(sid) or self.closed.get(sid)
        if source is None:
            self.session(params)  # raises: unknown session
            return
        session = self.created(params)
        session.history = list(source.history)
        session.mode, session.config = source.mode, dict(source.config)
        session.title, session.named, session.turns = source.title, source.named, source.turns
        session.used, session.cost = source.used, source.cost
        self.opened(request_id, session)

    def created(self, params: JSON) -> Session:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not cwd:
            raise RpcError(INVALID_PARAMS, "cwd is required (an absolute path)")
        session = Session("demo-" + os.urandom(6).hex(), os.path.abspath(cwd))
        self.sessions[session.id] = session
        return session

    def opened(self, request_id: Any, session: Session) -> None:
        """Answer session/new or session/fork, then say the session's commands and title."""
        self.wire.respond(
            request_id,
            {
                "sessionId": session.id,
                "modes": session.modes(),
                "configOptions": session.config_options(),
            },
        )
        # After the response, so even a client that drops updates for unknown ids sees them.
        self.update(
            session, {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS}
        )
        self.update(
            session,
            {
                "sessionUpdate": "session_info_update",
                "title": session.title,
                "updatedAt": session.updated_at,
            },
        )

    def load_session(self, request_id: Any, params: JSON) -> JSON:
        session = self.session(params)
        self.reopen(session, params)
        for index, (role, blocks) in enumerate(session.history):
            kind = "user_message_chunk" if role == "user" else "agent_message_chunk"
            for block in blocks:
                self.update(
                    session,
                    {"sessionUpdate": kind, "content": block, "messageId": f"replay-{index}"},
                )
        self.update(
            session, {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS}
        )
        return {"modes": session.modes(), "configOptions": session.config_options()}

    def resume_session(self, request_id: Any, params: JSON) -> None:
        session = self.session(params)
        self.reopen(session, params)
        self.wire.respond(
            request_id, {"modes": session.modes(), "configOptions": session.config_options()}
        )
        self.update(
            session, {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS}
        )

    def reopen(self, session: Session, params: JSON) -> None:
        if session.turn is not None:
            raise RpcError(INVALID_REQUEST, "a turn is still running in this session")
        cwd = params.get("cwd")
        if isinstance(cwd, str) and cwd:
            session.cwd = os.path.abspath(cwd)

    def list_sessions(self, request_id: Any, params: JSON) -> JSON:
        cwd = params.get("cwd")
        found = [
            s
            for s in self.sessions.values()
            if not isinstance(cwd, str) or os.path.abspath(cwd) == s.cwd
        ]
        found.sort(key=lambda s: s.updated_at, reverse=True)
        return {"sessions": [s.info() for s in found]}  # one page: no nextCursor

    def close_session(self, request_id: Any, params: JSON) -> JSON:
        session = self.sessions.pop(str(params.get("sessionId")), None)
        if session is not None and session.turn is not None:
            session.turn.cancel()  # the turn still answers its prompt with "cancelled"
        if session is not None:  # its conversation stays, to fork from
            self.closed[session.id] = session
            while len(self.closed) > MAX_CLOSED:
                del self.closed[next(iter(self.closed))]
        return {}

    def set_mode(self, request_id: Any, params: JSON) -> JSON:
        session = self.session(params)
        mode = params.get("modeId")
        if mode not in {m["id"] for m in MODES}:
            raise RpcError(INVALID_PARAMS, f"unknown mode: {mode}")
        session.mode = str(mode)
        self.update(session, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        return {}

    def set_config_option(self, request_id: Any, params: JSON) -> JSON:
        session = self.session(params)
        config_id, value = params.get("configId"), params.get("value")
        if config_id not in CONFIG_CHOICES:
            raise RpcError(INVALID_PARAMS, f"unknown config option: {config_id}")
        if value not in {v for v, _, _ in CONFIG_CHOICES[str(config_id)][2]}:
            raise RpcError(INVALID_PARAMS, f"invalid value for {config_id}: {value}")
        session.config[str(config_id)] = str(value)
        return {"configOptions": session.config_options()}

    def prompt(self, request_id: Any, params: JSON) -> None:
        session = self.session(params)
        if session.turn is not None:
            raise RpcError(INVALID_REQUEST, "a turn is already running in this session")
        blocks = params.get("prompt")
        if not isinstance(blocks, list):
            raise RpcError(INVALID_PARAMS, "prompt must be a list of content blocks")
        # Registered before the thread starts, so a cancel sent right after finds it.
        session.turn = Turn(request_id)
        runner = DemoTurn(
            self.wire,
            self.can,
            self.speed,
            session,
            session.turn,
            [b for b in blocks if isinstance(b, dict)],
        )
        thread = threading.Thread(target=runner.run, name=f"turn-{request_id}", daemon=True)
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]
        thread.start()
