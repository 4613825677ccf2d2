"""Conformance of ACP frames to the official schema: the models of the SDK the project pins.

`acp.schema` is generated from the spec's `schema.json` (`acp/meta.py` names the schema tag).
Its pydantic models are lenient on purpose (an invalid optional field falls back to its default,
an invalid list item is skipped: `salvage_on_error`, `skip_invalid_items`), so validating with
them would accept what the spec does not. This module validates with the models' JSON schema
(`TypeAdapter(...).json_schema()`) and `jsonschema` instead: the types and required fields of the
spec, with no salvage. Extension fields (`_meta`, vendor keys) stay allowed, as the spec says.

`Tap` records the bytes each way of every connection a client makes (a `TransportFactory`
around another one); `check_frames` validates what one side sent: the JSON-RPC 2.0 envelope,
each request's and notification's params by method, each response's result by the method of the
request it answers, each error's shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Union

import anyio.abc
import jsonschema
from pydantic import TypeAdapter

from acp_notebook.client.process import StderrTail
from acp_notebook.client.transport import AgentTransport, TransportFactory
from acp_notebook.protocol import methods
from acp_notebook.protocol.redact import Redactor
from tests import acp_late_schema

Side = Literal["client", "agent"]

# method -> (params model, result model): names in `acp.schema` ("A|B" is a union).
CLIENT_REQUESTS: dict[str, tuple[str, str]] = {
    methods.INITIALIZE: ("InitializeRequest", "InitializeResponse"),
    methods.AUTHENTICATE: ("AuthenticateRequest", "AuthenticateResponse"),
    methods.LOGOUT: ("LogoutRequest", "LogoutResponse"),
    methods.SESSION_NEW: ("NewSessionRequest", "NewSessionResponse"),
    methods.SESSION_LOAD: ("LoadSessionRequest", "LoadSessionResponse"),
    methods.SESSION_RESUME: ("ResumeSessionRequest", "ResumeSessionResponse"),
    methods.SESSION_LIST: ("ListSessionsRequest", "ListSessionsResponse"),
    methods.SESSION_CLOSE: ("CloseSessionRequest", "CloseSessionResponse"),
    methods.SESSION_DELETE: ("DeleteSessionRequest", "DeleteSessionResponse"),
    methods.SESSION_FORK: ("ForkSessionRequest", "ForkSessionResponse"),  # unstable
    methods.SESSION_PROMPT: ("PromptRequest", "PromptResponse"),
    methods.SESSION_SET_MODE: ("SetSessionModeRequest", "SetSessionModeResponse"),
    methods.SESSION_SET_CONFIG_OPTION: (
        "SetSessionConfigOptionBooleanRequest|SetSessionConfigOptionSelectRequest",
        "SetSessionConfigOptionResponse",
    ),
}
AGENT_REQUESTS: dict[str, tuple[str, str]] = {
    methods.REQUEST_PERMISSION: ("RequestPermissionRequest", "RequestPermissionResponse"),
    methods.FS_READ_TEXT_FILE: ("ReadTextFileRequest", "ReadTextFileResponse"),
    methods.FS_WRITE_TEXT_FILE: ("WriteTextFileRequest", "WriteTextFileResponse"),
    methods.TERMINAL_CREATE: ("CreateTerminalRequest", "CreateTerminalResponse"),
    methods.TERMINAL_OUTPUT: ("TerminalOutputRequest", "TerminalOutputResponse"),
    methods.TERMINAL_RELEASE: ("ReleaseTerminalRequest", "ReleaseTerminalResponse"),
    methods.TERMINAL_WAIT_FOR_EXIT: ("WaitForTerminalExitRequest", "WaitForTerminalExitResponse"),
    methods.TERMINAL_KILL: ("KillTerminalRequest", "KillTerminalResponse"),
    methods.ELICITATION_CREATE: (
        "CreateFormSessionElicitationRequest|CreateFormRequestElicitationRequest"
        "|CreateUrlSessionElicitationRequest|CreateUrlRequestElicitationRequest",
        "AcceptElicitationResponse|DeclineElicitationResponse|CancelElicitationResponse",
    ),
}
CLIENT_NOTIFICATIONS: dict[str, str] = {
    methods.SESSION_CANCEL: "CancelNotification",
    methods.CANCEL_REQUEST: "CancelRequestNotification",
}
AGENT_NOTIFICATIONS: dict[str, str] = {
    methods.SESSION_UPDATE: "SessionNotification",
    methods.CANCEL_REQUEST: "CancelRequestNotification",
}

# JSON-RPC 2.0 (https://www.jsonrpc.org/specification), as ACP uses it: params are objects.
_ID = {"type": ["integer", "string"]}
_ERROR = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
    "additionalProperties": False,
}
ENVELOPE: dict[str, Any] = {
    "oneOf": [
        {  # a request: an id (a sender's own requests never use null)
            "type": "object",
            "required": ["jsonrpc", "id", "method"],
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "id": _ID,
                "method": {"type": "string"},
                "params": {"type": "object"},
            },
            "additionalProperties": False,
        },
        {  # a notification: no id at all
            "type": "object",
            "required": ["jsonrpc", "method"],
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "method": {"type": "string"},
                "params": {"type": "object"},
            },
            "additionalProperties": False,
        },
        {  # a response: the id it answers (null only when it could not be read), result XOR error
            "type": "object",
            "required": ["jsonrpc", "id"],
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "id": {"type": ["integer", "string", "null"]},
                "result": {},
                "error": _ERROR,
            },
            "oneOf": [{"required": ["result"]}, {"required": ["error"]}],
            "additionalProperties": False,
        },
    ]
}


@cache
def _validator(names: str) -> jsonschema.protocols.Validator:
    import acp.schema

    models = [getattr(acp.schema, name) for name in names.split("|")]
    target: Any = models[0] if len(models) == 1 else Union[tuple(models)]  # noqa: UP007
    schema = TypeAdapter(target).json_schema(by_alias=True)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)  # type: ignore[no-any-return]


def schema_errors(names: str, value: Any) -> list[str]:
    """What is wrong with `value` as the `acp.schema` model(s) `names` ("A|B": either)."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}"
        for e in _validator(names).iter_errors(value)
    ]


