"""The scripted agent's wire: JSON-RPC constants and encoding, parameter checks, cursors."""

from __future__ import annotations

import base64
import binascii
import json
import os
from datetime import UTC, datetime
from typing import Any

JsonObj = dict[str, Any]

VERSION = "0.1.0"
SCRIPT_PREFIX = "#script "

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
AUTH_REQUIRED = -32000
NOT_FOUND = -32002

AUTH_METHOD: JsonObj = {"id": "token", "name": "Token", "description": "test"}
TERMINAL_AUTH_METHOD: JsonObj = {"id": "login", "name": "Log in", "type": "terminal"}
MODES: list[JsonObj] = [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]
MODEL_CHOICES: list[JsonObj] = [
    {"value": "fast", "name": "Fast"},
    {"value": "smart", "name": "Smart"},
]
DEFAULT_CONFIG: JsonObj = {"model": "fast", "verbose": False}
COMMANDS: list[JsonObj] = [
    {"name": "web", "description": "Search the web", "input": {"hint": "query to search for"}},
    {"name": "test", "description": "Run the tests"},
]
PERMISSION_OPTIONS: list[JsonObj] = [
    {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
]
DEFAULT_TOOL_CALL: JsonObj = {"toolCallId": "call_1", "title": "Run a tool", "kind": "other"}
# Prompt block types that need a prompt capability, keyed to the --prompt-capabilities name.
BLOCK_CAPABILITY = {"image": "image", "audio": "audio", "resource": "embedded"}
CAPABILITY_NAMES = {
    "image": "image",
    "audio": "audio",
    "embedded": "embedded",
    "embeddedContext": "embedded",
}
# Lines per write(): keeps floods fast without holding the stdout lock for a whole flood.
BATCH = 256
AUTO_ID = object()  # "no explicit id": the agent picks the next number


class RpcError(Exception):
    """A JSON-RPC error to answer the current request with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_json(self) -> JsonObj:
        return {"code": self.code, "message": self.message}


class Cancelled(Exception):
    """Unwinds a turn's steps once a session/cancel has been honoured."""


def filler_text(nbytes: int) -> str:
    return ("0123456789" * (nbytes // 10 + 1))[:nbytes]


def digits(index: int, size: int) -> str:
    """Chunk text: the index zero-padded to size, so a test can check order and count."""
    return f"{index:0{size}d}"[-size:] if size > 0 else ""


def encode(msg: Any) -> bytes:
    """One compact JSON line. Raw UTF-8, as real agents send, to exercise client decoding."""
    try:
        return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    except UnicodeEncodeError:
        # Lone surrogates (legal in the client's JSON) have no UTF-8 form: use \u escapes.
        return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def notification(method: str, params: JsonObj) -> JsonObj:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def session_update(session_id: str, update: JsonObj) -> JsonObj:
    return notification("session/update", {"sessionId": session_id, "update": update})


def chunk_update(kind: str, text: str, message_id: Any = None) -> JsonObj:
    update: JsonObj = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def now_iso() -> str:
    # Fixed-width UTC with microseconds: sorts as a string, distinct within a fast test.
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def id_key(request_id: Any) -> str:
    # JSON text as the key, so the int id 1 and the string id "1" stay different requests.
    return json.dumps(request_id)


def str_param(params: JsonObj, name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        raise RpcError(INVALID_PARAMS, f"{name} must be a string")
    return value


def abs_path_param(params: JsonObj, name: str) -> str:
    value = str_param(params, name)
    if not os.path.isabs(value):
        raise RpcError(INVALID_PARAMS, f"{name} must be an absolute path")
    return value


def check_list_param(params: JsonObj, name: str, required: bool) -> None:
    # mcpServers is required in session/new and session/load: catch clients that omit it.
    if (name in params or required) and not isinstance(params.get(name), list):
        raise RpcError(INVALID_PARAMS, f"{name} must be an array")


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def decode_cursor(cursor: Any) -> int:
    try:
        text = base64.urlsafe_b64decode(str(cursor).encode()).decode()
        kind, _, number = text.partition(":")
        if kind == "offset" and number.isdigit():
            return int(number)
    except (binascii.Error, UnicodeDecodeError):
        pass
    raise RpcError(INVALID_PARAMS, f"invalid cursor: {cursor!r}")
