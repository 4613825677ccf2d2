"""Every frame the client sends conforms to ACP v1's schema (and the demo agent's frames too).

Each scenario drives the scripted agent (in this process) through the real client; a tap on the
transport keeps the bytes each way, and `tests/conformance.py` validates every frame the client
wrote against the models of the ACP SDK the project pins (`acp.schema`, generated from the
spec's schema.json): the JSON-RPC envelope, params by method, results by the request they answer.
Every step and every flag of the scripted agent belongs to a scenario (a new one fails
`test_every_step_and_flag_of_the_scripted_agent_has_a_scenario`), and the scenarios together
must make the client send every request, notification and result it can.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_notebook.client.client import Client, connect
from acp_notebook.client.mcp_config import McpServerSpec
from acp_notebook.client.serving.permissions import PermissionPolicy, PermissionRequest
from acp_notebook.client.transport import AgentStreams, in_process
from acp_notebook.demo_agent.agent import DemoAgent
from acp_notebook.demo_agent.wire import Wire
from acp_notebook.errors import AcpError, AuthRequiredError, ProtocolError, RequestTimeoutError
from acp_notebook.protocol import jsonrpc as rpc
from acp_notebook.protocol import methods
from acp_notebook.protocol.elicitation import ElicitationPart
from acp_notebook.protocol.mutations import PartUpdated
from acp_notebook.protocol.state import SubagentPart
from tests.agents.script import in_process as scripted_in_process
from tests.agents.script import script
from tests.agents.scripted import parse_args
from tests.agents.scripted.turn import STEP_NAMES
from tests.client_helpers import Agent, Watcher, run_script, tool_call
from tests.conformance import (
    AGENT_REQUESTS,
    CLIENT_NOTIFICATIONS,
    CLIENT_REQUESTS,
    Stream,
    Tap,
    check_frames,
    lines,
)

pytestmark = pytest.mark.anyio

NOTES_SERVER = Path(__file__).parents[1] / "mcp_notes_server.py"
SURROGATE = "\ud800"  # a lone surrogate: legal in the agent's JSON (\ud800), no UTF-8 form


def req(method: str, **params: Any) -> dict[str, Any]:
    return {"request": method, "params": params}


async def allow_first(request: PermissionRequest) -> str | None:
    options = request.part.options
    return str(options[0]["optionId"]) if options else None


@dataclass(frozen=True)
class Scenario:
    covers: frozenset[str]  # the scripted agent's steps and flags (dest names) it exercises
    flags: tuple[str, ...]
    drive: Callable[[Client, Agent], Awaitable[None]]
    options: tuple[tuple[str, Any], ...] = ()
    #: What the client must have sent: methods, and `METHOD result` (or `error`) for answers.
    sends: frozenset[str] = frozenset()


SCENARIOS: dict[str, Scenario] = {}


def scenario(
    *covers: str, flags: tuple[str, ...] = (), sends: tuple[str, ...] = (), **options: Any
) -> Callable[[Callable[[Client, Agent], Awaitable[None]]], None]:
    def add(drive: Callable[[Client, Agent], Awaitable[None]]) -> None:
        SCENARIOS[drive.__name__] = Scenario(
            frozenset(covers), flags, drive, tuple(sorted(options.items())), frozenset(sends)
        )

    return add


# -- turns: what the agent streams, and how the turn ends ----------------------------------------


@scenario(
    "say",
    "think",
    "user",
    "update",
    "plan_entries",
    "stop",
    "echo_prompt",
    "record",
    sends=(
        methods.INITIALIZE,
        methods.SESSION_NEW,
        methods.SESSION_PROMPT,
    ),
)
async def streamed_turn(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    await run_script(
        session,
        {"say": "hi", "message_id": "m1"},
        {"think": "hmm"},
        {"user": "me"},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "T"}},
        {
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "status": "completed",
            }
        },
        {"plan_entries": 3},
        {"echo_prompt": True},
        {"stop": "max_tokens"},
    )


@scenario("chunks", "huge_say", "flood", "after_turn", "next_prompt")
async def heavy_turns(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}
    await run_script(
        session,
        {"chunks": 300, "size": 4},
        {"huge_say": 100_000},
        {"flood": [chunk], "times": 500},
        {"next_prompt": [{"say": "queued"}]},
        {"after_turn": [{"say": "late"}]},
    )
    await (await session.prompt("plain text")).finished


@scenario("error", "fail_until", "exit", "kill_self", "stderr", "stderr_at_start", "agent_name")
async def failing_turns(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    await run_script(session, {"error": {"code": -32603, "message": "boom"}})
    counter = agent.tmp / "counter"
    await run_script(session, {"fail_until": {"counter": str(counter), "attempts": 1}})
    await run_script(
        session, {"fail_until": {"counter": str(agent.tmp / "c2"), "attempts": 1, "mode": "error"}}
    )
    await run_script(session, {"stderr": 1000}, {"exit": 3})
    session = await client.new_session()
    await run_script(session, {"kill_self": True})


@scenario(
    "exit",
    "resume",
    "load_session",
    "modes",
    "state_dir",
    flags=("--resume", "--load-session", "--modes", "--state-dir", "{tmp}/state"),
    sends=(methods.SESSION_RESUME, methods.SESSION_SET_MODE),
)
async def sessions_after_a_restart(client: Client, agent: Agent) -> None:
    """A session comes back on a fresh agent: resumed, its mode set again."""
    session = await client.new_session()
    await session.set_mode("code")
    await client.restart_agent()
    await run_script(session, {"say": "back"})


@scenario("wait_fifo", sends=(methods.SESSION_PROMPT,))
async def turn_held_on_a_fifo(client: Client, agent: Agent) -> None:
    """The turn waits until the test opens the FIFO for writing (after its first tool call)."""
    fifo = agent.tmp / "go"
    os.mkfifo(fifo)
    session = await client.new_session()
    watcher = Watcher(session)
    turn = await session.prompt(script({"update": tool_call("c1")}, {"wait_fifo": str(fifo)}))
    await watcher.tool_call("c1")
    await anyio.to_thread.run_sync(lambda: open(fifo, "wb").close())
    await turn.finished


@scenario("raw", "raw_hex", "respond_id", sends=("_x/odd error",))
async def garbage_from_the_agent(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    await run_script(
        session,
        {"raw": "not json"},
        {"raw": '{"jsonrpc":"2.0","id":[1],"method":"fs/read_text_file","params":{}}'},
        {"raw": '{"jsonrpc":"2.0","id":7,"method":"_x/odd","params":[1]}'},
        # An id beyond 64 bits (ACP's ids are int64): the client cannot echo it.
        {"raw": '{"jsonrpc":"2.0","id":18446744073709551616,"method":"_x/big","params":{}}'},
        {"raw": '{"jsonrpc":"2.0","id":1.5,"method":"_x/float","params":{}}'},
        {"raw_hex": "ff fe 00"},
        {"respond_id": 999},
    )


@scenario(
    "sleep",
    "wait_cancel",
    "ignore_cancel",
    "after_cancel",
    cancel_grace=0.5,
    sends=(methods.SESSION_CANCEL,),
)
async def cancelled_turns(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    watcher = Watcher(session)
    scripts = [
        [{"sleep": 30}],
        [{"wait_cancel": True, "after_cancel": [{"say": "bye"}]}],
        [{"ignore_cancel": "answer"}, {"sleep": 0.2}],
        [{"ignore_cancel": True}, {"wait_cancel": True}],  # killed after cancel_grace
    ]
    for number, steps in enumerate(scripts):
        # Stopped once the agent is known to run it: the turn's first tool call has arrived.
        await session.prompt(script({"update": tool_call(f"c{number}")}, *steps))
        await watcher.tool_call(f"c{number}")
        await session.stop()


# -- the agent's requests, answered by the client ------------------------------------------------


@scenario(
    "request",
    "permission",
    terminal=True,
    permission_handler=allow_first,
    sends=(
        f"{methods.REQUEST_PERMISSION} result",
        f"{methods.FS_READ_TEXT_FILE} result",
        f"{methods.FS_WRITE_TEXT_FILE} result",
        f"{methods.TERMINAL_CREATE} result",
        f"{methods.TERMINAL_OUTPUT} result",
        f"{methods.TERMINAL_RELEASE} result",
        f"{methods.TERMINAL_WAIT_FOR_EXIT} result",
        f"{methods.TERMINAL_KILL} result",
        f"{methods.ELICITATION_CREATE} result",
        f"{methods.FS_READ_TEXT_FILE} error",
        "_vendor/thing error",
    ),
)
async def agent_requests(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    path = str(agent.cwd / "notes.txt")
    await run_script(
        session,
        req(methods.FS_WRITE_TEXT_FILE, path=path, content="one\ntwo\n"),
        req(methods.FS_READ_TEXT_FILE, path=path, line=2, limit=1),
        req(methods.FS_READ_TEXT_FILE, path="/etc/passwd"),
        req(methods.FS_READ_TEXT_FILE, path=str(agent.cwd / "missing")),
        {
            **req(methods.TERMINAL_CREATE, command=sys.executable, args=["-c", "print(1)"]),
            "id": "t",
        },
        req(methods.TERMINAL_WAIT_FOR_EXIT, terminalId="term-1"),
        req(methods.TERMINAL_OUTPUT, terminalId="term-1"),
        req(methods.TERMINAL_KILL, terminalId="term-1"),
        req(methods.TERMINAL_RELEASE, terminalId="term-1"),
        req(methods.TERMINAL_OUTPUT, terminalId="nope"),
        req("_vendor/thing", x=1),
        req(
            methods.ELICITATION_CREATE,
            message="Who?",
            mode="form",
            requestedSchema={"type": "object", "properties": {"name": {"type": "string"}}},
        ),
        req(
            methods.ELICITATION_CREATE,
            message="Go",
            mode="url",
            url="https://example.com/x",
            elicitationId="e1",
        ),
        req(methods.ELICITATION_CREATE, message="bad"),
        {"permission": {"toolCallId": "c1", "title": "Edit", "kind": "edit"}},
        {"permission": {"toolCallId": "c2", "title": "Odd"}, "options": []},
        {"permission": "not a tool call", "options": [{"optionId": 3}]},
        {**req(methods.FS_READ_TEXT_FILE, path=path), "id": SURROGATE},
        {
            "permission": {"toolCallId": "c3", "title": "T"},
            "options": [{"optionId": "x" + SURROGATE, "name": "Allow", "kind": "allow_once"}],
        },
    )


async def fill_form(part: ElicitationPart) -> Any:
    """What a user may type: "1e999" parses as a float, to infinity."""
    if part.mode == "url":
        return "accept"
    size = "1e999" if part.message == "Form" else "2.5"
    return {"name": "Ada", "size": size, "count": "7", "ok": "true", "tags": ["a"]}


FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "size": {"type": "number"},
        "count": {"type": "integer"},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    },
}


@scenario("request", elicitation_handler=fill_form, sends=(f"{methods.ELICITATION_CREATE} result",))
async def answered_elicitations(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    await run_script(
        session,
        req(methods.ELICITATION_CREATE, message="Form", mode="form", requestedSchema=FORM),
        req(methods.ELICITATION_CREATE, message="Again", mode="form", requestedSchema=FORM),
        req(
            methods.ELICITATION_CREATE,
            message="Go",
            mode="url",
            url="https://example.com/x",
            elicitationId="e1",
        ),
    )


@scenario("cancel_after", "quiet")
async def cancelled_agent_requests(client: Client, agent: Agent) -> None:
    async def never(request: PermissionRequest) -> str | None:
        await anyio.sleep_forever()
        return None

    session = await client.new_session()
    session.permission_handler = never
    session.permission_policy = PermissionPolicy(default="ask")
    await run_script(
        session,
        {"permission": {"toolCallId": "c1", "title": "T"}, "cancel_after": 0.2},
        {**req(methods.FS_READ_TEXT_FILE, path=str(agent.cwd)), "cancel_after": 0.0, "quiet": True},
    )


@scenario("mcp")
async def mcp_servers(client: Client, agent: Agent) -> None:
    server = {
        "name": "notes",
        "command": sys.executable,
        "args": [str(NOTES_SERVER)],
        "env": [{"name": "NOTES_WORD", "value": "w"}],
    }
    session = await client.new_session(mcp_servers=[server])
    await run_script(
        session, {"mcp": "notes", "calls": [{"name": "read_note", "arguments": {"key": "a"}}]}
    )


# -- flags: what the agent offers, and the client's requests that use it --------------------------


@scenario(
    "load_session",
    "resume",
    "list",
    "list_page_size",
    "close",
    "delete",
    "state_dir",
    "additional_directories",
    flags=(
        "--load-session",
        "--resume",
        "--list",
        "--list-page-size",
        "1",
        "--close",
        "--delete",
        "--additional-directories",
        "--state-dir",
        "{tmp}/state",
    ),
    sends=(
        methods.SESSION_LIST,
        methods.SESSION_CLOSE,
        methods.SESSION_LOAD,
        methods.SESSION_RESUME,
        methods.SESSION_DELETE,
    ),
)
async def session_lifecycle(client: Client, agent: Agent) -> None:
    extra = agent.tmp / "extra"
    extra.mkdir()
    first = await client.new_session(additional_directories=[str(extra)])
    await run_script(first, {"say": "one"})
    second = await client.new_session()
    await client.list_sessions()
    sid = first.id
    await first.close()
    await client.load_session(sid)
    await (client.sessions[-1]).close()
    await client.resume_session(sid, additional_directories=[str(extra)])
    await client.delete_session(second.id)


@scenario("list_endless", flags=("--list", "--list-endless", "fresh"))
async def endless_list(client: Client, agent: Agent) -> None:
    await client.new_session()
    await client.list_sessions(limit=5)


@scenario(
    "modes",
    "config_options",
    "commands",
    flags=("--modes", "--config-options", "--commands"),
    sends=(
        methods.SESSION_SET_MODE,
        methods.SESSION_SET_CONFIG_OPTION,
    ),
    trace=True,  # a `_meta.traceparent` in every request
)
async def settings(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    await session.set_mode("code")
    await session.set_config_option("model", "smart")
    await session.set_config_option("verbose", True)


@scenario("config_options_json", flags=("--config-options-json", '[{"id": 1}, "junk"]'))
async def odd_config_options(client: Client, agent: Agent) -> None:
    await client.new_session()


@scenario(
    "prompt_capabilities",
    "mcp_transports",
    flags=("--prompt-capabilities", "image,audio,embedded", "--mcp-transports", "http,sse"),
)
async def rich_prompts(client: Client, agent: Agent) -> None:
    servers = [
        McpServerSpec("web", "http", url="https://mcp.example.com/", headers={"A": "b"}),
        McpServerSpec("events", "sse", url="https://mcp.example.com/sse"),
        McpServerSpec("local", "stdio", command=(sys.executable, "-V"), env={"K": "v"}),
    ]
    session = await client.new_session(mcp_servers=[server.to_acp() for server in servers])
    image = agent.cwd / "dot.png"
    image.write_bytes(bytes.fromhex("89504e470d0a1a0a"))
    notes = agent.cwd / "notes.md"
    notes.write_text("# notes\n")
    await (
        await session.prompt(
            [
                "look at these",
                {"type": "file", "url": str(image)},
                {"type": "file", "url": str(notes)},
                {"type": "context", "tag": "variables", "context": "x = 1"},
                {"type": "resource_link", "uri": "file:///tmp/x", "name": "x"},
            ]
        )
    ).finished


@scenario(sends=(methods.SESSION_PROMPT,))
async def prompts_beyond_the_agents_capabilities(client: Client, agent: Agent) -> None:
    """Files the agent cannot take as blocks (no prompt capabilities advertised)."""
    session = await client.new_session()
    image = agent.cwd / "dot.png"
    image.write_bytes(bytes.fromhex("89504e470d0a1a0a"))
    notes = agent.cwd / "notes.md"
    notes.write_text("# notes\n")
    parts = ["look", {"type": "file", "url": str(image)}, {"type": "file", "url": str(notes)}]
    await (await session.prompt(parts)).finished


@scenario(
    "auth_required",
    "auth_method",
    "logout",
    flags=("--auth-required", "--logout"),
    auth_method="token",
    sends=(
        methods.AUTHENTICATE,
        methods.LOGOUT,
    ),
)
async def agent_auth(client: Client, agent: Agent) -> None:
    await client.new_session()
    await client.logout()
    await client.authenticate("token")


@scenario("auth_terminal", "login_to", flags=("--auth-terminal", "{tmp}/token"))
async def terminal_auth(client: Client, agent: Agent) -> None:
    with pytest.raises(AuthRequiredError):
        await client.new_session()
    await client.authenticate("login")
    await client.new_session()


@scenario(
    "hang_method",
    "hang_once_marker",
    request_timeout=0.5,
    flags=("--hang-method", "session/new", "--hang-once-marker", "{tmp}/hung"),
    sends=(methods.CANCEL_REQUEST,),
)
async def unanswered_requests(client: Client, agent: Agent) -> None:
    with pytest.raises(RequestTimeoutError):
        await client.new_session()
    await client.new_session()  # the marker exists now: answered


# -- ACP of late 2026: subagents, plan operations, notices, compaction (tests/acp_late_schema.py)

LATE_STEPS: tuple[dict[str, Any], ...] = (
    {
        "subagent": {
            "id": "child-1",
            "title": "Explore",
            "description": "reads",
            "steps": [
                {"say": "child text"},
                {
                    "update": {
                        "sessionUpdate": "tool_call",
                        "toolCallId": "k1",
                        "title": "Read",
                        "name": "read_file",
                    }
                },
                {"permission": True},
                {"session_message": {"messageId": "sm1", "text": "to the parent"}},
            ],
        }
    },
    {"subagent_update": {"sessionId": "child-1", "title": "Explore (done)"}},
    {"notice": {"severity": "warning", "title": "MCP server down", "description": "going on"}},
    {"compaction": {"id": "c1", "chunks": ["sum"], "summary": "summary", "used": 10, "size": 100}},
    {
        "plan_update": {
            "type": "items",
            "planId": "p1",
            "entries": [{"content": "a", "priority": "high", "status": "pending"}],
        }
    },
    {
        "plan_update": {
            "type": "markdown",
            "planId": "p2",
            "content": "# Plan",
            "path": "/tmp/plan.md",
        }
    },
    {"plan_removed": "p1"},
    {"suggest": ["Run the tests", [{"type": "resource_link", "uri": "file:///a.py", "name": "a"}]]},
)
CANCELLABLE_CHILD = {
    "subagent": {"id": "child-2", "cancel": True, "steps": [{"wait_child_cancel": True}]}
}


@scenario(
    "subagent",
    "subagent_update",
    "wait_child_cancel",
    "session_message",
    "notice",
    "compaction",
    "plan_update",
    "plan_removed",
    "suggest",
    permission_handler=allow_first,
    sends=(methods.SESSION_CANCEL,),
)
async def late_kinds(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    result = await run_script(session, *LATE_STEPS)
    assert [s.session_id for s in result.subagents] == ["child-1"]
    assert [p.to_json()["suggestions"] for p in result.parts if p.kind == "suggestions"] == [
        ["Run the tests", "file:///a.py"]
    ]
    # Stop cancels the turn and the child that allows it, each with its own session/cancel.
    watcher = Watcher(session)
    turn = await session.prompt(script(CANCELLABLE_CHILD, {"wait_cancel": True}))
    await watcher.wait_for(
        lambda m: isinstance(m, PartUpdated) and isinstance(m.part, SubagentPart)
    )
    await session.stop()
    assert (await turn.finished).cancelled


@scenario(
    "system_prompt",
    "echo_system_prompt",
    flags=("--system-prompt", "append"),
    system_prompt="You work in a notebook.",
)
async def system_prompt(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    await run_script(session, {"echo_system_prompt": True})


@scenario(
    "fork",
    "echo_history",
    flags=("--fork", "--close", "--system-prompt", "append"),
    system_prompt="In a notebook.",
    sends=(methods.SESSION_FORK,),
)
async def forks(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    await run_script(session, {"say": "one"})
    point = await session.snapshot()
    await run_script(session, {"say": "two"})
    fork = await client.fork_session(point, system_prompt=session.system_prompt)
    result = await run_script(fork, {"echo_history": True})
    assert result.text == "HISTORY " + json.dumps(['#script [{"say": "one"}]'])


# Ids that are no session ids, refused (test_client_forks): the client sends none of them back.
@scenario("new_id_json", flags=("--new-id-json", json.dumps("n" * 1001)))
async def a_new_id_that_is_no_id(client: Client, agent: Agent) -> None:
    with pytest.raises(ProtocolError):
        await client.new_session()


@scenario("fork_id_json", flags=("--fork", "--fork-id-json", '{"id": 1}'))
async def a_fork_id_that_is_no_id(client: Client, agent: Agent) -> None:
    session = await client.new_session()
    with pytest.raises(ProtocolError):
        await session.snapshot()
    await run_script(session, {"say": "the session goes on"})


# Options of steps (not steps themselves) and of the client, named by the scenarios using them.
OPTIONS_OF_STEPS = {"cancel_after", "quiet", "after_cancel", "auth_method"}

# Flags whose frames a scenario does not change, and why.
NOT_FRAMES = {"ignore_sigterm": "process only: no signal reaches an in-process agent"}


# The client refuses these agents as it starts them (`connect` raises): initialize only.
@scenario("protocol_version", flags=("--protocol-version", "2"), sends=(methods.INITIALIZE,))
async def another_protocol_version(client: Client, agent: Agent) -> None:
    raise AssertionError("connect() accepted protocol version 2")


@scenario("exit_during_initialize", flags=("--exit-during-initialize", "3"))
async def gone_during_initialize(client: Client, agent: Agent) -> None:
    raise AssertionError("connect() accepted an agent that exited")


REFUSED_AT_START = {"another_protocol_version", "gone_during_initialize"}


def test_every_step_and_flag_of_the_scripted_agent_has_a_scenario() -> None:
    names = set(STEP_NAMES) | set(vars(parse_args([])))
    covered = set().union(*(s.covers for s in SCENARIOS.values())) | set(NOT_FRAMES)
    assert names - covered == set(), "add a scenario to tests/client/test_conformance.py"
    assert covered - names - OPTIONS_OF_STEPS == set()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_every_frame_the_client_sends_conforms(name: str, tmp_path: Path) -> None:
    case = SCENARIOS[name]
    agent = Agent(tmp_path, in_process=True)
    tap = Tap()
    options = dict(case.options)
    with anyio.fail_after(40):
        connecting = agent.client(
            *(flag.replace("{tmp}", str(tmp_path)) for flag in case.flags),
            transport=tap.factory(scripted_in_process()),
            **options,
        )
        if name in REFUSED_AT_START:
            with pytest.raises(AcpError):
                await connecting.__aenter__()
        else:
            async with connecting as client:
                await case.drive(client, agent)
    problems, sent = tap.check("client")
    assert problems == []
    assert case.sends <= sent, f"the client never sent {sorted(case.sends - sent)}"


def test_the_scenarios_make_the_client_send_every_request_notification_and_answer() -> None:
    every = (
        set(CLIENT_REQUESTS)
        | set(CLIENT_NOTIFICATIONS)
        | {f"{method} result" for method in AGENT_REQUESTS}
    )
    declared = set().union(*(s.sends for s in SCENARIOS.values()))
    assert every - declared == set(), "add a scenario that makes the client send these"


def test_every_frame_the_client_encodes_is_json_in_utf8() -> None:
    """What the client writes is built from agent data (ids, option ids) and the user's (form
    answers): a lone surrogate or a non-finite float in it used to make a frame that is not
    JSON (`Infinity`) or raise before it was written (and kill the client's task group)."""
    frames = [
        rpc.encode_result(SURROGATE, {"outcome": {"outcome": "selected", "optionId": "x\udfff"}}),
        rpc.encode_result(1, {"content": {"size": math.inf, "n": [math.nan, -math.inf, 1.5]}}),
        rpc.encode_error(SURROGATE, rpc.INTERNAL_ERROR, "bad", {"v": math.nan}),
        rpc.encode_request(2, "session/prompt", {"prompt": [{"type": "text", "text": "\ud83d"}]}),
    ]
    stream = Stream()
    for frame in frames:
        stream.to_agent += frame
    decoded = [json.loads(line.decode("utf-8")) for line in lines(bytes(stream.to_agent))]
    assert (
        decoded[0]["id"] == SURROGATE and decoded[0]["result"]["outcome"]["optionId"] == "x\udfff"
    )
    assert decoded[1]["result"] == {"content": {"size": None, "n": [None, None, 1.5]}}
    assert decoded[2]["error"]["data"] == {"v": None}
    problems, _ = check_frames(stream, "client")
    assert [p for p in problems if "not JSON" in p] == []


def test_a_request_whose_id_cannot_be_echoed_is_not_served() -> None:
    """ACP's ids are int64 (or strings): one beyond 64 bits was read as null, served (a file
    written, a permission asked) and answered with id null, which answers nothing."""
    big = b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"fs/write_text_file","params":{}}'
    frame = rpc.decode(big)
    assert isinstance(frame, rpc.Malformed) and "invalid request id" in frame.reason
    assert isinstance(
        rpc.classify(json.loads(big.replace(b"18446744073709551616", b"null"))), rpc.Request
    )
    null = rpc.decode(b'{"jsonrpc":"2.0","id":null,"method":"fs/write_text_file","params":{}}')
    assert isinstance(null, rpc.Request) and null.id is None  # null itself is a valid id


