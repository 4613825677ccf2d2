"""Deadlines on the client's requests: an agent that never answers one cannot hang the caller.

The scripted agent's `--hang-method METHOD` records the request and never answers it. Every
request but `session/prompt` has a deadline (`request_timeout`; `initialize_timeout` for
initialize): past it the client sends `$/cancel_request` and raises `RequestTimeoutError`, which
names the method and the agent and is also a `TimeoutError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from acp_notebook import AgentStartError, AgentStartTimeoutError, RequestTimeoutError
from acp_notebook.client.client import Client
from acp_notebook.client.options import ClientOptions
from tests.agents.script import script
from tests.client_helpers import Agent, gone

# The agent runs in this process (no spawn per test) unless a test needs a real process.
pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]

DEADLINE = 0.5
SLACK = 3.0  # process start and a loaded machine; far below any default deadline (60/120 s)


async def new(client: Client) -> Any:
    return await client.new_session()


async def load(client: Client) -> Any:
    return await client.load_session("sess_elsewhere")


async def resume(client: Client) -> Any:
    return await client.resume_session("sess_elsewhere")


async def listing(client: Client) -> Any:
    return await client.list_sessions()


async def authenticate(client: Client) -> Any:
    return await client.authenticate("token")


async def set_mode(client: Client) -> Any:
    return await (await client.new_session()).set_mode("code")


async def set_config(client: Client) -> Any:
    return await (await client.new_session()).set_config_option("model", "smart")


CALLS: list[tuple[str, list[str], Callable[[Client], Awaitable[Any]]]] = [
    ("session/new", [], new),
    ("session/load", ["--load-session"], load),
    ("session/resume", ["--resume"], resume),
    ("session/list", ["--list"], listing),
    ("authenticate", ["--auth-required"], authenticate),
    ("session/set_mode", ["--modes"], set_mode),
    ("session/set_config_option", ["--config-options"], set_config),
]


@pytest.mark.parametrize(("method", "flags", "call"), CALLS, ids=[c[0] for c in CALLS])
async def test_an_unanswered_request_times_out_and_is_cancelled(
    agent: Agent, method: str, flags: list[str], call: Callable[[Client], Awaitable[Any]]
) -> None:
    with anyio.fail_after(20):
        # Hangs once: the same request after it is answered (authenticate: for session/new).
        options = {"auth_method": "token"} if method == "authenticate" else {}
        async with agent.client(
            "--hang-method",
            method,
            *flags,
            "--hang-once-marker",
            str(agent.tmp / "hung"),
            request_timeout=DEADLINE,
            **options,
        ) as client:
            start = anyio.current_time()
            with pytest.raises(RequestTimeoutError) as info:
                await call(client)
            took = anyio.current_time() - start
            # The connection is still good: a turn works after the timed-out request.
            session = client.sessions[0] if client.sessions else await client.new_session()
            turn = await (await session.prompt("still here")).finished
    assert DEADLINE <= took < DEADLINE + SLACK, took
    error = info.value
    assert isinstance(error, TimeoutError)
    assert error.method == method and error.timeout == DEADLINE
    assert method in str(error) and "scripted-agent" in str(error)
    sent = agent.sent(method)[0]
    cancels = [m["params"]["requestId"] for m in agent.sent("$/cancel_request")]
    assert cancels == [sent["id"]]
    assert turn.success and turn.text == "echo: still here", turn


async def test_an_unanswered_initialize_times_out_and_leaves_no_process(agent: Agent) -> None:
    client = Client(
        agent.command("--hang-method", "initialize"),
        cwd=agent.cwd,
        options=ClientOptions(initialize_timeout=DEADLINE),
    )
    with anyio.fail_after(20):
        start = anyio.current_time()
        with pytest.raises(AgentStartTimeoutError) as info:
            async with client:
                pass
        took = anyio.current_time() - start
    assert took < DEADLINE + SLACK, took
    error = info.value
    assert isinstance(error, TimeoutError) and isinstance(error, AgentStartError)
    assert error.method == "initialize" and "initialize" in str(error)
    (sent,) = agent.sent("initialize")
    assert [m["params"]["requestId"] for m in agent.sent("$/cancel_request")] == [sent["id"]]
    assert client.processes_started == 1 and client.pid is not None
    assert await gone(client.pid)


async def test_a_prompt_is_not_bound_by_the_request_deadline(agent: Agent) -> None:
    async with agent.session(request_timeout=0.2) as session:
        result = await (await session.prompt(script({"sleep": 1.0}, {"say": "slow"}))).finished
    assert result.success and result.text == "slow", result
    assert agent.sent("$/cancel_request") == []


def test_request_timeout_must_be_positive() -> None:
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="request_timeout"):
            ClientOptions(request_timeout=bad)
    assert ClientOptions(request_timeout=None).request_timeout is None
    assert ClientOptions().request_timeout == 120.0
