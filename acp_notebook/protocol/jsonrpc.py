"""JSON-RPC 2.0 framing for ACP's stdio transport: pure functions, no I/O.

One message per line, compact, UTF-8. The reader side splits a byte stream into lines
(`LineSplitter`) and classifies each decoded frame (`classify`). Nothing here raises on bad input
from the agent: malformed frames come back as `Malformed` so the caller can attach a protocol error
to the session instead of crashing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .limits import bounded, count

JSONRPC: Final = "2.0"

# Error codes, JSON-RPC's and ACP's own.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
AUTH_REQUIRED: Final = -32000
RESOURCE_NOT_FOUND: Final = -32002
REQUEST_CANCELLED: Final = -32800

RequestId = int | str | None


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class Response:
    id: RequestId
    result: Any = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Malformed:
    """A frame that is not valid JSON-RPC; `reason` is for humans, `line` is a bounded excerpt."""

    reason: str
    line: str


Frame = Request | Notification | Response | Malformed

_EXCERPT = 200


def excerpt(data: bytes | str, limit: int = _EXCERPT) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


# Deeper JSON than any ACP message needs breaks recursive code downstream: redaction, rendering
# and nbformat's validation raised RecursionError (in the display, or when saving the notebook)
# for a tool call's rawInput nested a few hundred levels. Such a frame is malformed.
MAX_DEPTH: Final = 100
#: No shorter text can nest `MAX_DEPTH` deep: a hot loop tests this before calling `too_deep`.
DEEP_MIN_CHARS: Final = 2 * MAX_DEPTH


def too_deep(text: str | bytes, obj: Any) -> bool:
    """Whether `obj` (parsed from `text`) nests containers deeper than `MAX_DEPTH`."""
    # Cheap test first (the hot path): every level needs an opening bracket.
    if len(text) < DEEP_MIN_CHARS:
        return False
    if isinstance(text, str):
        brackets = text.count("[") + text.count("{")
    else:
        brackets = text.count(b"[") + text.count(b"{")
    if brackets < MAX_DEPTH:
        return False
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if type(value) is dict:
            children: Any = value.values()
        elif type(value) is list:
            children = value
        else:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


_INT_DIGITS = 19  # 2**63 has 19 digits: longer literals are out of range without parsing them


# NaN, Infinity and -Infinity are not JSON (RFC 8259), and a float literal beyond 1e308 parses to
# infinity: they become null, as JSON.stringify makes them, rather than making the frame malformed,
# so the frame (maybe the answer a turn waits for) is kept, and no non-standard token reaches a
# transcript or a saved notebook.
def _constant_null(text: str) -> None:
    return None


def _float_or_null(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _int_or_null(text: str) -> int | None:
    # An integer beyond 64 bits is no number a JSON reader keeps (and beyond 4300 digits
    # int() raises): null, like the non-finite floats. Cheap: ints are rare in a streamed chunk.
    if len(text) > _INT_DIGITS + 1:
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


_DECODER = json.JSONDecoder(
    parse_float=_float_or_null, parse_int=_int_or_null, parse_constant=_constant_null
)
# The decoder's scanner (C): one JSON value at an index -> (value, end). Not in the stubs.
_scan: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_JSON_SPACE = " \t\n\r"


def loads(text: str) -> Any:
    """`json.loads` for the agent's frames: every number it returns is finite and within 64 bits.

    The same result or error as `JSONDecoder.decode`, which it calls for anything but a line
    that is one JSON value, maybe followed by JSON whitespace: `decode` spends two regular
    expression matches and two Python calls around the scanner, about a third of the time it
    takes over a streamed chunk's line (`bench/bench_kernel.py`)."""
    try:
        obj, end = _scan(text, 0)
    except StopIteration:  # not a value at index 0 (leading space, empty, junk): decode says
        return _DECODER.decode(text)
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        return _DECODER.decode(text)  # raises "Extra data"
    return obj


def decode(line: bytes) -> Frame:
    """Parse one line into a frame; never raises."""
    # Strict UTF-8, as the transport requires: json.loads(bytes) would guess UTF-16 or UTF-32
    # from NUL bytes and accept lines the connection's str fast path rejects.
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return Malformed("invalid UTF-8", excerpt(line))
    try:
        obj = loads(text)
    except ValueError:
        return Malformed("invalid JSON", excerpt(line))
    except RecursionError:  # not a ValueError: it used to escape and kill the reader
        return Malformed("JSON nested too deeply", excerpt(line))
    if too_deep(text, obj):
        return Malformed("JSON nested too deeply", excerpt(line))
    return classify(obj, line)


def classify(obj: Any, line: bytes | str = b"") -> Frame:
    if not isinstance(obj, dict):
        return Malformed("not a JSON-RPC object", excerpt(line or repr(obj)))
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str):
            return Malformed("method is not a string", excerpt(line or repr(obj)))
        if "id" in obj:
            rid = obj["id"]
            if (rid is not None and not isinstance(rid, int | str)) or isinstance(rid, bool):
                return Malformed("invalid request id", excerpt(line or repr(obj)))
            if rid is None and line and _id_lost(line):
                return Malformed("invalid request id (not a 64-bit integer)", excerpt(line))
            return Request(rid, method, obj.get("params"))
        return Notification(method, obj.get("params"))
    if "id" in obj and ("result" in obj or "error" in obj):
        return Response(obj["id"], obj.get("result"), _error(obj.get("error")))
    return Malformed("neither request, notification nor response", excerpt(line or repr(obj)))


