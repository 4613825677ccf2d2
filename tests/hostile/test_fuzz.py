"""Property-based fuzzing of what the agent controls: its stdout bytes and its update payloads.

Properties: the JSON-RPC reader (`LineSplitter`, `decode`/`classify`, and the `Connection` read
loop fed through a fake process) never raises and treats every line the same however the bytes
were chunked; malformed frames become protocol errors, which the client attaches to the running
turn as `ErrorPart`s while the turn goes on (checked end to end through the scripted agent's
`raw_hex` steps); the update fold never raises, keeps unknown kinds as `RawPart`s, and always
leaves a transcript that `json.dumps` can save. Example counts are moderate: the file runs in
well under a minute.
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from acp_notebook.client.client import Client, connect
from acp_notebook.client.connection import Connection
from acp_notebook.client.process import StderrTail
from acp_notebook.client.session import Session
from acp_notebook.errors import AgentExitedError, RequestError, RpcError
from acp_notebook.protocol import jsonrpc as rpc
from acp_notebook.protocol.fold import SessionFold
from acp_notebook.protocol.limits import DEFAULT_LIMITS, bounded
from acp_notebook.protocol.state import ErrorPart, MessagePart, RawPart
from acp_notebook.protocol.turn import finish
from tests.agents.script import agent_command, script

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- strategies -----------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=16,
)
request_ids = st.integers(-3, 5) | st.text(max_size=4) | st.none() | st.booleans() | st.just([1])


@st.composite
def frames(draw: st.DrawFn) -> dict[str, Any]:
    """JSON-RPC-shaped objects, valid or nearly so."""
    kind = draw(st.sampled_from(["update", "request", "response", "error", "cancel", "other"]))
    msg: dict[str, Any] = {"jsonrpc": "2.0"}
    if kind == "update":
        msg.update(
            method="session/update",
            params={"sessionId": draw(st.sampled_from(["s1", "s2"])), "update": draw(json_values)},
        )
    elif kind == "request":
        msg.update(
            id=draw(request_ids),
            method=draw(
                st.sampled_from(["fs/read_text_file", "session/request_permission", "x/unknown"])
            ),
            params=draw(json_values),
        )
    elif kind == "response":
        msg.update(id=draw(request_ids), result=draw(json_values))
    elif kind == "error":
        msg.update(id=draw(request_ids), error=draw(json_values))
    elif kind == "cancel":
        msg.update(method="$/cancel_request", params={"requestId": draw(request_ids)})
    else:
        msg.update(
            draw(
                st.dictionaries(
                    st.sampled_from(["id", "method", "params", "result"]), json_values, max_size=3
                )
            )
        )
    return msg


def _no_newline(data: bytes) -> bytes:
    return data.replace(b"\n", b" ")


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """One line (without its newline): garbage, a JSON value, or a frame in some encoding."""
    how = draw(
        st.sampled_from(["garbage", "json", "frame", "frame", "utf16", "bad_utf8", "deep", "blank"])
    )
    if how == "garbage":
        return _no_newline(draw(st.binary(max_size=60)))
    if how == "json":
        return json.dumps(draw(json_values), ensure_ascii=draw(st.booleans())).encode()
    if how == "blank":
        return draw(st.sampled_from([b"", b"  ", b"\r", b"\t "]))
    frame = json.dumps(draw(frames()), ensure_ascii=False)
    if how == "utf16":
        return _no_newline(frame.encode("utf-16-le"))
    if how == "bad_utf8":
        raw = frame.encode()
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + raw[at:]
    if how == "deep":
        depth = draw(st.integers(95, 2000))
        return (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",'
            b'"update":' + b"[" * depth + b"]" * depth + b"}}"
        )
    return frame.encode()


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


# -- the line splitter and the frame decoder ------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=400), cuts=st.lists(st.integers(0, 400), max_size=12))
def test_line_splitter_loses_and_invents_nothing(data: bytes, cuts: list[int]) -> None:
    splitter = rpc.LineSplitter()
    out: list[bytes] = []
    for piece in chunked(data, cuts):
        out.extend(splitter.feed(piece))
    assert splitter.buffered == len(data.rsplit(b"\n", 1)[-1])
    out.append(splitter.flush())
    assert out == data.split(b"\n")
    assert splitter.buffered == 0 and splitter.flush() == b""


@FUZZ
@given(line=st.binary(max_size=300) | lines())
def test_decode_never_raises_and_is_strict(line: bytes) -> None:
    frame = rpc.decode(line)
    assert isinstance(frame, rpc.Request | rpc.Notification | rpc.Response | rpc.Malformed)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        # Never guessed as UTF-16/32 (json.loads(bytes) would): invalid UTF-8 is malformed.
        assert frame == rpc.Malformed("invalid UTF-8", rpc.excerpt(line))
        return
    if isinstance(frame, rpc.Malformed):
        assert len(frame.line) < 260  # an excerpt, never the whole line
    else:
        assert rpc.classify(rpc.loads(text), line) == frame


def _parsed(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", parse(text)
    except ValueError:
        return "error", None
    except RecursionError:
        return "too deep", None


@FUZZ
@given(
    value=json_values,
    before=st.sampled_from(["", " ", "\t\n", "\ufeff", "\xa0"]),
    after=st.sampled_from(["", " ", "\r", " \t\r\n", "x", "{}", "]", " 1", "\xa0", "\x00"]),
    noise=st.text(max_size=24),
)
def test_loads_says_what_the_decoder_says(value: Any, before: str, after: str, noise: str) -> None:
    # rpc.loads runs the decoder's scanner straight, and the whole decoder only when a line is
    # not one value and JSON whitespace: the same value, or an error, for any line.
    for text in (before + json.dumps(value) + after, noise, before + noise + after, "[" * 5000):
        assert _parsed(rpc.loads, text) == _parsed(rpc._DECODER.decode, text), repr(text)


@FUZZ
@given(obj=json_values | frames())
def test_classify_never_raises_and_sorts_frames(obj: Any) -> None:
    frame = rpc.classify(obj)
    if not isinstance(obj, dict):
        assert isinstance(frame, rpc.Malformed)
    elif isinstance(frame, rpc.Request):
        assert isinstance(obj["method"], str) and "id" in obj
        assert frame.id is None or type(frame.id) in (int, str)
    elif isinstance(frame, rpc.Notification):
        assert isinstance(obj["method"], str) and "id" not in obj
    elif isinstance(frame, rpc.Response):
        assert "method" not in obj or obj["method"] is None
        assert frame.error is None or isinstance(frame.error, dict)
    # The wire round trip gives the same frame (ids and params compared as JSON), numbers beyond
    # 64 bits read as null.
    assert rpc.decode(json.dumps(obj).encode()) == rpc.classify(
        bounded(obj, 1 << 62)[0]
    ) or isinstance(frame, rpc.Malformed)


def test_depth_limit_is_exact() -> None:
    def nested(depth: int) -> bytes:  # the object is level 1, each list one more
        return b'{"a":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"

    deepest = rpc.decode(nested(rpc.MAX_DEPTH))
    assert isinstance(deepest, rpc.Malformed)
    assert deepest.reason == "neither request, notification nor response"  # parsed, then sorted
    for line in (nested(rpc.MAX_DEPTH + 1), b"[" * 100_000):  # the second overflows json itself
        frame = rpc.decode(line)
        assert isinstance(frame, rpc.Malformed) and frame.reason == "JSON nested too deeply"


# -- the Connection read loop, through a fake process ---------------------------------------------


class FakeProcess:
    """The part of AgentProcess a Connection uses: stdout chunks in, replies collected."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = collections.deque(chunks)
        self.sent: list[bytes] = []
        self.stderr = StderrTail()
        self.killed_by_us = False
        self.eof = anyio.Event()

    async def receive(self) -> bytes:
        await anyio.lowlevel.checkpoint()
        if self.chunks:
            return self.chunks.popleft()
        await self.eof.wait()  # the test ends the stream once every handler has answered
        raise anyio.EndOfStream

    async def send(self, data: bytes) -> None:
        self.sent.append(data)

    async def wait(self, timeout: float) -> int | None:
        return 0