def _strict_loads(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


@dataclass
class Stream:
    """The bytes of one connection, each way: `to_agent` as the client wrote them."""

    to_agent: bytearray = field(default_factory=bytearray)
    from_agent: bytearray = field(default_factory=bytearray)


def lines(data: bytes) -> list[bytes]:
    return [line for line in bytes(data).split(b"\n") if line.strip()]


def check_frames(stream: Stream, side: Side) -> tuple[list[str], set[str]]:
    """Problems with what `side` sent on this connection, and the methods (and `x result`,
    `x error`) it covered. The other side's requests name the results that answer them."""
    own, other = (
        (stream.to_agent, stream.from_agent)
        if side == "client"
        else (stream.from_agent, stream.to_agent)
    )
    requests, notifications = (
        (CLIENT_REQUESTS, CLIENT_NOTIFICATIONS)
        if side == "client"
        else (AGENT_REQUESTS, AGENT_NOTIFICATIONS)
    )
    answered = AGENT_REQUESTS if side == "client" else CLIENT_REQUESTS
    asked: dict[str, str] = {}  # the other side's request ids (JSON text) -> method
    params_of: dict[str, Any] = {}  # and -> its params
    for line in lines(other):
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg:
            asked[json.dumps(msg["id"])] = msg["method"]
            params_of[json.dumps(msg["id"])] = msg.get("params")
    problems: list[str] = []
    seen: set[str] = set()
    for raw in lines(own):
        where = raw[:160].decode("utf-8", "replace")
        try:
            msg = _strict_loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            problems.append(f"not JSON ({exc}): {where}")
            continue
        bad = [e.message[:200] for e in jsonschema.Draft202012Validator(ENVELOPE).iter_errors(msg)]
        if bad:
            problems.append(f"not a JSON-RPC 2.0 message ({'; '.join(bad)}): {where}")
            continue
        method = msg.get("method")
        if method is not None and "id" in msg:
            models = requests.get(method)
            seen.add(method)
            if models is None and not method.startswith("_"):
                problems.append(f"{method} is no {side} request of ACP: {where}")
            elif models is not None:
                problems += [
                    f"{method} params {p}" for p in schema_errors(models[0], msg.get("params"))
                ]
                problems += [f"{method} params {p}" for p in late_params_errors(method, msg)]
        elif method is not None:
            model = notifications.get(method)
            seen.add(method)
            late = late_update(method, msg.get("params"))
            if late is not None:  # newer than the SDK's schema: the hand-written one
                seen.add(f"{method} {late}")
                problems += [
                    f"{method} {late} {p}"
                    for p in late_errors(acp_late_schema.notification(late), msg.get("params"))
                ]
            elif model is None and not method.startswith("_"):
                problems.append(f"{method} is no {side} notification of ACP: {where}")
            elif model is not None:
                problems += [
                    f"{method} params {p}" for p in schema_errors(model, msg.get("params"))
                ]
        else:
            of = asked.get(json.dumps(msg["id"]))
            kind = "error" if "error" in msg else "result"
            seen.add(f"{of} {kind}")
            if of is None and (kind == "result" or msg["id"] is not None):
                # JSON-RPC: the id of the request answered; null only for an error about a
                # request whose id could not be read.
                problems.append(f"an answer to a request never made: {where}")
            elif kind == "result" and of in answered:
                problems += [
                    f"{of} result {p}" for p in schema_errors(answered[of][1], msg["result"])
                ]
                asked_params = params_of.get(json.dumps(msg["id"]))
                problems += [
                    f"{of} result {p}" for p in answer_errors(of, asked_params, msg["result"])
                ]
    return problems, seen


def late_update(method: str, params: Any) -> str | None:
    """The kind of a `session/update` newer than the SDK's schema (`acp_late_schema`), or None."""
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    if method == methods.SESSION_UPDATE and kind in acp_late_schema.UPDATES:
        return str(kind)
    return None


def late_errors(schema: dict[str, Any], value: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}"
        for e in jsonschema.Draft202012Validator(schema).iter_errors(value)
    ]


