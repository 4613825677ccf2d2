"""End-to-end matrix against real ACP agents written by others, offline (Zed-style).

Agents (installed by tests/setup.sh; launch commands in tests/real_agents.py; their measured
wire behaviour is in tests/agents/REAL_AGENTS.md):

- fast-agent 0.10.48 with `--model passthrough` (echoes the prompt), `--model slow` (answers
  after about 3 s) and `--shell` (`***CALL_TOOL execute {...}` asks permission, then runs the
  command in a client terminal).
- the Python SDK's `examples/echo_agent.py`: no capabilities at all, one chunk per prompt block.

Which case runs against which agent, and why:

    case                                      fast-agent   echo
    1 plain prompt                            yes          yes
    2 file attached (resource / link)         yes          yes  (no embeddedContext: the client
                                                                 must downgrade to resource_link)
    3 tool call allowed by policy, terminal   yes          no   (it has no tools and never sends
    4 permission asked: allow_once / reject   yes          no    agent->client requests)
    5 cancel: slow turn, pending permission,  yes          no   (a turn takes ~1 ms and it ignores
      running client terminal                                    session/cancel: nothing to cancel)
    6 agent SIGKILLed mid-turn, then restart  yes          yes  (echo: killed as the turn starts,
                                                                 since its turn is ~1 ms; it cannot
                                                                 resume, so a new session opens)

Only supported cases are parametrized (no skips). One extra echo-only test checks the default
retry of a turn whose agent died before any output (cheap there; fast-agent restarts slowly).

fast-agent takes 4-8 s to initialize, so cases that leave the process alone share one
passthrough client per module (each test opens its own session and sets that session's
permission policy/handler); the slow-cancel and exit cases start their own. Tests synchronise
on events (subscribed mutations, permission handlers), never on sleeps.

fast-agent quirk, not asserted either way: its permission request names `toolCallId: "pending"`
before the real `tool_call`, so the turn also holds a placeholder call "pending"; the tests look
at the real call.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_notebook import PermissionPolicy, PermissionRequest, TurnStarted
from acp_notebook.client.client import Client, connect
from acp_notebook.client.session import Session
from acp_notebook.protocol.mutations import Delta, Mutation, PartUpdated
from acp_notebook.protocol.state import MessagePart, ToolCallPart
from acp_notebook.protocol.turn import TurnResult
from tests.real_agents import echo_agent_command, fast_agent_command

pytestmark = [pytest.mark.anyio, pytest.mark.real_agent]

CALL_ECHO_HI = '***CALL_TOOL execute {"command":"echo hi"}'
PERMISSION_KINDS = ["allow_once", "allow_always", "reject_once", "reject_always"]


@dataclass(frozen=True)
class RealAgent:
    name: str
    cases: frozenset[str]
    embedded_context: bool  # promptCapabilities.embeddedContext
    resumes: bool  # a restarted process resumes a session that has had a turn (same id)
    shared_fixture: str

    def command(self, home: Path, model: str = "passthrough") -> list[str]:
        if self.name == "fast-agent":
            return fast_agent_command(model, home, shell=True)
        return echo_agent_command()


FAST = RealAgent(
    "fast-agent",
    frozenset({"plain", "file", "tool", "ask", "cancel", "exit"}),
    embedded_context=True,
    resumes=True,
    shared_fixture="fast_shared",
)
ECHO = RealAgent(
    "echo",
    frozenset({"plain", "file", "exit"}),
    embedded_context=False,
    resumes=False,
    shared_fixture="echo_shared",
)
AGENTS = (FAST, ECHO)


def agents_for(case: str) -> list[Any]:
    return [pytest.param(a, id=a.name) for a in AGENTS if case in a.cases]


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module scope: the shared clients live across this module's tests


def _options(**overrides: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "terminal": True,
        "permission_policy": PermissionPolicy(allow={"execute"}),
        "cancel_grace": 5,
    }
    options.update(overrides)
    return options


@pytest.fixture(scope="module")
async def fast_shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    tmp = tmp_path_factory.mktemp("fast-agent")
    (tmp / "work").mkdir()
    # Startup is bounded by the client's initialize_timeout (60 s).
    async with connect(FAST.command(tmp / "home"), cwd=tmp / "work", **_options()) as client:
        yield client


@pytest.fixture(scope="module")
async def echo_shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    tmp = tmp_path_factory.mktemp("echo")
    async with connect(ECHO.command(tmp / "home"), cwd=tmp, **_options()) as client:
        yield client


@pytest.fixture
def shared(agent: RealAgent, request: pytest.FixtureRequest) -> Client:
    """The module's client for `agent` (only that agent is started: a missing one skips alone)."""
    client = request.getfixturevalue(agent.shared_fixture)
    assert isinstance(client, Client) and client.processes_started == 1
    return client