def expected(line_list: list[bytes], final_newline: bool) -> dict[str, Any]:
    """What the reader must do with these lines, one by one, whatever the chunking: the oracle
    is `rpc.decode` of each line on its own. Request id 1 is ours (`initialize`, pending)."""
    out: dict[str, Any] = {
        "updates": [],
        "errors": 0,
        "replies": collections.Counter(),
        "answered": None,
    }
    pending = True
    for index, line in enumerate(line_list):
        unterminated = index == len(line_list) - 1 and not final_newline
        if not line.strip():
            continue
        frame = rpc.decode(line)
        if isinstance(frame, rpc.Malformed):
            out["errors"] += 1
        elif isinstance(frame, rpc.Notification):
            if frame.method == "session/update":
                out["updates"].append(frame.params)
        elif isinstance(frame, rpc.Request):
            if not unterminated:  # one read at EOF: the agent is gone, nobody to answer
                out["replies"][json.dumps(frame.id)] += 1
        elif pending and type(frame.id) is int and frame.id == 1:
            pending = False
            out["answered"] = frame
        else:
            out["errors"] += 1
    return out


def _str_blank_mismatch(line: bytes) -> bool:
    # Lines of only non-ASCII whitespace (U+0085, U+00A0, U+2028...) are skipped as blank by the
    # str fast path but not by bytes.strip(); the oracle cannot tell which path a line takes.
    try:
        return not line.decode("utf-8").strip() and bool(line.strip())
    except UnicodeDecodeError:
        return False