# session/fork takes one too (the Rust SDK's `ForkSessionRequest.system_prompt`, unstable).
_SYSTEM_PROMPT_METHODS = {
    methods.SESSION_NEW,
    methods.SESSION_LOAD,
    methods.SESSION_RESUME,
    methods.SESSION_FORK,
}


def late_params_errors(method: str, msg: dict[str, Any]) -> list[str]:
    """What the spec's later fields of a request's params get wrong (the SDK predates them):
    the client's opt-ins in initialize, `systemPrompt` on session setup."""
    params = msg.get("params")
    if not isinstance(params, dict):
        return []
    if method == methods.INITIALIZE:
        caps = params.get("clientCapabilities")
        return late_errors(acp_late_schema.CLIENT_CAPABILITIES, caps) if caps is not None else []
    if method in _SYSTEM_PROMPT_METHODS and "systemPrompt" in params:
        return [
            f"systemPrompt {p}"
            for p in late_errors(acp_late_schema.SYSTEM_PROMPT, params["systemPrompt"])
        ]
    return []


def answer_errors(method: str, params: Any, result: Any) -> list[str]:
    """What the spec's text asks of an answer beyond its schema: a permission outcome picks one
    of the options offered; accepted form content matches the requested schema."""
    if not isinstance(params, dict) or not isinstance(result, dict):
        return []
    if method == methods.REQUEST_PERMISSION:
        outcome = result.get("outcome")
        picked = outcome.get("optionId") if isinstance(outcome, dict) else None
        offered = [o.get("optionId") for o in params.get("options") or [] if isinstance(o, dict)]
        if (
            isinstance(outcome, dict)
            and outcome.get("outcome") == "selected"
            and picked not in offered
        ):
            return [f"optionId {picked!r} is none of the options offered, {offered}"]
    if method == methods.ELICITATION_CREATE and result.get("action") == "accept":
        schema = params.get("requestedSchema")
        if isinstance(schema, dict) and "content" in result:
            try:
                validator = jsonschema.Draft202012Validator(schema)
                return [
                    f"content {e.message[:200]}" for e in validator.iter_errors(result["content"])
                ]
            except jsonschema.SchemaError:
                return []  # the agent's schema is no schema: nothing to match
    return []


