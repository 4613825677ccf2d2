"""A JSON-RPC peer over the agent's stdio, on anyio.

Incoming notifications are handled inline, in order, by synchronous callbacks: the last chunks of
a turn are folded before the `session/prompt` response that follows them is seen, and there is no
task per message. Incoming requests (permission, fs, terminal) each run in their own task so a
permission prompt waiting for a click never blocks the stream.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from ..errors import AcpError, AgentExitedError, ProtocolError, RequestError, RpcError
from ..protocol import jsonrpc as rpc
from ..protocol import methods
from ..protocol.wirelog import WireLog, traceparent, with_trace
from .transport import AgentTransport

RequestHandler = Callable[[str, Any], Awaitable[Any]]

# Requests from the agent being served at once, each until its answer is written. Unbounded, an
# agent that sends requests and never reads its stdin made the client keep every answer (a
# 10 MB file read each) and a task per request. Past it, a short error answer; past twice it,
# nothing (even small answers pile up when the agent does not read), a protocol error instead.
MAX_INCOMING = 64


@dataclass(eq=False)
class _Pending:
    method: str
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: BaseException | None = None


@dataclass(eq=False)
class _Incoming:
    scope: anyio.CancelScope
    cancelled_by_peer: bool = False


class Connection:
    def __init__(
        self,
        process: AgentTransport,
        *,
        on_update: Callable[[Any], None],
        on_request: RequestHandler,
        on_protocol_error: Callable[[str], None],
        on_closed: Callable[[BaseException], None] | None = None,
        wire: WireLog | None = None,
        trace: bool = False,
    ) -> None:
        self.process = process
        #: Every message each way, the last few kept (`%agent log`; a sink may write them out).
        self.wire = wire if wire is not None else WireLog()
        self._record_out = self.wire.recorder("out")
        self.trace = trace  # put a W3C `traceparent` in each request's `_meta`
        self._on_update = on_update
        self._on_request = on_request
        self._on_protocol_error = on_protocol_error
        self._on_closed = on_closed
        self._next_id = 0
        self._pending: dict[int, _Pending] = {}
        # Requests we stopped waiting for ($/cancel_request sent): the agent still answers
        # them, as the spec requires, and that late answer is not a protocol error.
        self._abandoned: collections.deque[int] = collections.deque(maxlen=1000)
        self._incoming: dict[Any, _Incoming] = {}
        self._serving = 0  # tasks answering the agent's requests (see MAX_INCOMING)
        self._tg: anyio.abc.TaskGroup | None = None
        self.closed: BaseException | None = None  # why, once closed
        self.closed_event = anyio.Event()
        self.malformed = 0

    # -- reading ---------------------------------------------------------------------------------

    def _report_dropped(self, splitter: rpc.LineSplitter) -> None:
        for size in splitter.dropped:
            self._dispatch(
                rpc.Malformed(
                    f"a line longer than the limit of {splitter.max_line} bytes",
                    f"{size} bytes, dropped",
                )
            )
        splitter.dropped.clear()

    async def run(self, task_group: anyio.abc.TaskGroup) -> None:
        """Read until the agent closes stdout; then fail whatever is still waiting.

        Long because it is the hot loop of every byte the agent sends: one frame, with the
        callables bound to locals, is what keeps the client near a bare JSON reader's cost
        (`bench/bench_stream.py`); the cold paths (errors, dropped lines) are calls out of it.
        """
        self._tg = task_group
        splitter = rpc.LineSplitter()
        loads = rpc.loads
        too_deep = rpc.too_deep
        deep_min = rpc.DEEP_MIN_CHARS
        on_update = self._on_update
        update_method = methods.SESSION_UPDATE
        record = self.wire.recorder("in")
        try:
            while True:
                try:
                    data = await self.process.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                lines = splitter.feed(data)
                if splitter.dropped:
                    self._report_dropped(splitter)
                if not lines:
                    continue
                # Decode a whole read at once: json.loads(str) skips the per-line encoding
                # detection and decode that json.loads(bytes) does (about a third of parse time).
                # Invalid UTF-8 anywhere falls back to lines as bytes, so only that line fails.
                batch: list[bytes] | list[str]
                try:
                    batch = b"\n".join(lines).decode("utf-8").split("\n")
                except UnicodeDecodeError:
                    batch = lines
                record(batch)
                for item in batch:
                    if isinstance(item, bytes):
                        # Never json.loads(bytes): it guesses UTF-16/32 from NUL bytes, so a
                        # non-UTF-8 line could parse here but not in a read without bad bytes.
                        try:
                            line = item.decode("utf-8")
                        except UnicodeDecodeError:
                            if item.strip():
                                self._dispatch(rpc.decode(item))
                            continue
                    else:
                        line = item
                    # Hot path: a well-formed session/update notification goes straight to the fold.
                    try:
                        obj = loads(line)
                    except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested deep
                        if line.strip():
                            # _dispatch, not _malformed: whatever decode() says, nothing asserts.
                            # (It used to assert, and a UTF-16 line that json.loads(bytes)
                            # accepted raised AssertionError and killed the client.)
                            self._dispatch(rpc.decode(line.encode("utf-8", "surrogateescape")))
                        continue
                    if len(line) >= deep_min and too_deep(line, obj):
                        self._dispatch(rpc.Malformed("JSON nested too deeply", rpc.excerpt(line)))
                        continue
                    if type(obj) is dict and obj.get("method") == update_method and "id" not in obj:
                        on_update(obj.get("params"))
                    else:
                        self._dispatch(rpc.classify(obj, line))
            rest = splitter.flush()
            if splitter.dropped:
                self._report_dropped(splitter)
            if rest.strip():
                record([rest])
                self._dispatch(rpc.decode(rest))
        finally:
            await self._closed_by_agent()

    def _dispatch(self, frame: rpc.Frame) -> None:
        if isinstance(frame, rpc.Notification):
            if frame.method == methods.SESSION_UPDATE:
                self._on_update(frame.params)
            elif frame.method == methods.CANCEL_REQUEST:
                self._peer_cancelled(frame.params)
            # Other notifications, known or not, need nothing from us (the spec says ignore).
        elif isinstance(frame, rpc.Request):
            assert self._tg is not None
            if self._serving < MAX_INCOMING:
                self._serving += 1
                self._tg.start_soon(self._serve, frame, name=f"acp request {frame.method}")
            elif self._serving < 2 * MAX_INCOMING:
                self._serving += 1
                self._tg.start_soon(self._refuse, frame, name="acp request refused")
            else:
                self._on_protocol_error(
                    f"the agent sent more than {2 * MAX_INCOMING} requests at once without "
                    f"reading the answers; {rpc.excerpt(frame.method, 60)} was dropped"
                )
        elif isinstance(frame, rpc.Response):
            self._resolve(frame)
        else:
            self._malformed(frame)

    def _malformed(self, frame: rpc.Frame) -> None:
        self.malformed += 1
        assert isinstance(frame, rpc.Malformed)
        self._on_protocol_error(f"the agent sent {frame.reason}: {frame.line}")

    def _resolve(self, frame: rpc.Response) -> None:
        # type() is int, not isinstance: an id of `true` would otherwise answer request 1.
        pending = self._pending.pop(frame.id, None) if type(frame.id) is int else None
        if pending is None:
            if type(frame.id) is int and frame.id in self._abandoned:
                self._abandoned.remove(frame.id)
                return
            self._on_protocol_error(
                f"the agent answered an unknown or already answered "
                f"request id {rpc.excerpt(repr(frame.id))}"
            )
            return
        if frame.error is not None:
            err = frame.error
            code = err.get("code")
            pending.error = RequestError(
                pending.method,
                code if isinstance(code, int) else rpc.INTERNAL_ERROR,
                str(err.get("message", "unknown error")),
                err.get("data"),
            )
        else:
            pending.result = frame.result
        pending.done.set()

    async def _closed_by_agent(self) -> None:
        with anyio.CancelScope(shield=True):
            code = await self.process.wait(1.0)
        tail = self.process.stderr.text()
        if self.process.killed_by_us:
            message = "the agent process was stopped"
        elif code is None:
            message = "the agent closed its output"
        else:
            message = f"the agent process exited with code {code}"
        if tail:
            message += f"; its last stderr output:\n{tail}"
        self.close(AgentExitedError(message, returncode=code, stderr_tail=tail))

    def _closed_error(self) -> BaseException:
        """A fresh copy of why the connection closed, chained to it, for one caller to raise.

        Raising the one stored exception again from every later request appended this call's
        frames to its traceback each time (it grew without end in a long-lived kernel), and a
        caller that annotated it changed it for all the others.
        """
        reason = self.closed
        assert reason is not None
        try:
            fresh = copy.copy(reason)  # ours all copy: their fields are in args or __dict__
        except Exception:  # a type that cannot be rebuilt: the same meaning, still fresh
            fresh = AgentExitedError(str(reason))
        fresh.__traceback__ = None
        fresh.__cause__ = reason
        fresh.__suppress_context__ = True
        return fresh

    def close(self, reason: BaseException) -> None:
        """Fail every waiting request with `reason`; later requests fail at once."""
        if self.closed is not None:
            return
        self.closed = reason
        self.closed_event.set()
        for pending in self._pending.values():
            pending.error = reason
            pending.done.set()
        self._pending.clear()
        for incoming in self._incoming.values():
            incoming.scope.cancel()
        if self._on_closed is not None:
            self._on_closed(reason)

    # -- requests from the agent -----------------------------------------------------------------

    async def _refuse(self, request: rpc.Request) -> None:
        try:
            if self.closed is None:
                with anyio.CancelScope(shield=True):
                    await self._send(
                        rpc.encode_error(
                            request.id,
                            rpc.INTERNAL_ERROR,
                            f"too many requests at once (more than {MAX_INCOMING}); "
                            "wait for the answers",
                        )
                    )
        except AcpError:
            # The connection closed meanwhile (the agent exited, or the client closed it: a
            # ClientClosedError escaped here and broke the task group): nobody to answer.
            pass
        finally:
            self._serving -= 1

    async def _serve(self, request: rpc.Request) -> None:
        try:
            await self._serve_one(request)
        finally:
            self._serving -= 1

    async def _serve_one(self, request: rpc.Request) -> None:
        scope = anyio.CancelScope()
        incoming = _Incoming(scope)
        if request.id in self._incoming:
            self._on_protocol_error(
                f"the agent reused request id {rpc.excerpt(repr(request.id))} "
                "while it was still pending"
            )
        self._incoming[request.id] = incoming
        reply: bytes | None = None
        try:
            with scope:
                try:
                    result = await self._on_request(request.method, request.params)
                    reply = rpc.encode_result(request.id, {} if result is None else result)
                except RpcError as exc:
                    reply = rpc.encode_error(request.id, exc.code, exc.message, exc.data)
                except Exception as exc:  # a bug of ours must not kill the connection
                    reply = rpc.encode_error(
                        request.id, rpc.INTERNAL_ERROR, f"client error: {type(exc).__name__}: {exc}"
                    )
            if reply is None and incoming.cancelled_by_peer:
                if request.method == methods.REQUEST_PERMISSION:
                    # The spec's answer to a cancelled permission request is the `cancelled`
                    # outcome (-32800 is for the other requests); agents wait for an outcome.
                    reply = rpc.encode_result(request.id, {"outcome": {"outcome": "cancelled"}})
                else:
                    reply = rpc.encode_error(request.id, rpc.REQUEST_CANCELLED, "request cancelled")
        finally:
            if self._incoming.get(request.id) is incoming:
                del self._incoming[request.id]
        if reply is not None and self.closed is None:
            with anyio.CancelScope(shield=True):
                try:
                    await self._send(reply)
                except AcpError:
                    pass  # the connection closed meanwhile (see _refuse): nobody to answer

    def _peer_cancelled(self, params: Any) -> None:
        rid = params.get("requestId") if isinstance(params, dict) else None
        if type(rid) not in (int, str):  # a list or object id is unhashable: TypeError
            return
        incoming = self._incoming.get(rid)
        if incoming is not None:  # already answered: the spec says ignore the cancel
            incoming.cancelled_by_peer = True
            incoming.scope.cancel()

    # -- requests to the agent -------------------------------------------------------------------

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        """Send a request and wait for its result; raises `RequestError` or `AgentExitedError`.

        If the caller is cancelled (or times out) while waiting, the agent is told with
        `$/cancel_request` and the late answer is ignored.
        """
        if self.closed is not None:
            raise self._closed_error()
        self._next_id += 1
        rid = self._next_id
        pending = _Pending(method)
        self._pending[rid] = pending
        if self.trace:
            params = with_trace(params, traceparent())
        try:
            await self._send(rpc.encode_request(rid, method, params))
            with anyio.fail_after(timeout if timeout is not None else math.inf):
                await pending.done.wait()
        except BaseException:
            if self._pending.pop(rid, None) is not None and self.closed is None:
                self._abandoned.append(rid)
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await self._send(
                        rpc.encode_notification(methods.CANCEL_REQUEST, {"requestId": rid})
                    )
            raise
        if pending.error is not None:
            if pending.error is self.closed:  # shared by every request the close failed
                raise self._closed_error()
            raise pending.error
        return pending.result

    async def notify(self, method: str, params: Any) -> None:
        if self.closed is None:
            await self._send(rpc.encode_notification(method, params))

    async def _send(self, data: bytes) -> None:
        self._record_out((data,))
        try:
            await self.process.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            # The reader sees the EOF and closes with the exit code: report that, not EPIPE.
            with anyio.move_on_after(1.0):
                await self.closed_event.wait()
            if self.closed is not None:
                fresh = self._closed_error()
                raise fresh from fresh.__cause__
            raise ProtocolError(f"could not write to the agent: {exc}") from None