# -- the demo agent: its frames and the client's, both ways --------------------------------------


def serve_demo(streams: AgentStreams) -> int:
    """The embedded demo agent on the client's in-process streams, at full speed."""
    demo = DemoAgent(Wire(streams.stdout), 0.0)
    for raw in streams.stdin:
        demo.handle_line(raw)
    demo.shutdown()
    return 0


async def drive_demo(client: Client, cwd: Path) -> None:
    """Everything the demo agent does: each command, each setting, each session method."""
    session = await client.new_session()
    (cwd / "pic.png").write_bytes(bytes.fromhex("89504e470d0a1a0a"))
    await (
        await session.prompt(["edit the notes", {"type": "file", "url": str(cwd / "pic.png")}])
    ).finished
    await (await session.prompt("again")).finished  # the notes exist now: read, then appended
    await session.set_mode("ask")
    await session.set_config_option("model", "demo-thorough")
    await session.set_config_option("thought_level", "high")
    for text in ("/explain this", "/plan that", "/fail now"):
        await (await session.prompt(text)).finished
    watcher = Watcher(session)
    await session.prompt("/slow and stop")
    await watcher.wait_for(lambda m: isinstance(m, PartUpdated))
    await session.stop()
    await client.list_sessions()
    point = await session.snapshot()  # a fork, closed at once: the demo agent keeps it to fork
    forked = await client.fork_session(point)
    assert len(forked.history) == 0 and (await (await forked.prompt("forked")).finished).success
    # The demo agent forgets a session it closes: load and resume one still open here.
    loaded = await client.load_session(session.id)
    resumed = await client.resume_session(loaded.id)
    await resumed.set_mode("code")
    await (await resumed.prompt("once more")).finished
    for opened in client.sessions:
        await opened.close()