def _messages(data: bytes) -> list[dict[str, Any]]:
    out = []
    for line in lines(data):
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            out.append(msg)
    return out


def _initialize(stream: Stream) -> tuple[dict[str, Any], dict[str, Any]]:
    """The client's capabilities and the agent's, from this connection's initialize."""
    sent = _messages(bytes(stream.to_agent))
    request = next((m for m in sent if m.get("method") == methods.INITIALIZE), {})
    params = request.get("params") or {}
    answer = next(
        (
            m
            for m in _messages(bytes(stream.from_agent))
            if "method" not in m and m.get("id") == request.get("id") and "result" in m
        ),
        {},
    )
    result = answer.get("result") or {}
    return params.get("clientCapabilities") or {}, result.get("agentCapabilities") or {}


# What a side may send only if the other advertised it (the spec: "MUST NOT" otherwise).
_BLOCK_NEEDS = {"image": "image", "audio": "audio", "resource": "embeddedContext"}
_SESSION_METHOD_NEEDS = {
    methods.SESSION_RESUME: "resume",
    methods.SESSION_LIST: "list",
    methods.SESSION_CLOSE: "close",
    methods.SESSION_DELETE: "delete",
    methods.SESSION_FORK: "fork",
}


def capability_errors(stream: Stream, side: Side) -> list[str]:
    """Requests of `side` that the other side's capabilities do not allow."""
    client_caps, agent_caps = _initialize(stream)
    problems = []
    if side == "client":
        prompt_caps = agent_caps.get("promptCapabilities") or {}
        session_caps = agent_caps.get("sessionCapabilities") or {}
        for msg in _messages(bytes(stream.to_agent)):
            method, params = msg.get("method"), msg.get("params") or {}
            if method == methods.SESSION_PROMPT:
                for block in params.get("prompt") or []:
                    need = _BLOCK_NEEDS.get(block.get("type"))
                    if need is not None and prompt_caps.get(need) is not True:
                        problems.append(f"an {block['type']} block, but no {need} capability")
            if method == methods.SESSION_LOAD and agent_caps.get("loadSession") is not True:
                problems.append("session/load, but no loadSession capability")
            need = _SESSION_METHOD_NEEDS.get(str(method))
            if need is not None and session_caps.get(need) is None:
                problems.append(f"{method}, but no sessionCapabilities.{need}")
            if (
                params.get("additionalDirectories")
                and session_caps.get("additionalDirectories") is None
            ):
                problems.append(f"{method} with additionalDirectories, not advertised")
            problems += _late_client_errors(stream, method, params, session_caps)
    else:
        fs = client_caps.get("fs") or {}
        for msg in _messages(bytes(stream.from_agent)):
            method = msg.get("method")
            if method == methods.FS_READ_TEXT_FILE and fs.get("readTextFile") is not True:
                problems.append("fs/read_text_file, but no fs.readTextFile capability")
            if method == methods.FS_WRITE_TEXT_FILE and fs.get("writeTextFile") is not True:
                problems.append("fs/write_text_file, but no fs.writeTextFile capability")
            if method in methods.TERMINAL_METHODS and client_caps.get("terminal") is not True:
                problems.append(f"{method}, but no terminal capability")
            late = late_update(str(method), msg.get("params"))
            needs = acp_late_schema.NEEDS.get(late or "")
            if needs is not None and not acp_late_schema.has(client_caps, needs):
                problems.append(f"{late}, but the client did not opt in ({'.'.join(needs)})")
    return problems