# -- helpers -------------------------------------------------------------------------------------


class Recorder:
    """A session's mutations as they happen, and the text of each agent chunk per turn."""

    def __init__(self, session: Session, on: Callable[[Mutation], None] | None = None) -> None:
        self.items: list[Mutation] = []
        self.chunks: dict[str | None, list[str]] = {}
        self.started = anyio.Event()
        self._messages: set[str] = set()
        self._on = on
        self.unsubscribe = session.subscribe(self._record)

    def _record(self, mutation: Mutation) -> None:
        self.items.append(mutation)
        if isinstance(mutation, TurnStarted):
            self.started.set()
        elif (
            isinstance(mutation, PartUpdated)
            and isinstance(mutation.part, MessagePart)
            and mutation.part.role == "agent"
            and mutation.part.part_id not in self._messages
        ):
            # A message part is published when its first chunk arrives; later chunks are Deltas.
            self._messages.add(mutation.part.part_id)
            self.chunks.setdefault(mutation.turn_id, []).append(mutation.part.text)
        elif isinstance(mutation, Delta) and mutation.channel == "text":
            self.chunks.setdefault(mutation.turn_id, []).append(mutation.text)
        if self._on is not None:
            self._on(mutation)

    def agent_chunks(self, turn_id: str) -> list[str]:
        return self.chunks.get(turn_id, [])


async def ask(session: Session, prompt: str | list[Any], timeout: float = 30) -> TurnResult:
    with anyio.fail_after(timeout):
        return await (await session.prompt(prompt)).finished


def real_calls(result: TurnResult) -> list[ToolCallPart]:
    # fast-agent's permission request uses the placeholder id "pending" (see the docstring).
    return [c for c in result.tool_calls if c.tool_call_id != "pending"]


def option_of(request: PermissionRequest, kind: str) -> str:
    return next(str(o["optionId"]) for o in request.options if o.get("kind") == kind)


def assert_ok(result: TurnResult, text: str) -> None:
    assert result.success, result
    assert result.stop_reason == "end_turn"
    assert result.error is None and result.errors == ()
    assert result.text == text


# -- 1. plain prompt -----------------------------------------------------------------------------


@pytest.mark.parametrize("agent", agents_for("plain"))
async def test_plain_prompt(agent: RealAgent, shared: Client) -> None:
    session = await shared.new_session()
    rec = Recorder(session)
    result = await ask(session, "hello world")
    assert_ok(result, "hello world")
    assert result.prompt == ({"type": "text", "text": "hello world"},)
    assert result.session_id == session.id and result.tool_calls == ()
    assert rec.agent_chunks(result.turn_id) == ["hello world"]  # both send one chunk here
    assert [h.turn_id for h in session.history] == [result.turn_id]


# -- 2. a file attached --------------------------------------------------------------------------


