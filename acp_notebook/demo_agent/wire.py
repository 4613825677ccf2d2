"""JSON-RPC 2.0 over newline-delimited JSON, for the demo agent's reader and turn threads.

`Wire` writes messages and matches the client's responses to the agent's own requests;
`Turn` is the cancellation state of one prompt turn, which wakes every wait at once.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, BinaryIO

JSON = dict[str, Any]

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND = -32700, -32600, -32601
INVALID_PARAMS, INTERNAL_ERROR, NOT_FOUND = -32602, -32603, -32002


def log(message: str) -> None:
    print(f"[acp-notebook-demo] {message}", file=sys.stderr, flush=True)


class RpcError(Exception):
    """Raised by a handler to answer its request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class Cancelled(Exception):
    """Unwinds a turn that was cancelled; nothing more is sent but the response."""


class Pending:
    """One request the agent sent to the client, waiting for its response."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: JSON | None = None


class Turn:
    """Cancellation state of one running prompt turn."""

    def __init__(self, request_id: Any) -> None:
        self.request_id = request_id
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._waiting: set[Pending] = set()

    def cancel(self) -> None:
        # Wakes every wait at once so the turn can answer "cancelled" without waiting for
        # the client's replies (it answers permission requests with "cancelled" later).
        with self._lock:
            self.cancelled.set()
            for pending in self._waiting:
                pending.done.set()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.cancelled.wait(seconds)
        self.check()

    def wait(self, pending: Pending) -> JSON:
        with self._lock:
            if self.cancelled.is_set():
                raise Cancelled
            self._waiting.add(pending)
        pending.done.wait()
        with self._lock:
            self._waiting.discard(pending)
        self.check()
        assert pending.response is not None
        return pending.response


class Wire:
    """JSON-RPC over a byte stream, shared by the reader thread and the turn threads."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[Any, Pending] = {}

    def send(self, message: JSON) -> None:
        # ensure_ascii keeps U+2028 and friends escaped, so no client splits a line early.
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            try:
                self._out.write(line)
                self._out.flush()
            except (OSError, ValueError):
                pass  # the client went away; the reader will see EOF and stop

    def respond(self, request_id: Any, result: JSON) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def fail(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: JSON = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def notify(self, method: str, params: JSON) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: JSON) -> tuple[Any, Pending]:
        pending = Pending()
        with self._lock:
            request_id, self._next_id = self._next_id, self._next_id + 1
            self._pending[request_id] = pending
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id, pending

    def resolve(self, message: JSON) -> None:
        with self._lock:
            pending = self._pending.pop(message.get("id"), None)
        if pending is not None:  # late answers to abandoned requests are simply dropped
            pending.response = message
            pending.done.set()