def _cancellable_children(stream: Stream) -> set[str]:
    """The children the agent announced with a `cancel` capability, at any time."""
    out = set()
    for msg in _messages(bytes(stream.from_agent)):
        params = msg.get("params")
        if late_update(str(msg.get("method")), params) != "subagent_update":
            continue
        update = params["update"]
        caps = update.get("capabilities")
        if isinstance(caps, dict) and isinstance(caps.get("cancel"), dict):
            out.add(str(update.get("sessionId")))
    return out


def _late_client_errors(
    stream: Stream, method: Any, params: dict[str, Any], session_caps: dict[str, Any]
) -> list[str]:
    """The client's frames that use what the agent did not offer: a system prompt the agent
    does not take (or an override it cannot do), a cancel of a child that cannot be cancelled."""
    problems = []
    prompt = params.get("systemPrompt")
    if method in _SYSTEM_PROMPT_METHODS and prompt is not None:
        offered = session_caps.get("systemPrompt")
        if not isinstance(offered, dict):
            problems.append(
                f"{method} with a systemPrompt, but no sessionCapabilities.systemPrompt"
            )
        elif isinstance(prompt, dict) and prompt.get("mode") == "override":
            if not acp_late_schema.has(offered, ("mode", "override")):
                problems.append(f"{method} with an override systemPrompt, not advertised")
    if method == methods.SESSION_CANCEL:
        own = {
            str((m.get("result") or {}).get("sessionId"))
            for m in _messages(bytes(stream.from_agent))
            if isinstance(m.get("result"), dict)
        }
        sid = params.get("sessionId")
        if sid not in own and sid not in _cancellable_children(stream) and _announced(stream, sid):
            problems.append(f"session/cancel of the subagent {sid!r}, which cannot be cancelled")
    return problems


def _announced(stream: Stream, session_id: Any) -> bool:
    """Whether the agent announced `session_id` as a subagent."""
    for msg in _messages(bytes(stream.from_agent)):
        params = msg.get("params")
        if late_update(str(msg.get("method")), params) == "subagent_update":
            if params["update"].get("sessionId") == session_id:
                return True
    return False


class _Tapped:
    """A transport whose bytes each way are also appended to a `Stream`."""

    def __init__(self, inner: AgentTransport, stream: Stream) -> None:
        self._inner = inner
        self._stream = stream

    @property
    def stderr(self) -> StderrTail:
        return self._inner.stderr

    @property
    def redactor(self) -> Redactor:
        return self._inner.redactor

    @property
    def killed_by_us(self) -> bool:
        return self._inner.killed_by_us

    @property
    def display(self) -> str:
        return self._inner.display

    @property
    def pid(self) -> int | None:
        return self._inner.pid

    @property
    def returncode(self) -> int | None:
        return self._inner.returncode

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        await self._inner.start(task_group)

    async def send(self, data: bytes) -> None:
        self._stream.to_agent += data
        await self._inner.send(data)

    async def receive(self) -> bytes:
        data = await self._inner.receive()
        self._stream.from_agent += data
        return data

    async def wait(self, timeout: float) -> int | None:
        return await self._inner.wait(timeout)

    async def wait_exit(self) -> int | None:
        return await self._inner.wait_exit()

    def kill(self) -> None:
        self._inner.kill()

    async def aclose(self, grace: float = 2.0) -> None:
        await self._inner.aclose(grace)


class Tap:
    """Records every connection a client makes through `factory(inner)`, one `Stream` each."""

    def __init__(self) -> None:
        self.streams: list[Stream] = []

    def factory(self, inner: TransportFactory) -> TransportFactory:
        def start(
            command: Sequence[str], env: Mapping[str, str | None], cwd: str, stderr_limit: int
        ) -> AgentTransport:
            self.streams.append(Stream())
            return _Tapped(inner(command, env, cwd, stderr_limit), self.streams[-1])

        return start

    def check(self, side: Side) -> tuple[list[str], set[str]]:
        problems: list[str] = []
        seen: set[str] = set()
        for stream in self.streams:
            found, covered = check_frames(stream, side)
            problems += found + capability_errors(stream, side)
            seen |= covered
        return problems, seen
