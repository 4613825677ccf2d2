"""Sessions: new, load (replay as history), resume, list (cursors), close, modes, config
options, authentication."""

from __future__ import annotations

import anyio
import pytest

from acp_notebook import AuthRequiredError, CapabilityError, ClientClosedError, RequestError
from acp_notebook.protocol.mutations import PartUpdated, SessionChanged
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher

# The agent runs in this process (no spawn per test) unless a test needs a real process.
pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]


async def test_new_session_sends_cwd_and_mcp_servers(agent: Agent) -> None:
    extra = agent.tmp / "extra"
    extra.mkdir()
    with anyio.fail_after(20):
        async with agent.client("--additional-directories") as client:
            session = await client.new_session()
            other = await client.new_session(agent.tmp, additional_directories=[extra])
            assert session.id != other.id
            assert {s.id for s in client.sessions} == {session.id, other.id}
    first, second = (m["params"] for m in agent.sent("session/new"))
    assert first == {"cwd": str(agent.cwd), "mcpServers": []}
    assert second == {
        "cwd": str(agent.tmp),
        "mcpServers": [],
        "additionalDirectories": [str(extra)],
    }


async def test_additional_directories_need_the_agents_capability(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client() as client:
            with pytest.raises(CapabilityError, match="additional directories"):
                await client.new_session(additional_directories=[agent.tmp])
    assert not agent.sent("session/new")  # refused before anything was sent


async def test_load_replays_the_conversation_into_history(agent: Agent) -> None:
    state = str(agent.tmp / "state")
    with anyio.fail_after(30):
        async with agent.client("--state-dir", state) as first:
            original = await first.new_session()
            await (await original.prompt("first question")).finished
            await (
                await original.prompt(script({"think": "pondering"}, {"say": "second answer"}))
            ).finished
        async with agent.client("--state-dir", state, "--load-session") as client:
            session = await client.load_session(original.id)
            assert session.id == original.id
            history = list(session.history)
            assert session.running is None
            # The loaded session takes new prompts, and they do not mix with the replay.
            result = await (await session.prompt("third")).finished
    assert len(history) == 2
    assert all(record.replay for record in history)
    assert [m.text for m in history[0].messages("user")] == ["first question"]
    assert history[0].joined("agent") == "echo: first question"
    assert history[1].messages("user")[0].text.startswith("#script ")
    assert history[1].joined("thought") == "pondering"
    assert history[1].joined("agent") == "second answer"
    assert result.success and result.text == "echo: third"
    assert [m.text for m in result.parts if getattr(m, "role", None) == "agent"] == ["echo: third"]
    (load,) = agent.sent("session/load")
    assert load["params"] == {"sessionId": original.id, "cwd": str(agent.cwd), "mcpServers": []}


async def test_resume_continues_without_replay(agent: Agent) -> None:
    state = str(agent.tmp / "state")
    with anyio.fail_after(30):
        async with agent.client("--state-dir", state) as first:
            original = await first.new_session()
            await (await original.prompt("earlier")).finished
        async with agent.client("--state-dir", state, "--resume") as client:
            session = await client.resume_session(original.id)
            assert session.history == []
            assert session.ambient.parts == []
            result = await (await session.prompt("later")).finished
    assert result.success and result.text == "echo: later"
    assert len(agent.sent("session/resume")) == 1
    assert agent.sent("session/load") == []


async def test_load_resume_list_and_close_need_their_capability(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client() as client:
            with pytest.raises(CapabilityError):
                await client.load_session("sess_x")
            with pytest.raises(CapabilityError):
                await client.resume_session("sess_x")
            with pytest.raises(CapabilityError):
                await client.list_sessions()
            session = await client.new_session()
            await session.close()
    methods = [m.get("method") for m in agent.messages()]
    assert methods == ["initialize", "session/new"]  # nothing unadvertised was called


async def test_list_follows_cursors(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client("--list", "--list-page-size", "2") as client:
            created = [(await client.new_session()).id for _ in range(5)]
            listed = await client.list_sessions()
            limited = await client.list_sessions(limit=3)
            elsewhere = await client.list_sessions(cwd=agent.tmp)
    assert sorted(s["sessionId"] for s in listed) == sorted(created)
    assert len(listed) == 5
    assert all(s["cwd"] == str(agent.cwd) for s in listed)
    assert len(limited) == 3
    assert elsewhere == []
    calls = agent.sent("session/list")
    first_five = calls[:3]
    assert "cursor" not in first_five[0]["params"]
    assert all(isinstance(c["params"].get("cursor"), str) for c in first_five[1:])
    assert len({c["params"]["cursor"] for c in first_five[1:]}) == 2


async def test_close_sends_session_close_when_advertised(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client("--close") as client:
            session = await client.new_session()
            await session.close()
            assert session.closed
            assert session not in client.sessions
            with pytest.raises(ClientClosedError):
                await session.prompt("hello?")
            await session.close()  # twice is fine
    assert [m["params"] for m in agent.sent("session/close")] == [{"sessionId": session.id}]


async def test_close_cancels_the_running_turn(agent: Agent) -> None:
    async with agent.session("--close") as session:
        watcher = Watcher(session)
        turn = await session.prompt(script({"say": "busy"}, {"wait_cancel": True}))
        await watcher.wait_for(lambda m: isinstance(m, PartUpdated))  # it runs at the agent
        await session.close()
        result = await turn.finished
    assert result.stop_reason == "cancelled" and result.text == "busy"
    methods = [m.get("method") for m in agent.messages()]
    assert methods.index("session/cancel") < methods.index("session/close")


async def test_modes_and_set_mode(agent: Agent) -> None:
    async with agent.session("--modes") as session:
        assert session.mode == "ask"
        assert [m["id"] for m in session.modes] == ["ask", "code"]
        await session.set_mode("code")
        assert session.mode == "code"
        with pytest.raises(ValueError, match="unknown mode"):
            await session.set_mode("yolo")
        assert session.mode == "code"
    assert [m["params"] for m in agent.sent("session/set_mode")] == [
        {"sessionId": session.id, "modeId": "code"}
    ]


async def test_set_mode_without_modes_is_a_capability_error(agent: Agent) -> None:
    async with agent.session() as session:
        with pytest.raises(CapabilityError):
            await session.set_mode("code")
    assert agent.sent("session/set_mode") == []


async def test_set_config_option_replaces_the_complete_list(agent: Agent) -> None:
    async with agent.session("--config-options") as session:
        assert [o["id"] for o in session.config_options] == ["model", "verbose"]
        # A stale local list must be replaced whole by the answer, not patched.
        session.config_options.append(
            {"id": "stale", "name": "Stale", "type": "boolean", "currentValue": True}
        )
        options = await session.set_config_option("model", "smart")
        assert [o["id"] for o in options] == ["model", "verbose"]
        assert options == session.config_options
        assert options[0]["currentValue"] == "smart"
        options = await session.set_config_option("verbose", True)
        assert options[1]["currentValue"] is True
        for config_id, value in [
            ("model", "huge"),
            ("model", True),
            ("verbose", "yes"),
            ("verbose", 1),
            ("nonexistent", "x"),
        ]:
            with pytest.raises(ValueError):
                await session.set_config_option(config_id, value)
    sent = [m["params"] for m in agent.sent("session/set_config_option")]
    assert sent == [
        {"sessionId": session.id, "configId": "model", "value": "smart"},
        {"sessionId": session.id, "configId": "verbose", "value": True, "type": "boolean"},
    ]  # the bad values never reached the agent


async def test_auth_required_lists_the_methods(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client("--auth-required") as client:
            with pytest.raises(AuthRequiredError) as info:
                await client.new_session()
    err = info.value
    assert err.code == -32000
    assert [m["id"] for m in err.auth_methods] == ["token"]
    assert "token" in str(err) and "Token" in str(err)
    assert agent.sent("authenticate") == []


async def test_auth_method_authenticates_and_retries(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client("--auth-required", auth_method="token") as client:
            session = await client.new_session()
            result = await (await session.prompt("hello")).finished
            await client.new_session()  # authenticated once per process
    assert result.success and result.text == "echo: hello"
    methods = [m.get("method") for m in agent.messages()]
    assert methods == [
        "initialize",
        "session/new",
        "authenticate",
        "session/new",
        "session/prompt",
        "session/new",
    ]
    assert agent.sent("authenticate")[0]["params"] == {"methodId": "token"}


async def test_authenticate_rejects_an_unknown_method(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client("--auth-required") as client:
            with pytest.raises(ValueError, match="unknown auth method"):
                await client.authenticate("password")
            await client.authenticate("token")
            session = await client.new_session()
            assert session.id
    assert [m["params"] for m in agent.sent("authenticate")] == [{"methodId": "token"}]


async def test_loading_an_unknown_session_fails_cleanly(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client("--load-session") as client:
            with pytest.raises(RequestError) as info:
                await client.load_session("sess_does_not_exist")
            assert client.sessions == []
    assert info.value.code == -32002


@pytest.mark.scripted_agent("process")  # a crash of the agent process, and its restart
async def test_after_an_agent_restart_the_session_is_resumed_or_recreated(agent: Agent) -> None:
    state = str(agent.tmp / "state")
    async with agent.session("--state-dir", state, "--resume", bound=30) as session:
        first_id = session.id
        crashed = await (await session.prompt(script({"say": "x"}, {"exit": 1}))).finished
        again = await (await session.prompt("still you?")).finished
        assert session.id == first_id  # resumed on the fresh process
        async with agent.client() as client:  # no resume, no load: a new session
            session = await client.new_session()
            watcher = Watcher(session)
            old_id = session.id
            await (await session.prompt(script({"say": "x"}, {"exit": 1}))).finished
            fresh = await (await session.prompt("hello again")).finished
            assert session.id != old_id
            assert any(
                isinstance(m, SessionChanged) and m.field == "session_id" for m in watcher.items
            )
    assert not crashed.success and again.success and again.text == "echo: still you?"
    assert [m["params"]["sessionId"] for m in agent.sent("session/resume")] == [first_id]
    assert fresh.success and fresh.text == "echo: hello again"
    assert any("new session" in e for e in fresh.errors)  # the user is told
