"""The scripted agent: reads JSON-RPC lines, answers the quick requests, starts turns."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from . import late
from .host import Host, Output, quietly
from .store import Session, Store, config_options
from .turn import PendingCall, Turn
from .wire import (
    AUTH_METHOD,
    AUTH_REQUIRED,
    AUTO_ID,
    BATCH,
    BLOCK_CAPABILITY,
    COMMANDS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MODEL_CHOICES,
    MODES,
    PARSE_ERROR,
    TERMINAL_AUTH_METHOD,
    VERSION,
    JsonObj,
    RpcError,
    abs_path_param,
    check_list_param,
    decode_cursor,
    encode,
    encode_cursor,
    id_key,
    notification,
    session_update,
    str_param,
)

Handler = Callable[[JsonObj], JsonObj]


class Agent:
    def __init__(self, args: argparse.Namespace, host: Host) -> None:
        self.args = args
        self.host = host
        self.out = Output(host)
        self.store = Store(args.state_dir, host.log)
        self.linger = False  # a turn hangs on purpose: stay alive after stdin closes
        self._record = open(args.record, "a", encoding="utf-8") if args.record else None
        self._initialized = False
        self._authenticated = False
        self.client_auth_terminal = False
        #: The client's `clientCapabilities` (what it opted in to: `late.opted_in`).
        self.client_capabilities: JsonObj = {}
        self.children = late.Children()  # the subagents announced, and their cancels
        self._followups: list[JsonObj] = []  # notifications to send after the current response
        self._ids = itertools.count()
        self._pending: dict[str, PendingCall] = {}
        self._turns: dict[str, Turn] = {}  # by session id
        self._lock = threading.Lock()  # guards _pending and _turns
        self._handlers = self._build_handlers()
        host.on_end(self._ended)

    def _ended(self) -> None:
        """In-process, the agent was ended: wake the turns waiting for a cancel or an answer
        (they meet AgentGone next)."""
        with self._lock:
            turns, calls = list(self._turns.values()), list(self._pending.values())
        for turn in turns:
            turn.cancel()
        for call in calls:
            call.resolve({})

    def close(self) -> None:
        if self._record is not None:
            self._record.close()

    def _build_handlers(self) -> dict[str, Handler]:
        args = self.args
        handlers: dict[str, Handler] = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "session/new": self._new,
        }
        # Methods whose capability is off stay unknown (-32601), as with a real agent.
        optional: dict[str, tuple[bool, Handler]] = {
            "session/load": (args.load_session, self._load),
            "session/resume": (args.resume, self._resume),
            "session/list": (args.list, self._list),
            "session/close": (args.close, self._close),
            "session/delete": (args.delete, self._delete),
            "session/set_mode": (args.modes, self._set_mode),
            "session/set_config_option": (args.config_options, self._set_config_option),
            "logout": (args.logout, self._logout),
            "session/fork": (args.fork, self._fork),
        }
        handlers.update({method: fn for method, (on, fn) in optional.items() if on})
        return handlers

    # -- reading

    def serve(self, stdin: BinaryIO) -> None:
        for raw in stdin:  # readline() has no length limit: 50 MB lines are fine
            self._handle_line(raw)
        self.host.log("stdin closed")
        if self.linger:
            self.host.hang()

    def _handle_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            msg = json.loads(raw.decode("utf-8"))  # strict UTF-8; json.loads(bytes) is lax
        except ValueError as exc:
            self.out.send(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": PARSE_ERROR, "message": f"Parse error: {exc}"},
                }
            )
            return
        if self._record is not None:  # before handling, so it is on disk before any reply
            self._record.write(json.dumps(msg) + "\n")
            self._record.flush()
        self._dispatch(msg)

    def _dispatch(self, msg: Any) -> None:
        if isinstance(msg, dict) and isinstance(msg.get("method"), str):
            if "id" in msg:
                self._on_request(msg)
            else:
                self._on_notification(msg)
        elif isinstance(msg, dict) and "id" in msg and ("result" in msg or "error" in msg):
            self._on_response(msg)
        else:  # includes batches (arrays): v1 has none
            request_id = msg.get("id") if isinstance(msg, dict) else None
            self.out.send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": INVALID_REQUEST, "message": "Invalid request"},
                }
            )

    def _on_request(self, msg: JsonObj) -> None:
        request_id, method = msg["id"], msg["method"]
        if self._hangs(method):
            return
        params = {} if msg.get("params") is None else msg["params"]
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params must be an object")
            if not self._initialized and method != "initialize":
                raise RpcError(INVALID_REQUEST, "initialize must be the first request")
            if method == "session/prompt":
                self._start_turn(request_id, params)  # the turn answers when it ends
                return
            handler = self._handlers.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            result = handler(params)
        except RpcError as err:
            self._answer_error(request_id, err.to_json())
            return
        except (KeyError, TypeError, ValueError, AttributeError, OSError) as exc:
            # Odd params must not kill the reader: that would look like an agent crash.
            self._answer_error(request_id, {"code": INTERNAL_ERROR, "message": repr(exc)})
            return
        self.out.send({"jsonrpc": "2.0", "id": request_id, "result": result})
        for note in self._followups:
            self.out.send(note)
        self._followups.clear()

    def _hangs(self, method: str) -> bool:
        if method not in (self.args.hang_method or ()):
            return False
        marker: Path | None = self.args.hang_once_marker
        if marker is not None:
            try:
                with open(marker, "x", encoding="utf-8") as out:
                    out.write(self.host.name)
            except FileExistsError:
                return False  # an earlier process hung already: answer
        self.host.log(f"not answering {method} (--hang-method)")
        return True

    def _answer_error(self, request_id: Any, error: JsonObj) -> None:
        self._followups.clear()
        self.out.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def _on_notification(self, msg: JsonObj) -> None:
        params: JsonObj = msg["params"] if isinstance(msg.get("params"), dict) else {}
        if msg["method"] == "session/cancel":
            session_id = params.get("sessionId")
            if self.children.cancel(session_id):  # a subagent's: its work stops, not the turn
                return
            with self._lock:
                turn = self._turns.get(session_id) if isinstance(session_id, str) else None
        elif msg["method"] == "$/cancel_request":
            # Only prompts outlive their request here; cancelling one is a session/cancel.
            key = id_key(params.get("requestId"))
            with self._lock:
                turn = next((t for t in self._turns.values() if id_key(t.request_id) == key), None)
        else:
            return  # unknown notifications are ignored, as the spec requires
        if turn is not None:
            turn.cancel()

    def _on_response(self, msg: JsonObj) -> None:
        with self._lock:
            call = self._pending.pop(id_key(msg["id"]), None)
        if call is None:
            self.host.log(f"ignoring a response to unknown request id {msg['id']!r}")
        else:
            call.resolve(msg)

    # -- calls to the client (from turn threads)

    def call_client(
        self, method: str, params: JsonObj, cancel_after: Any, request_id: Any = AUTO_ID
    ) -> JsonObj:
        """Sends a request, waits for its response, returns it without jsonrpc and id."""
        if request_id is AUTO_ID:
            request_id = next(self._ids)
        call = PendingCall()
        with self._lock:  # registered before sending: the answer may come back at once
            self._pending[id_key(request_id)] = call
        self.out.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if cancel_after is not None:
            timer = threading.Timer(
                float(cancel_after), quietly(self._cancel_call), (request_id, call)
            )
            timer.daemon = True
            timer.start()
        response = call.wait()
        return {key: value for key, value in response.items() if key not in ("jsonrpc", "id")}

    def _cancel_call(self, request_id: Any, call: PendingCall) -> None:
        if not call.done:
            self.out.send(notification("$/cancel_request", {"requestId": request_id}))

    # -- turns

    def _start_turn(self, request_id: Any, params: JsonObj) -> None:
        session = self.store.live(str_param(params, "sessionId"))
        prompt = params.get("prompt")
        if not isinstance(prompt, list) or not all(isinstance(b, dict) for b in prompt):
            raise RpcError(INVALID_PARAMS, "prompt must be an array of content blocks")
        for block in prompt:
            needed = BLOCK_CAPABILITY.get(str(block.get("type")))
            if needed is not None and needed not in self.args.prompt_capabilities:
                raise RpcError(
                    INVALID_PARAMS,
                    f"{block['type']} blocks were not advertised in promptCapabilities",
                )
        with self._lock:
            if session.session_id in self._turns:
                raise RpcError(INVALID_REQUEST, "a prompt turn is already running")
            turn = self._turns[session.session_id] = Turn(self, session, request_id, prompt)
        turn.start()

    def end_turn(self, turn: Turn) -> None:
        with self._lock:
            self._turns.pop(turn.session.session_id, None)
        self.store.touch(turn.session)

    def _cancel_turn(self, session_id: str) -> None:
        with self._lock:
            turn = self._turns.get(session_id)
        if turn is not None:
            turn.cancel()

    # -- request handlers

    def _initialize(self, params: JsonObj) -> JsonObj:
        code = self.args.exit_during_initialize
        if code is not None:
            self.host.log(f"exiting with code {code} during initialize, as asked")
            self.out.exit(code)
        if type(params.get("protocolVersion")) is not int:
            raise RpcError(INVALID_PARAMS, "protocolVersion must be an integer")
        self._initialized = True
        client_caps = params.get("clientCapabilities")
        self.client_capabilities = client_caps if isinstance(client_caps, dict) else {}
        auth_caps = client_caps.get("auth") if isinstance(client_caps, dict) else None
        # Terminal auth methods are offered only to clients that can run them (the spec).
        self.client_auth_terminal = (
            isinstance(auth_caps, dict) and auth_caps.get("terminal") is True
        )
        args, caps = self.args, self.args.prompt_capabilities
        return {
            "protocolVersion": args.protocol_version,
            "agentCapabilities": {
                "loadSession": args.load_session,
                "promptCapabilities": {
                    "image": "image" in caps,
                    "audio": "audio" in caps,
                    "embeddedContext": "embedded" in caps,
                },
                "mcpCapabilities": {t: t in args.mcp_transports for t in ("http", "sse")},
                **({"auth": {"logout": {}}} if args.logout else {}),
                "sessionCapabilities": {
                    name: {}
                    for name, flag in (
                        ("resume", args.resume),
                        ("list", args.list),
                        ("close", args.close),
                        ("delete", args.delete),
                        ("additionalDirectories", args.additional_directories),
                        ("fork", args.fork),
                    )
                    if flag
                }
                | late.system_prompt_capability(args.system_prompt),
            },
            "authMethods": self._auth_methods(),
            "agentInfo": {"name": args.agent_name, "version": VERSION},
        }

    def _auth_methods(self) -> list[JsonObj]:
        methods = [AUTH_METHOD] if self.args.auth_required else []
        terminal = self.args.auth_terminal
        if terminal is not None and self.client_auth_terminal:
            # More variables from the agent's environment (JSON), as a hostile method may set.
            extra = json.loads(os.environ.get("SCRIPTED_LOGIN_VARS") or "{}")
            env = {"SCRIPTED_LOGIN": "yes", **extra}
            login = {"args": ["--login-to", str(terminal)], "env": env}
            methods.append({**TERMINAL_AUTH_METHOD, **login})
        return methods

    def _logout(self, params: JsonObj) -> JsonObj:
        self._authenticated = False
        if self.args.auth_terminal is not None:
            self.args.auth_terminal.unlink(missing_ok=True)
        return {}

    def _authenticate(self, params: JsonObj) -> JsonObj:
        if not self.args.auth_required or params.get("methodId") != AUTH_METHOD["id"]:
            raise RpcError(INVALID_PARAMS, f"unknown auth method: {params.get('methodId')!r}")
        self._authenticated = True
        return {}

    def _require_auth(self) -> None:
        if self.args.auth_required and not self._authenticated:
            raise RpcError(AUTH_REQUIRED, "Authentication required")
        terminal = self.args.auth_terminal
        if terminal is not None and not terminal.exists():
            raise RpcError(AUTH_REQUIRED, "Not logged in: run the login")

    def _session_state(self, session: Session) -> JsonObj:
        """The modes/configOptions part of new, load and resume responses."""
        state: JsonObj = {}
        if self.args.modes:
            state["modes"] = {"currentModeId": session.mode_id, "availableModes": MODES}
        if self.args.config_options:
            state["configOptions"] = config_options(session.config)
        if self.args.config_options_json is not None:
            state["configOptions"] = json.loads(self.args.config_options_json)
        return state

    def _new(self, params: JsonObj) -> JsonObj:
        self._require_auth()
        cwd = abs_path_param(params, "cwd")
        check_list_param(params, "mcpServers", required=True)
        session = self.store.create(cwd)
        session.mcp_servers = list(params["mcpServers"])
        late.take_system_prompt(self, session, params)
        if self.args.commands:
            self._followups.append(
                session_update(
                    session.session_id,
                    {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS},
                )
            )
        sid = session.session_id
        if self.args.new_id_json is not None:
            sid = json.loads(self.args.new_id_json)
        return {"sessionId": sid, **self._session_state(session)}

    def _open(self, params: JsonObj, mcp_required: bool) -> Session:
        """The checks load and resume share; the session becomes live (promptable)."""
        self._require_auth()
        session_id = str_param(params, "sessionId")
        cwd = abs_path_param(params, "cwd")
        check_list_param(params, "mcpServers", required=mcp_required)
        session = self.store.find(session_id)
        session.cwd = cwd
        if isinstance(params.get("mcpServers"), list):
            session.mcp_servers = list(params["mcpServers"])
        late.take_system_prompt(self, session, params)
        self.store.activate(session)
        return session

    def _load(self, params: JsonObj) -> JsonObj:
        session = self._open(params, mcp_required=True)
        lines = [
            encode(session_update(session.session_id, update))
            for update in self.store.history(session)
        ]
        for start in range(0, len(lines), BATCH):
            self.out.write(lines[start : start + BATCH])
        return self._session_state(session)

    def _resume(self, params: JsonObj) -> JsonObj:
        return self._session_state(self._open(params, mcp_required=False))

    def _fork(self, params: JsonObj) -> JsonObj:
        """session/fork: a new live session with a copy of the conversation so far (what load
        would replay), its mode and config; the source is left as it was."""
        self._require_auth()
        source = self.store.find(str_param(params, "sessionId"))
        cwd = abs_path_param(params, "cwd")
        check_list_param(params, "mcpServers", required=False)
        session = self.store.create(cwd)
        session.history = self.store.history(source)
        session.mode_id, session.config = source.mode_id, dict(source.config)
        session.title = source.title
        session.mcp_servers = list(params.get("mcpServers") or [])
        late.take_system_prompt(self, session, params)
        self.store.save(session)
        sid = session.session_id
        if self.args.fork_id_json is not None:
            sid = json.loads(self.args.fork_id_json)
        return {"sessionId": sid, **self._session_state(session)}

    def _list(self, params: JsonObj) -> JsonObj:
        if self.args.list_endless:
            page = next(self._ids)
            fake = {"sessionId": f"fake-{page}", "cwd": params.get("cwd") or "/"}
            return {
                "sessions": [] if self.args.list_endless == "empty" else [fake],
                "nextCursor": "same" if self.args.list_endless == "repeat" else f"c{page}",
            }
        cwd = params.get("cwd")
        offset = 0 if params.get("cursor") is None else decode_cursor(params["cursor"])
        matching = sorted(
            (s for s in self.store.all() if cwd is None or s.cwd == cwd),
            key=lambda s: (s.updated_at, s.session_id),
            reverse=True,
        )
        end = offset + self.args.list_page_size
        result: JsonObj = {"sessions": [s.listing() for s in matching[offset:end]]}
        if end < len(matching):
            result["nextCursor"] = encode_cursor(end)
        return result

    def _close(self, params: JsonObj) -> JsonObj:
        session_id = str_param(params, "sessionId")
        self._cancel_turn(session_id)  # close cancels in-flight work like session/cancel
        self.store.deactivate(session_id)
        return {}

    def _delete(self, params: JsonObj) -> JsonObj:
        session_id = str_param(params, "sessionId")
        self._cancel_turn(session_id)
        self.store.delete(session_id)  # unknown ids succeed silently, per the spec
        return {}

    def _set_mode(self, params: JsonObj) -> JsonObj:
        session = self.store.live(str_param(params, "sessionId"))
        mode_id = str_param(params, "modeId")
        if mode_id not in {mode["id"] for mode in MODES}:
            raise RpcError(INVALID_PARAMS, f"unknown mode: {mode_id}")
        session.mode_id = mode_id
        self.store.save(session)
        # Sent before the response, so a client sees the update by the time set_mode returns.
        self.out.send(
            session_update(
                session.session_id,
                {"sessionUpdate": "current_mode_update", "currentModeId": mode_id},
            )
        )
        return {}

    def _set_config_option(self, params: JsonObj) -> JsonObj:
        session = self.store.live(str_param(params, "sessionId"))
        config_id, value = str_param(params, "configId"), params.get("value")
        if config_id == "model":
            valid = value in {choice["value"] for choice in MODEL_CHOICES}
        elif config_id == "verbose":
            valid = isinstance(value, bool)
        else:
            raise RpcError(INVALID_PARAMS, f"unknown config option: {config_id}")
        if not valid:
            raise RpcError(INVALID_PARAMS, f"invalid value for {config_id}: {value!r}")
        session.config[config_id] = value
        self.store.save(session)
        return {"configOptions": config_options(session.config)}