async def read_all(
    chunks: list[bytes],
) -> tuple[Connection, FakeProcess, list[Any], list[str], Any]:
    updates: list[Any] = []
    errors: list[str] = []

    async def on_request(method: str, params: Any) -> Any:
        raise RpcError(rpc.METHOD_NOT_FOUND, f"method not found: {method}")

    process = FakeProcess(chunks)
    conn = Connection(
        process,
        on_update=updates.append,  # type: ignore[arg-type]
        on_request=on_request,
        on_protocol_error=errors.append,
    )
    outcome: list[Any] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                try:
                    outcome.append(await conn.request("initialize", {}))
                except (AgentExitedError, RequestError) as exc:
                    outcome.append(exc)

            tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()  # the request is sent: id 1 is pending
            tg.start_soon(conn.run, tg)
            while process.chunks:
                await anyio.wait_all_tasks_blocked()
            await anyio.wait_all_tasks_blocked()  # every handler has answered
            process.eof.set()
    return conn, process, updates, errors, outcome[0]


@settings(FUZZ, max_examples=80)  # each example runs an event loop
@given(
    line_list=st.lists(lines(), max_size=8),
    final_newline=st.booleans(),
    cuts=st.lists(st.integers(0, 10_000), max_size=10),
)
def test_connection_reader_never_raises_and_ignores_chunking(
    line_list: list[bytes], final_newline: bool, cuts: list[int]
) -> None:
    assume(not any(_str_blank_mismatch(line) for line in line_list))
    data = b"\n".join(line_list) + (b"\n" if final_newline else b"")
    want = expected(line_list, final_newline)
    conn, process, updates, errors, outcome = anyio.run(read_all, chunked(data, cuts))
    assert updates == want["updates"]
    assert len(errors) == want["errors"], errors
    assert conn.malformed <= len(errors)
    replies = collections.Counter()
    for sent in process.sent[1:]:  # [0] is our initialize request
        msg = json.loads(sent)
        assert msg["error"]["code"] == rpc.METHOD_NOT_FOUND
        replies[json.dumps(msg["id"])] += 1
    assert replies == want["replies"]
    if want["answered"] is None:
        assert isinstance(outcome, AgentExitedError)  # failed at EOF, not left waiting
    elif want["answered"].error is None:
        assert outcome == want["answered"].result
    else:
        assert isinstance(outcome, RequestError)
    assert conn.closed is not None and conn.closed_event.is_set()
    assert not conn._pending and not conn._incoming


@settings(max_examples=60, deadline=None)
@given(params=json_values, sids=st.lists(st.text(min_size=1, max_size=6), max_size=40))
def test_client_routing_of_updates_never_raises_and_stays_bounded(
    params: Any, sids: list[str]
) -> None:
    client = Client(["true"])  # never started: routing only
    client.registry.route_update(params)
    for sid in sids:
        client.registry.route_update({"sessionId": sid, "update": {"sessionUpdate": "x"}})
    for n in range(200):  # an agent inventing session ids must not grow memory without bound
        client.registry.route_update({"sessionId": f"bogus-{n}", "update": {}})
    assert len(client.registry.held()) <= 16


# -- the update fold -------------------------------------------------------------------------------

