"""The agent process: initialize, environment, stderr, huge lines, exits, retries, no orphans."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from acp_notebook import AgentStartError, ProtocolError
from acp_notebook.client.client import connect
from acp_notebook.protocol.limits import Limits
from acp_notebook.protocol.mutations import RequestWarning
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher, alive, gone

pytestmark = pytest.mark.anyio


# -- initialize ----------------------------------------------------------------------------------


async def test_initialize_sends_client_info_and_only_implemented_capabilities(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client() as client:
            assert client.protocol_version == 1
            assert client.agent_info["name"] == "scripted-agent"
            assert client.agent_name == "scripted-agent"
    (init,) = agent.sent("initialize")
    params = init["params"]
    assert params["protocolVersion"] == 1
    info = params["clientInfo"]
    assert info["name"] == "acp_notebook" and isinstance(info["version"], str) and info["version"]
    caps = params["clientCapabilities"]
    assert caps["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert not caps.get("terminal")  # off unless asked for
    # What the client implements, and nothing else: both elicitation modes (answered in the
    # view or by a handler, else declined) and terminal logins (client/auth.py).
    assert caps["elicitation"] == {"form": {}, "url": {}}
    assert caps["auth"] == {"terminal": True}
    # ACP's later kinds, each shown in every view: plans by id, subagents, notices, compaction,
    # prompt suggestions (unstable).
    assert caps["plan"] == {} and caps["subagents"] == {}
    assert caps["session"] == {
        "configOptions": {"boolean": {}},
        "notices": {},
        "compaction": {},
        "promptSuggestions": {},
    }
    assert set(caps) == {"fs", "terminal", "session", "auth", "elicitation", "plan", "subagents"}
    assert agent.messages()[0]["method"] == "initialize"  # always first


async def test_initialize_with_terminal_and_without_fs(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client(terminal=True, fs=False):
            pass
    caps = agent.sent("initialize")[0]["params"]["clientCapabilities"]
    assert caps["terminal"] is True
    assert not (caps.get("fs") or {}).get("readTextFile")
    assert not (caps.get("fs") or {}).get("writeTextFile")


async def test_protocol_version_2_is_a_clear_protocol_error(agent: Agent) -> None:
    with anyio.fail_after(20):
        with pytest.raises(ProtocolError) as info:
            async with agent.client("--protocol-version", "2"):
                pytest.fail("connected to a v2 agent")
    message = str(info.value)
    assert "version 2" in message and "version 1" in message


async def test_agent_exiting_during_initialize_is_agent_start_error_with_stderr(
    agent: Agent,
) -> None:
    with anyio.fail_after(20):
        with pytest.raises(AgentStartError) as info:
            async with agent.client("--exit-during-initialize", "4"):
                pytest.fail("connected to an agent that exited")
    message = str(info.value)
    assert "exited" in message and "4" in message
    assert "exiting with code 4 during initialize, as asked" in message  # the stderr tail


async def test_a_missing_command_is_agent_start_error(tmp_path: Path) -> None:
    with anyio.fail_after(20):
        with pytest.raises(AgentStartError) as info:
            async with connect([str(tmp_path / "no-such-agent"), "--acp"], cwd=tmp_path):
                pytest.fail("connected to nothing")
        with pytest.raises(AgentStartError):
            async with connect(["acp-notebook-surely-not-installed"], cwd=tmp_path):
                pytest.fail("connected to nothing")
    assert "not found" in str(info.value) and "no-such-agent" in str(info.value)


# -- environment and output ----------------------------------------------------------------------


async def test_the_agent_gets_the_full_environment_plus_its_own(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_NB_TEST_INHERITED", "from-parent")
    monkeypatch.setenv("ACP_NB_TEST_REMOVED", "should-go")
    monkeypatch.setenv("ACP_NB_TEST_OVERRIDDEN", "old")
    env = {
        "ACP_NB_TEST_AGENT_ONLY": "agent value",
        "ACP_NB_TEST_OVERRIDDEN": "new",
        "ACP_NB_TEST_REMOVED": None,
    }
    with anyio.fail_after(20):
        async with agent.client(env=env) as client:
            assert client.pid is not None
            raw = Path(f"/proc/{client.pid}/environ").read_bytes()
    child = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
    assert child["ACP_NB_TEST_INHERITED"] == "from-parent"
    assert child["ACP_NB_TEST_AGENT_ONLY"] == "agent value"
    assert child["ACP_NB_TEST_OVERRIDDEN"] == "new"
    assert "ACP_NB_TEST_REMOVED" not in child
    assert child["PATH"] == os.environ["PATH"]
    assert "ACP_NB_TEST_AGENT_ONLY" not in os.environ  # the client's own env is untouched


async def test_megabytes_of_stderr_do_not_deadlock(agent: Agent) -> None:
    with anyio.fail_after(45):
        # At start (before initialize is answered) and during a turn.
        async with agent.client("--stderr-at-start", str(6_000_000)) as client:
            session = await client.new_session()
            result = await (
                await session.prompt(script({"stderr": 6_000_000}, {"say": "still here"}))
            ).finished
            assert "stderr filler" in client.stderr_tail
    assert result.success and result.text == "still here"


async def test_the_stderr_tail_appears_in_the_error(agent: Agent) -> None:
    async with agent.session(bound=45) as session:
        result = await (
            await session.prompt(script({"say": "partial"}, {"stderr": 5_500_000}, {"exit": 9}))
        ).finished
    assert result.success is False
    assert "exited with code 9" in (result.error or "")
    assert "stderr filler" in (result.error or "")
    assert len(result.error or "") < 10_000  # a tail, not the whole flood


async def test_a_50_megabyte_line(agent: Agent) -> None:
    size = 50 * 1024 * 1024
    with anyio.fail_after(75):
        # The reader takes any line; the fold keeps 4 MiB of text by default (test_limits.py),
        # so this turn raises the limit to see every character arrive.
        async with agent.client(limits=Limits(text_chars=64 * 1024 * 1024)) as client:
            session = await client.new_session()
            result = await (
                await session.prompt(script({"huge_say": size}, {"say": "END"}))
            ).finished
    assert result.success, result.error
    assert len(result.text) == size + 3
    assert result.text.startswith("0123456789") and result.text.endswith("END")


# -- exits and retries ---------------------------------------------------------------------------


@pytest.mark.parametrize("how", [{"exit": 7}, {"kill_self": True}])
async def test_an_agent_that_exits_mid_turn_ends_the_turn_within_a_second(
    agent: Agent, how
) -> None:
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            watcher = Watcher(session)
            turn = await session.prompt(script({"say": "partial output"}, how))
            pid = client.pid
            start = anyio.current_time()
            result = await turn.finished
            elapsed = anyio.current_time() - start
            assert pid is not None and not alive(pid)
            assert client.processes_started == 1  # visible output: never retried
            # The next prompt starts a fresh agent.
            again = await (await session.prompt("hi")).finished
            assert again.success and client.processes_started == 2
    assert elapsed < 1.5
    assert result.success is False
    assert result.text == "partial output"  # the draft is kept
    code = "7" if "exit" in how else "-9"
    assert f"exited with code {code}" in (result.error or "")
    assert len(agent.sent("session/prompt")) == 2
    warnings = watcher.of(RequestWarning)
    assert len(warnings) == 1 and warnings[0].will_retry is False


async def test_exit_mid_turn_ends_the_turn_even_if_a_child_keeps_stdout_open(agent: Agent) -> None:
    # A wrapper's child (npx, uvx...) that outlives the agent holds stdout open: no EOF comes.
    pidfile = agent.tmp / "child.pid"
    command = ["sh", "-c", 'sleep 60 & echo $! > "$0"; exec "$@"', str(pidfile), *agent.command()]
    with anyio.fail_after(20):
        async with connect(command, cwd=agent.cwd) as client:
            session = await client.new_session()
            turn = await session.prompt(script({"say": "partial"}, {"exit": 5}))
            start = anyio.current_time()
            result = await turn.finished
            elapsed = anyio.current_time() - start
            child = int(pidfile.read_text())
    assert elapsed < 1.5
    assert result.success is False and "exited with code 5" in (result.error or "")
    assert await gone(child)  # the agent's process group went with it


async def test_failure_before_output_is_retried_with_a_fresh_process(agent: Agent) -> None:
    counter = agent.tmp / "counter"
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            watcher = Watcher(session)
            turn = await session.prompt(
                script({"fail_until": {"counter": str(counter), "attempts": 2}}, {"say": "made it"})
            )
            result = await turn.finished
            assert client.processes_started == 3
    assert result.success, result
    assert result.text == "made it"
    assert counter.read_text() == "3"
    warnings = watcher.of(RequestWarning)
    assert [(w.attempt, w.max_attempts, w.will_retry, w.turn_id, w.kind) for w in warnings] == [
        (1, 6, True, turn.id, "model_request"),
        (2, 6, True, turn.id, "model_request"),
    ]
    assert all("exited with code 3" in w.message for w in warnings)


async def test_a_turn_that_wrote_a_file_is_not_retried(agent: Agent) -> None:
    # Re-sending it would write twice: a side effect counts as output for the retry rule.
    target = agent.cwd / "written.txt"
    write = {
        "request": "fs/write_text_file",
        "params": {"path": str(target), "content": "once"},
        "quiet": True,
    }
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            result = await (await session.prompt(script(write, {"exit": 3}))).finished
            assert client.processes_started == 1  # no fresh process: no retry
    assert result.success is False and "exited with code 3" in (result.error or "")
    assert target.read_text() == "once"


async def test_an_internal_error_answer_is_retried_too(agent: Agent) -> None:
    counter = agent.tmp / "counter"
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            watcher = Watcher(session)
            result = await (
                await session.prompt(
                    script(
                        {"fail_until": {"counter": str(counter), "attempts": 1, "mode": "error"}},
                        {"say": "second time lucky"},
                    )
                )
            ).finished
            assert client.processes_started == 1  # the process was fine
    assert result.success and result.text == "second time lucky"
    assert [(w.attempt, w.will_retry) for w in watcher.of(RequestWarning)] == [(1, True)]


async def test_retries_stop_after_six_calls(agent: Agent) -> None:
    counter = agent.tmp / "counter"
    with anyio.fail_after(45):
        async with agent.client() as client:
            session = await client.new_session()
            watcher = Watcher(session)
            turn = await session.prompt(
                script({"fail_until": {"counter": str(counter), "attempts": 99}}, {"say": "never"})
            )
            result = await turn.finished
            assert client.processes_started == 6
    assert counter.read_text() == "6"  # exactly six calls, the initial one included
    assert result.success is False
    assert "exited with code 3" in (result.error or "")
    warnings = watcher.of(RequestWarning)
    assert [w.attempt for w in warnings] == [1, 2, 3, 4, 5, 6]
    assert all(w.max_attempts == 6 for w in warnings)
    assert [w.will_retry for w in warnings] == [True] * 5 + [False]
    assert len(agent.sent("session/prompt")) == 6


async def test_never_a_retry_after_visible_output(agent: Agent) -> None:
    counter = agent.tmp / "counter"
    async with agent.session() as session:
        watcher = Watcher(session)
        result = await (
            await session.prompt(
                script(
                    {"think": "visible reasoning"},
                    {"fail_until": {"counter": str(counter), "attempts": 5}},
                )
            )
        ).finished
    assert result.success is False
    assert counter.read_text() == "1"
    assert [(w.attempt, w.will_retry) for w in watcher.of(RequestWarning)] == [(1, False)]
    assert len(agent.sent("session/prompt")) == 1


# -- no orphans ----------------------------------------------------------------------------------


async def test_no_agent_process_is_left_after_close(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client("--ignore-sigterm") as client:
            session = await client.new_session()
            await (await session.prompt("hi")).finished
            pid = client.pid
            assert pid is not None and alive(pid)
    assert not alive(pid)


async def test_no_agent_process_is_left_after_an_error_in_the_block(agent: Agent) -> None:
    pid = None
    with anyio.fail_after(20):
        with pytest.raises(RuntimeError, match="boom"):
            async with agent.client() as client:
                pid = client.pid
                await client.new_session()
                raise RuntimeError("boom")
    assert pid is not None and not alive(pid)


async def test_no_agent_process_is_left_after_a_failed_initialize(agent: Agent) -> None:
    with anyio.fail_after(20):
        with pytest.raises(ProtocolError):
            async with agent.client("--protocol-version", "2"):
                pass
    # The record's first line was written by the agent; its pid is in /proc no more.
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    mine = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(agent.record).encode() in cmdline and alive(pid):
            mine.append(pid)
    assert mine == []


async def test_no_agent_process_is_left_when_the_task_is_cancelled(agent: Agent) -> None:
    pid = None
    started = anyio.Event()
    with anyio.fail_after(20):
        with anyio.CancelScope() as scope:
            async with agent.client() as client:
                session = await client.new_session()
                watcher = Watcher(session)
                await session.prompt(script({"say": "busy"}, {"wait_cancel": True}))
                await watcher.wait_for(lambda m: getattr(m, "part", None) is not None)
                pid = client.pid
                started.set()
                scope.cancel()
                start = anyio.current_time()
                await anyio.sleep_forever()
    elapsed = anyio.current_time() - start
    assert started.is_set() and scope.cancelled_caught
    assert elapsed < 3  # not the cancel grace plus more: the cancelled turn ends at once
    assert pid is not None and not alive(pid)
