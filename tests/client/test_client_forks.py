"""Forks (unstable `session/fork`, where the agent advertises `sessionCapabilities.fork`) and
the per-session system prompt, through the real client and the scripted agent: a snapshot is a
point to fork from later, a fork starts from its conversation and leaves it as it was, the
session's own system prompt is re-sent on a fork and when the session is reopened."""

from __future__ import annotations

import json

import anyio
import pytest

from acp_notebook.errors import CapabilityError, ProtocolError
from acp_notebook.protocol.limits import MAX_ID_CHARS
from tests.client_helpers import Agent, run_script

pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]

HISTORY = {"echo_history": True}


def said(*texts: str) -> str:
    return "HISTORY " + json.dumps(list(texts))


async def test_a_fork_of_a_snapshot_starts_from_the_conversation_as_it_stood(
    agent: Agent,
) -> None:
    with anyio.fail_after(30):
        async with agent.client("--fork", "--close") as client:
            session = await client.new_session()
            await session.prompt("one")
            await (await session.prompt("two")).finished
            point = await session.snapshot()
            await run_script(session, {"say": "three"})
            fork = await client.fork_session(point)
            assert fork.id not in {point, session.id}
            assert (await run_script(fork, HISTORY)).text == said("one", "two")
            # The source and the point are left as they were.
            assert (await run_script(session, HISTORY)).text.startswith(
                said("one", "two", '#script [{"say": "three"}]')[:-1]
            )
            again = await client.fork_session(point)
            assert (await run_script(again, HISTORY)).text == said("one", "two")
            assert client.dropped_updates == 0
    (snap,) = [m for m in agent.sent("session/fork") if m["params"]["sessionId"] == session.id]
    assert snap["params"]["cwd"] == session.cwd and snap["params"]["mcpServers"] == []
    # The point is closed at once (the agent can close sessions): a fork is made from its
    # saved conversation, and nothing of it stays live at the agent.
    assert point in [m["params"]["sessionId"] for m in agent.sent("session/close")]


async def test_an_agent_that_cannot_fork_is_asked_for_no_fork(agent: Agent) -> None:
    with anyio.fail_after(30):
        async with agent.client() as client:
            session = await client.new_session()
            with pytest.raises(CapabilityError, match="cannot fork"):
                await session.snapshot()
            with pytest.raises(CapabilityError, match="cannot fork"):
                await client.fork_session(session.id)
    assert agent.sent("session/fork") == []


@pytest.mark.parametrize(
    ("fork_id", "message"),
    [
        ("x" * (MAX_ID_CHARS + 1), f"a sessionId of {MAX_ID_CHARS + 1:,} characters"),
        ({"id": "f1"}, "without a sessionId"),
        ("", "without a sessionId"),
    ],
)
async def test_a_fork_id_that_is_no_session_id_is_refused(
    agent: Agent, fork_id: object, message: str
) -> None:
    """The id of a fork is bounded as other ids from the agent: a string of 1 to
    `MAX_ID_CHARS` characters, else a ProtocolError that says so, for a snapshot and a fork;
    the session forked from goes on. One of exactly `MAX_ID_CHARS` is an id."""
    with anyio.fail_after(30):
        async with agent.client("--fork", "--fork-id-json", json.dumps(fork_id)) as client:
            session = await client.new_session()
            with pytest.raises(ProtocolError, match=message):
                await session.snapshot()
            with pytest.raises(ProtocolError, match=message):
                await client.fork_session(session.id)
            assert (await run_script(session, {"say": "still here"})).text == "still here"
        async with agent.client(
            "--fork", "--fork-id-json", json.dumps("y" * MAX_ID_CHARS)
        ) as client:
            session = await client.new_session()
            assert await session.snapshot() == "y" * MAX_ID_CHARS


async def test_a_new_sessions_id_is_bounded_as_a_forks(agent: Agent) -> None:
    """session/new's id passes the same check (`session.answered_id`) as a fork's."""
    with anyio.fail_after(30):
        too_long = json.dumps("n" * (MAX_ID_CHARS + 1))
        async with agent.client("--new-id-json", too_long) as client:
            with pytest.raises(
                ProtocolError, match=f"sessionId of {MAX_ID_CHARS + 1:,} characters"
            ):
                await client.new_session()
        async with agent.client("--new-id-json", '""') as client:
            with pytest.raises(ProtocolError, match="session/new answered without a sessionId"):
                await client.new_session()


async def test_a_sessions_own_system_prompt_is_re_sent_on_fork_and_reopen(agent: Agent) -> None:
    prompt = {"mode": "append", "content": [{"type": "text", "text": "Be terse."}]}
    with anyio.fail_after(30):
        async with agent.client(
            *("--system-prompt", "append", "--fork", "--resume"),
            *("--state-dir", str(agent.tmp / "state")),  # a restarted agent knows the session
            system_prompt="Configured.",
        ) as client:
            session = await client.new_session(system_prompt="Be terse.")
            assert session.system_prompt == "Be terse."
            fork = await client.fork_session(session.id, system_prompt=session.system_prompt)
            echoed = await run_script(fork, {"echo_system_prompt": True})
            await client.restart_agent()
            reopened = await run_script(session, {"echo_system_prompt": True})
            plain = await client.new_session(system_prompt="")
            assert plain.system_prompt == ""
    assert echoed.text == reopened.text == "SYSTEM PROMPT " + json.dumps(prompt)
    (resume,) = agent.sent("session/resume")
    assert resume["params"]["systemPrompt"] == prompt  # the session's, not the client's
    news = [m["params"].get("systemPrompt") for m in agent.sent("session/new")]
    assert news == [prompt, None]  # the session was resumed, not opened anew