KNOWN = [
    "agent_message_chunk",
    "agent_thought_chunk",
    "user_message_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
]
TEXT = {"type": "text", "text": "hi"}
VALID: dict[str, dict[str, Any]] = {
    "agent_message_chunk": {"content": TEXT, "messageId": "m1"},
    "agent_thought_chunk": {"content": {"type": "image", "data": "AAAA", "mimeType": "image/png"}},
    "user_message_chunk": {"content": {"type": "resource_link", "uri": "file:///a", "name": "a"}},
    "tool_call": {
        "toolCallId": "c1",
        "title": "Read",
        "kind": "read",
        "status": "pending",
        "content": [
            {"type": "content", "content": TEXT},
            {"type": "diff", "path": "/a", "oldText": "x", "newText": "y"},
            {"type": "terminal", "terminalId": "t1"},
        ],
        "locations": [{"path": "/a", "line": 3}],
        "rawInput": {"path": "/a"},
    },
    "tool_call_update": {"toolCallId": "c1", "status": "completed", "rawOutput": {"ok": True}},
    "plan": {"entries": [{"content": "step", "priority": "high", "status": "pending"}]},
    "available_commands_update": {
        "availableCommands": [{"name": "web", "description": "search", "input": {"hint": "query"}}]
    },
    "current_mode_update": {"currentModeId": "ask"},
    "config_option_update": {
        "configOptions": [
            {
                "id": "model",
                "name": "Model",
                "type": "select",
                "currentValue": "a",
                "options": [{"value": "a", "name": "A"}],
            }
        ]
    },
    "session_info_update": {"title": "T", "updatedAt": "2026-01-01T00:00:00Z"},
    "usage_update": {"used": 10, "size": 100, "cost": {"amount": 0.5, "currency": "USD"}},
}


@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A valid update of a known kind, then a few random edits: drop, replace or add fields,
    one or two levels down."""
    kind = draw(st.sampled_from(KNOWN))
    update: dict[str, Any] = {"sessionUpdate": kind, **json.loads(json.dumps(VALID[kind]))}
    for _ in range(draw(st.integers(0, 3))):
        target: Any = update
        if draw(st.booleans()):
            nested = [v for v in update.values() if isinstance(v, dict | list) and v]
            if nested:
                target = draw(st.sampled_from(nested))
                if isinstance(target, list):
                    target = target[0] if isinstance(target[0], dict) else update
        keys = [k for k in target if k != "sessionUpdate" or draw(st.booleans())]
        action = draw(st.sampled_from(["drop", "replace", "add"]))
        if action == "drop" and keys:
            del target[draw(st.sampled_from(keys))]
        elif action == "replace" and keys:
            target[draw(st.sampled_from(keys))] = draw(json_values)
        else:
            target[draw(st.text(max_size=10))] = draw(json_values)
    return update


def _kept_whole(raw: Any, update: Any) -> bool:
    """The update as sent, or (only for numbers beyond 64 bits or non-finite) with them null."""
    return raw is update or raw == bounded(update, DEFAULT_LIMITS.value_chars)[0]


def _check_transcript(fold: SessionFold) -> None:
    record = fold.end_turn()
    assert record is not None
    result = finish(
        record,
        stop_reason="end_turn",
        error=None,
        usage=fold.facts.usage,
        session_id="s",
        agent="a",
    )
    json.dumps(result.to_json(), allow_nan=False)  # a saved notebook must be able to hold it
    json.dumps(fold.ambient.to_json(), allow_nan=False)


@FUZZ
@given(updates=st.lists(json_values | near_valid(), min_size=1, max_size=6), in_turn=st.booleans())
def test_fold_never_raises_and_keeps_everything_serializable(
    updates: list[Any], in_turn: bool
) -> None:
    fold = SessionFold(emit=lambda m: None)
    if in_turn:
        fold.begin_turn("t1", [TEXT])
    for update in updates:
        before = len(fold.target.parts)
        fold.apply(update)
        if not isinstance(update, dict):
            part = fold.target.parts[-1]
            assert isinstance(part, RawPart) and _kept_whole(part.raw, update)
            assert len(fold.target.parts) == before + 1
    if not in_turn:
        fold.begin_turn("t1", [TEXT])
    _check_transcript(fold)


@FUZZ
@given(
    kind=st.text(max_size=20).filter(lambda k: k not in KNOWN)
    | json_values.filter(lambda k: not isinstance(k, str)),
    body=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
)
def test_unknown_kinds_survive_as_raw_parts(kind: Any, body: dict[str, Any]) -> None:
    fold = SessionFold()
    fold.begin_turn("t1", [])
    update = {**body, "sessionUpdate": kind}
    fold.apply(update)
    (part,) = fold.turn.parts  # type: ignore[union-attr]
    assert isinstance(part, RawPart)
    assert _kept_whole(part.raw, update)
    assert part.update_kind == str(kind)[:200]  # a name, cut: the whole kind is in raw
    assert fold.ambient.parts == []  # it went to the running turn, nowhere else


@FUZZ
@given(update=near_valid())
def test_near_valid_updates_fold_or_become_raw_parts(update: dict[str, Any]) -> None:
    fold = SessionFold()
    fold.begin_turn("t1", [])
    fold.apply(update)
    parts = fold.turn.parts  # type: ignore[union-attr]
    kind = update.get("sessionUpdate")
    if kind not in KNOWN:
        assert isinstance(parts[-1], RawPart) and _kept_whole(parts[-1].raw, update)
    for part in parts:
        if isinstance(part, RawPart):
            assert _kept_whole(part.raw, update)  # kept whole: nothing the agent said is dropped
    _check_transcript(fold)


@FUZZ
@given(tool_call=json_values | near_valid(), options=json_values)
def test_permission_parts_from_any_payload(tool_call: Any, options: Any) -> None:
    fold = SessionFold()
    fold.begin_turn("t1", [])
    opts = [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []
    part = fold.add_permission(tool_call, opts)
    fold.resolve_permission(part, None, "policy")
    _check_transcript(fold)


# -- end to end: garbage from a real agent process during a turn ----------------------------------


@pytest.fixture(scope="module")
def live_session(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[BlockingPortal, Session]]:
    """One scripted agent and session for all examples: the portal runs the client's loop."""
    cwd = tmp_path_factory.mktemp("fuzz")

    @asynccontextmanager
    async def opened() -> AsyncIterator[Session]:
        async with connect(agent_command(), cwd=cwd, max_retries=0) as client:
            yield await client.new_session()

    with start_blocking_portal(backend="asyncio") as portal:
        with portal.wrap_async_context_manager(opened()) as session:
            yield portal, session