@pytest.mark.parametrize("agent", agents_for("file"))
async def test_attached_file_is_sent_as_the_agent_can_take_it(
    agent: RealAgent, shared: Client
) -> None:
    path = Path(shared.cwd) / f"notes-{agent.name}.txt"
    path.write_text("file body\n")
    session = await shared.new_session()
    rec = Recorder(session)
    result = await ask(session, ["look:", {"type": "file", "url": str(path)}])
    assert result.success and result.stop_reason == "end_turn", result
    # The record keeps the file's path relative to the workspace (no path of the machine);
    # the agent got the file:// URI, as its answer (fast-agent echoes it) shows.
    uri = path.name
    text_block = {"type": "text", "text": "look:"}
    if agent.embedded_context:
        # fast-agent advertises embeddedContext: the file goes inline, and passthrough echoes
        # the texts joined with "\n", the resource's text included.
        assert result.prompt == (
            text_block,
            {
                "type": "resource",
                "resource": {"uri": uri, "mimeType": "text/plain", "text": "file body\n"},
            },
        )
        assert result.text == "look:\nfile body\n"
    else:
        # No promptCapabilities: embedding is not allowed, so the client sends a link...
        assert result.prompt == (
            text_block,
            {
                "type": "resource_link",
                "uri": uri,
                "name": path.name,
                "mimeType": "text/plain",
                "size": len("file body\n"),
            },
        )
        # ...and the echo agent got two blocks: it answers one chunk per block, "" for the
        # non-text one (a resource_link; an embedded resource would have been refused).
        assert rec.agent_chunks(result.turn_id) == ["look:", ""]
        assert result.text == "look:"


# -- 3. tool call allowed by policy, run in a client terminal ------------------------------------


@pytest.mark.parametrize("agent", agents_for("tool"))
async def test_tool_call_allowed_by_policy_runs_in_a_client_terminal(
    agent: RealAgent, shared: Client
) -> None:
    session = await shared.new_session()
    result = await ask(session, CALL_ECHO_HI)
    assert_ok(result, "hi\n\n\n[Exit code: 0]")
    [permission] = result.permissions
    assert (permission.outcome, permission.option_id, permission.decided_by) == (
        "selected",
        "allow_once",
        "policy",
    )
    [call] = real_calls(result)
    assert (call.tool_kind, call.status, call.raw_input) == (
        "execute",
        "completed",
        {"command": "echo hi"},
    )
    assert call.content[0]["content"]["text"].startswith("hi\n")
    [terminal] = result.terminals
    assert terminal["command"] == "echo hi" and terminal["output"] == "hi\n"
    assert terminal["exitStatus"] == {"exitCode": 0, "signal": None}
    view = session.terminal_views[terminal["terminalId"]]
    assert view.released  # fast-agent released it; the record keeps what it printed


# -- 4. permission asked: the handler answers by kind --------------------------------------------


@pytest.mark.parametrize("agent", agents_for("ask"))
@pytest.mark.parametrize("answer", ["allow_once", "reject_once"])
async def test_permission_asked_and_answered(agent: RealAgent, shared: Client, answer: str) -> None:
    session = await shared.new_session()
    session.permission_policy = PermissionPolicy()  # default "ask"
    requests: list[PermissionRequest] = []

    async def handler(request: PermissionRequest) -> str | None:
        requests.append(request)
        return option_of(request, answer)

    session.permission_handler = handler
    result = await ask(session, CALL_ECHO_HI)

    [request] = requests
    assert request.tool_kind == "execute" and request.session_id == session.id
    assert request.tool_call.get("rawInput") == {"command": "echo hi"}
    assert [o.get("kind") for o in request.options] == PERMISSION_KINDS
    [permission] = result.permissions
    assert (permission.outcome, permission.option_id, permission.decided_by) == (
        "selected",
        answer,
        "user",
    )
    [call] = real_calls(result)
    if answer == "allow_once":
        assert_ok(result, "hi\n\n\n[Exit code: 0]")
        assert call.status == "completed"
        assert [t["output"] for t in result.terminals] == ["hi\n"]
    else:
        # Rejected: the tool call fails, no terminal is created, and the turn still ends well.
        assert result.success and result.stop_reason == "end_turn", result
        assert call.status == "failed"
        assert "declined permission" in result.text
        assert result.terminals == () and session.terminal_views == {}
    # The session stays usable.
    assert_ok(await ask(session, "again"), "again")