def _id_lost(line: bytes | str) -> bool:
    """Whether a request read with a null id had another one: an integer beyond 64 bits, which
    `loads` reads as null. Answered, it was served and answered with id null, an answer the
    agent cannot match to its request (JSON-RPC: the id of the request, always). Rare: only
    requests with a null id are read again."""
    try:
        text = line.decode("utf-8") if isinstance(line, bytes) else line
        real = json.loads(text)
    except (ValueError, RecursionError):  # 4300 digits and more: int() refuses them
        return True
    return isinstance(real, dict) and real.get("id") is not None


# An error's message becomes the turn's error, shown and saved several times: an excerpt is
# enough (the agent's own words; 50 MB of them used to be kept whole).
ERROR_MESSAGE_CHARS: Final = 4000
_ERROR_DATA_CHARS: Final = 64 * 1024


def _error(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return {"code": INTERNAL_ERROR, "message": excerpt(str(value), ERROR_MESSAGE_CHARS)}
    error: dict[str, Any] = value
    message = error.get("message")
    if isinstance(message, str) and len(message) > ERROR_MESSAGE_CHARS:
        error = {**error, "message": excerpt(message, ERROR_MESSAGE_CHARS)}
    if "data" in error and count(error["data"], _ERROR_DATA_CHARS) > _ERROR_DATA_CHARS:
        error = {**error, "data": bounded(error["data"], _ERROR_DATA_CHARS)[0]}
    return error


def _finite(value: Any) -> Any:
    """`value` with NaN and the infinities as null (as JSON.stringify makes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _dumps(obj: dict[str, Any]) -> bytes:
    # Compact, and never an embedded newline: json escapes control characters in strings.
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        # NaN or an infinity (a form's number typed as "1e999" parsed to inf): json wrote them
        # as NaN / Infinity, which are not JSON (RFC 8259), and the agent got a frame it cannot
        # parse. Null instead, as the reader makes them of the agent's own (`_float_or_null`).
        obj = _finite(obj)
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        # A lone surrogate (the agent's `"\ud800"`, echoed in an id or an option id, or one in
        # a prompt) has no UTF-8 form: raw, it raised here and the error killed the client's
        # task group. As a \u escape it is valid JSON in UTF-8, the very text the agent sent.
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def encode_request(rid: int, method: str, params: Any) -> bytes:
    return _dumps({"jsonrpc": JSONRPC, "id": rid, "method": method, "params": params})


def encode_notification(method: str, params: Any) -> bytes:
    return _dumps({"jsonrpc": JSONRPC, "method": method, "params": params})


def encode_result(rid: RequestId, result: Any) -> bytes:
    return _dumps({"jsonrpc": JSONRPC, "id": rid, "result": result})


def encode_error(rid: RequestId, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _dumps({"jsonrpc": JSONRPC, "id": rid, "error": error})


# The longest line kept. Lines of any length were buffered: an agent writing without a newline
# grew the kernel's memory until it died. 256 MiB still carries a 50 MB answer or file write.
MAX_LINE_BYTES = 256 * 1024 * 1024


class LineSplitter:
    """Splits a byte stream into lines of at most `max_line` bytes.

    Pieces of an unfinished line are kept in a list and joined once, so a 50 MB line arriving
    in 64 KiB reads costs linear time, not quadratic. A line that grows past `max_line` is
    dropped as it arrives (never held whole): its size is appended to `dropped`, and reading
    goes on at the next newline.
    """

    __slots__ = ("_pending", "_pending_size", "_skipped", "dropped", "max_line")

    def __init__(self, max_line: int | None = None) -> None:
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._skipped = -1  # bytes of the oversized line being dropped; -1: none
        self.dropped: list[int] = []  # sizes of the lines dropped, for the caller to report
        self.max_line = MAX_LINE_BYTES if max_line is None else max_line

    @property
    def buffered(self) -> int:
        return self._pending_size

    def feed(self, data: bytes) -> list[bytes]:
        if b"\n" not in data:
            self._add(data)
            return []
        lines = data.split(b"\n")
        tail = lines.pop()
        if self._skipped >= 0:
            self.dropped.append(self._skipped + len(lines[0]))
            self._skipped = -1
            del lines[0]
        elif self._pending:
            if self._pending_size + len(lines[0]) > self.max_line:
                self.dropped.append(self._pending_size + len(lines[0]))
                del lines[0]
            else:
                self._pending.append(lines[0])
                lines[0] = b"".join(self._pending)
            self._pending = []
            self._pending_size = 0
        if lines and max(map(len, lines)) > self.max_line:  # no Python step per line
            self.dropped.extend(len(line) for line in lines if len(line) > self.max_line)
            lines = [line for line in lines if len(line) <= self.max_line]
        self._add(tail)
        return lines

    def _add(self, data: bytes) -> None:
        if not data:
            return
        if self._skipped >= 0:
            self._skipped += len(data)
            return
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size > self.max_line:
            self._skipped, self._pending, self._pending_size = self._pending_size, [], 0

    def flush(self) -> bytes:
        """What is left at end of stream: an unterminated last line, if any."""
        if self._skipped >= 0:
            self.dropped.append(self._skipped)
            self._skipped = -1
        rest = b"".join(self._pending)
        self._pending = []
        self._pending_size = 0
        return rest