def garbage_lines() -> st.SearchStrategy[bytes]:
    """Lines the reader must reject: never a valid frame."""

    def malformed(line: bytes) -> bool:
        return bool(line.strip()) and isinstance(rpc.decode(line), rpc.Malformed)

    return (
        (
            st.binary(min_size=1, max_size=40).map(_no_newline)
            | json_values.map(lambda v: json.dumps(v).encode())
            | lines()
        )
        .filter(malformed)
        .filter(lambda line: not _str_blank_mismatch(line))
    )


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(garbage=st.lists(garbage_lines(), min_size=1, max_size=4))
def test_garbage_mid_turn_becomes_error_parts_and_the_turn_goes_on(
    live_session: tuple[BlockingPortal, Session], garbage: list[bytes]
) -> None:
    portal, session = live_session
    steps: list[dict[str, Any]] = [{"say": "before "}]
    steps += [{"raw_hex": line.hex()} for line in garbage]
    steps.append({"say": "after"})

    async def turn() -> Any:
        with anyio.fail_after(15):
            return await (await session.prompt(script(*steps))).finished

    result = portal.call(turn)
    assert result.success, result
    assert result.text == "before \n\nafter"  # two messages: the errors came in between
    assert len(result.errors) == len(garbage), result.errors
    for message, line in zip(result.errors, garbage, strict=True):
        frame = rpc.decode(line)
        assert isinstance(frame, rpc.Malformed)
        assert message.startswith(f"the agent sent {frame.reason}")
    # In arrival order, between the two halves of the answer.
    kinds = [type(p) for p in result.parts]
    assert kinds == [MessagePart] + [ErrorPart] * len(garbage) + [MessagePart]
    assert session.client.processes_started == 1


def test_garbage_goes_to_running_turns_only(live_session: tuple[BlockingPortal, Session]) -> None:
    portal, session = live_session
    client = session.client

    async def run() -> Any:
        with anyio.fail_after(15):
            idle = await client.new_session()  # no turn running: nothing is attached to it
            turn = await session.prompt(script({"raw": "not json"}, {"say": "ok"}))
            result = await turn.finished
            return idle, result

    idle, result = portal.call(run)
    assert result.success and result.errors == ("the agent sent invalid JSON: not json",)
    assert client.protocol_errors[-1] == "the agent sent invalid JSON: not json"
    assert idle.history == [] and idle.ambient.parts == []