@pytest.mark.parametrize(
    ("fs", "terminal", "decision"),
    [(True, True, "allow"), (True, False, "reject"), (False, False, "allow")],
    ids=["fs-terminal-allowed", "fs-rejected", "no-fs"],
)
async def test_every_frame_of_the_demo_agent_and_its_client_conforms(
    tmp_path: Path, fs: bool, terminal: bool, decision: str
) -> None:
    tap = Tap()
    policy = PermissionPolicy(default=decision)  # type: ignore[arg-type]
    with anyio.fail_after(40):
        async with connect(
            ["acp-notebook-demo"],
            cwd=tmp_path,
            transport=tap.factory(in_process(serve_demo)),
            fs=fs,
            terminal=terminal,
            permission_policy=policy,
        ) as client:
            await drive_demo(client, tmp_path)
    agent_problems, agent_sent = tap.check("agent")
    client_problems, _ = tap.check("client")
    assert agent_problems == [] and client_problems == []
    updates = {"session/update", "session/new result", "session/prompt result"}
    assert updates <= agent_sent, agent_sent
    if terminal:
        assert {methods.TERMINAL_CREATE, methods.TERMINAL_RELEASE} <= agent_sent
    kinds = {
        message["params"]["update"]["sessionUpdate"]
        for stream in tap.streams
        for line in lines(bytes(stream.from_agent))
        if (message := json.loads(line)).get("method") == methods.SESSION_UPDATE
    }
    assert kinds == DEMO_UPDATES  # every kind the demo agent sends, each validated above


DEMO_UPDATES = {
    "agent_thought_chunk",
    "agent_message_chunk",
    "user_message_chunk",  # the replay of session/load
    "plan",
    "tool_call",
    "tool_call_update",
    "usage_update",
    "session_info_update",
    "available_commands_update",
    "current_mode_update",
}