# -- 5. cancel -----------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", agents_for("cancel"))
async def test_cancel_a_slow_turn_then_prompt_again(agent: RealAgent, tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with connect(
            agent.command(tmp_path / "home", "slow"), cwd=tmp_path, **_options()
        ) as client:
            session = await client.new_session()
            rec = Recorder(session)
            turn = await session.prompt("slow one")
            await rec.started.wait()
            start = anyio.current_time()
            with anyio.fail_after(2.5):  # a slow turn takes 3 s: this must be the cancel
                result = await session.stop()
            elapsed = anyio.current_time() - start
            assert result is turn.result and result is not None
            assert result.stop_reason == "cancelled" and result.cancelled, result
            assert result.success is False
            assert result.error is None  # the agent answered the cancel: nobody was killed
            assert result.text == ""
            assert client.processes_started == 1
            after = await ask(session, "next one")
            assert_ok(after, "next one")
            assert client.processes_started == 1
    assert elapsed < 1.0  # measured: about 10 ms


@pytest.mark.parametrize("agent", agents_for("cancel"))
async def test_cancel_while_a_permission_request_is_pending(
    agent: RealAgent, shared: Client
) -> None:
    session = await shared.new_session()
    asked = anyio.Event()
    handler_cancelled = anyio.Event()

    async def never(request: PermissionRequest) -> str | None:
        asked.set()
        try:
            await anyio.sleep_forever()  # nobody ever clicks
        finally:
            handler_cancelled.set()
        return None

    session.permission_policy = PermissionPolicy()
    session.permission_handler = never
    turn = await session.prompt(CALL_ECHO_HI)
    with anyio.fail_after(30):
        await asked.wait()
    with anyio.fail_after(5):
        result = await session.stop()
        await handler_cancelled.wait()
    assert result is turn.result and result is not None
    assert result.stop_reason == "cancelled" and not result.success, result
    assert result.error is None
    [permission] = result.permissions
    # The client answered the agent's request itself (`cancelled`), as it cancelled.
    assert (permission.outcome, permission.option_id, permission.decided_by) == (
        "cancelled",
        None,
        "cancel",
    )
    assert real_calls(result) == []  # the tool never started...
    assert all(c.status == "cancelled" for c in result.tool_calls)  # ...and shows as cancelled
    assert result.terminals == () and session.terminal_views == {}
    # The session stays usable (fast-agent's next reply says the tool call was interrupted).
    nxt = await ask(session, "are you there")
    assert nxt.success and nxt.stop_reason == "end_turn", nxt
    assert_ok(await ask(session, "hello again"), "hello again")


@pytest.mark.parametrize("agent", agents_for("cancel"))
async def test_cancel_while_a_client_terminal_runs_kills_it(
    agent: RealAgent, shared: Client
) -> None:
    # fast-agent answers `cancelled` without terminal/kill or release (REAL_AGENTS.md): the
    # client must not leave the command running.
    session = await shared.new_session()
    printed = anyio.Event()
    exited = anyio.Event()

    def watch(m: Mutation) -> None:
        if isinstance(m, Delta) and m.channel == "terminal":
            view = session.terminal_views.get(m.part_id)
            if "started" in m.text:
                printed.set()
            if view is not None and view.exited:
                exited.set()

    Recorder(session, on=watch)
    command = '{"command":"echo started; sleep 60; echo finished"}'
    turn = await session.prompt(f"***CALL_TOOL execute {command}")
    with anyio.fail_after(30):
        await printed.wait()
    with anyio.fail_after(5):
        result = await session.stop()
        await exited.wait()
    assert result is turn.result and result is not None
    assert result.stop_reason == "cancelled" and result.error is None, result
    [terminal] = result.terminals
    assert terminal["output"] == "started\n"  # frozen as the turn ended, as the kill was sent
    view = session.terminal_views[terminal["terminalId"]]
    assert view.signal == "SIGKILL" and "finished" not in view.text and not view.released
    [call] = real_calls(result)
    assert call.status == "cancelled"
    nxt = await ask(session, "still there?")
    assert nxt.success and nxt.stop_reason == "end_turn", nxt


# -- 6. the agent process dies mid-turn ----------------------------------------------------------


@pytest.mark.parametrize("agent", agents_for("exit"))
async def test_agent_killed_mid_turn_then_next_prompt_on_a_fresh_process(
    agent: RealAgent, tmp_path: Path
) -> None:
    fast = agent is FAST
    killed: list[int] = []

    def kill_agent(client: Client) -> None:
        assert client.pid is not None
        killed.append(client.pid)
        os.kill(client.pid, signal.SIGKILL)

    # max_retries=0: by default a turn that fails before any output is retried on a fresh
    # process (see test_echo_agent_killed_mid_turn_is_retried_by_default); here the failure
    # itself must show.
    with anyio.fail_after(100):
        async with connect(
            agent.command(tmp_path / "home", "slow"), cwd=tmp_path, **_options(max_retries=0)
        ) as client:
            session = await client.new_session()
            first_id = session.id
            # A finished turn first: fast-agent saves a session (so it can resume it) only
            # after one; before that, session/resume answers "Session not found".
            assert (await ask(session, "warm up")).success
            # The echo agent answers in ~1 ms, so it is killed as the turn starts (inline, in
            # the subscriber); fast-agent's slow turn lasts 3 s, so it is killed meanwhile.
            rec = Recorder(
                session,
                on=None
                if fast
                else (lambda m: kill_agent(client) if isinstance(m, TurnStarted) else None),
            )
            turn = await session.prompt("doomed")
            await rec.started.wait()
            if fast:
                kill_agent(client)
            start = anyio.current_time()
            with anyio.fail_after(5):
                result = await turn.finished
            elapsed = anyio.current_time() - start
            assert client.processes_started == 1
            after = await ask(session, "after the crash", timeout=60)
            assert client.processes_started == 2 and client.pid not in killed
    assert elapsed < 1.5
    assert result.success is False and result.stop_reason is None, result
    assert "exited with code -9" in (result.error or "")
    assert after.success and after.stop_reason == "end_turn", after
    if agent.resumes:
        assert session.id == first_id  # session/resume on the new process
        assert after.errors == ()
        # The resumed conversation is the agent's: passthrough then echoes the user messages
        # since its last saved reply, i.e. "warm up" (whose reply it did not keep) and this one.
        assert after.text.endswith("after the crash")
    else:
        # No resume or load: a new session, and the turn says so.
        assert session.id != first_id
        assert after.text == "after the crash"
        assert any("cannot resume sessions" in e for e in after.errors)


async def test_echo_agent_killed_mid_turn_is_retried_by_default(tmp_path: Path) -> None:
    """With default retries, a turn that failed before any output runs on a fresh process."""
    with anyio.fail_after(30):
        async with connect(echo_agent_command(), cwd=tmp_path, **_options()) as client:
            session = await client.new_session()
            first_id = session.id
            fired: list[int] = []

            def kill_once(m: Mutation) -> None:
                if isinstance(m, TurnStarted) and not fired and client.pid is not None:
                    fired.append(client.pid)
                    os.kill(client.pid, signal.SIGKILL)

            Recorder(session, on=kill_once)
            result = await ask(session, "try again")
            assert client.processes_started == 2
    assert result.success and result.stop_reason == "end_turn", result
    assert result.text == "try again"
    assert session.id != first_id
    assert any("exited with code -9" in e for e in result.errors)  # the retry is on record
