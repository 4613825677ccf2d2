"""Cancellation: stop(), pending permissions, late updates, agents that ignore the cancel,
and cancelling the task that awaits a turn."""

from __future__ import annotations

import anyio
import pytest

from acp_notebook.protocol.mutations import RequestWarning
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher, alive, reports, tool_call, tool_update

# The agent runs in this process (no spawn per test) unless a test needs a real process.
pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]

CANCELLED_OUTCOME = {"outcome": {"outcome": "cancelled"}}


async def test_stop_sends_cancel_marks_tool_calls_and_keeps_late_updates(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        turn = await session.prompt(
            script(
                {"say": "working"},
                {"update": tool_call("c1", status="in_progress")},
                {"update": tool_call("c2", status="pending")},
                {"update": tool_call("c3", status="completed")},
                {
                    "wait_cancel": True,
                    "after_cancel": [
                        {"say": "late words"},
                        {"update": tool_update("c2", status="completed")},
                    ],
                },
            )
        )
        await watcher.tool_call("c3")
        result = await session.stop()
        assert result is not None and result is turn.result
        assert session.running is None
        # The session is usable right after a cancel.
        assert (await (await session.prompt("next")).finished).text == "echo: next"
    cancels = agent.sent("session/cancel")
    assert cancels == [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session.id}}
    ]
    assert result.stop_reason == "cancelled" and result.cancelled
    assert result.success is False
    assert result.error is None  # the agent answered the cancel properly
    assert result.text == "working\n\nlate words"  # updates after the cancel are still folded
    status = {c.tool_call_id: c.status for c in result.tool_calls}
    # Unfinished calls were marked cancelled at once; a late update still applies.
    assert status == {"c1": "cancelled", "c2": "completed", "c3": "completed"}
    assert any(
        getattr(m, "part", None) is not None
        and getattr(m.part, "tool_call_id", "") == "c1"
        and m.part.status == "cancelled"
        for m in watcher.items
    )
    assert not watcher.of(RequestWarning)  # a user's cancel publishes no warning


async def test_stop_answers_a_pending_permission_request_with_cancelled(agent: Agent) -> None:
    asked = anyio.Event()

    async def never(request):
        asked.set()
        await anyio.Event().wait()  # nobody ever clicks

    async with agent.session(permission_handler=never) as session:
        turn = await session.prompt(
            script(
                {
                    "permission": {
                        "toolCallId": "c1",
                        "title": "rm -rf",
                        "kind": "delete",
                        "status": "pending",
                    }
                },
                {"wait_cancel": True},
            )
        )
        await asked.wait()
        result = await session.stop()
    assert result is not None and result.stop_reason == "cancelled"
    assert reports(result.text, "PERMISSION ") == [{"result": CANCELLED_OUTCOME}]
    assert [p.outcome for p in result.permissions] == ["cancelled"]
    assert [c.status for c in result.tool_calls] == ["cancelled"]
    answers = agent.responses()
    assert [a.get("result") for a in answers] == [{"outcome": {"outcome": "cancelled"}}]
    assert turn.result is result


async def test_a_permission_requested_after_cancel_is_answered_cancelled(agent: Agent) -> None:
    async def allow(request):
        return "allow"

    async with agent.session(permission_handler=allow) as session:
        watcher = Watcher(session)
        await session.prompt(
            script(
                {"update": tool_call("c0")},
                {"wait_cancel": True, "after_cancel": [{"permission": True}]},
            )
        )
        await watcher.tool_call("c0")
        result = await session.stop()
    assert result is not None and result.stop_reason == "cancelled"
    assert reports(result.text, "PERMISSION ") == [{"result": CANCELLED_OUTCOME}]


@pytest.mark.scripted_agent("process")  # the process and its kill are the point
async def test_an_agent_that_ignores_cancel_is_killed_after_the_grace_period(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client("--ignore-sigterm", cancel_grace=0.5) as client:
            session = await client.new_session()
            watcher = Watcher(session)
            turn = await session.prompt(
                script({"ignore_cancel": True}, {"update": tool_call("c1")}, {"wait_cancel": True})
            )
            await watcher.tool_call("c1")
            pid = client.pid
            assert pid is not None and client.processes_started == 1
            start = anyio.current_time()
            result = await session.stop()
            elapsed = anyio.current_time() - start
            assert result is not None and turn.result is result
            assert not alive(pid)
            # The next prompt works, on a fresh process.
            again = await (await session.prompt("are you there?")).finished
            assert again.success, again
            assert again.text == "echo: are you there?"
            assert client.processes_started == 2
            assert client.pid != pid
    assert 0.4 < elapsed < 5
    assert result.stop_reason == "cancelled"
    assert result.success is False
    assert "did not answer session/cancel" in (result.error or "")
    assert "0.5 s" in (result.error or "")
    assert [c.status for c in result.tool_calls] == ["cancelled"]
    assert not watcher.of(RequestWarning)


async def test_a_deaf_turn_is_given_up_not_killed_while_another_session_runs(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client(cancel_grace=0.5) as client:
            deaf, busy = await client.new_session(), await client.new_session()
            deaf_watch, busy_watch = Watcher(deaf), Watcher(busy)
            await deaf.prompt(
                script({"ignore_cancel": True}, {"update": tool_call("c1")}, {"wait_cancel": True})
            )
            other = await busy.prompt(
                script({"update": tool_call("c2")}, {"sleep": 1.5}, {"say": "still here"})
            )
            await deaf_watch.tool_call("c1")
            await busy_watch.tool_call("c2")
            result = await deaf.stop()
            finished = await other.finished
            assert client.processes_started == 1  # nobody was killed
    assert result is not None and result.stop_reason == "cancelled"
    assert "given up" in (result.error or "")
    assert finished.success and finished.text == "still here", finished


async def test_cancelling_the_task_awaiting_the_turn_sends_session_cancel(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        turn = await session.prompt(script({"update": tool_call("c1")}, {"wait_cancel": True}))
        scope = anyio.CancelScope()
        waited = []

        async def waiter() -> None:
            with scope:
                waited.append(await turn.finished)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await watcher.tool_call("c1")
            scope.cancel()
        assert waited == [] and scope.cancelled_caught
        result = await turn.finished
    assert result.stop_reason == "cancelled"
    assert len(agent.sent("session/cancel")) == 1


async def test_a_fail_after_around_the_await_cancels_the_turn(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        turn = await session.prompt(script({"update": tool_call("c1")}, {"wait_cancel": True}))
        await watcher.tool_call("c1")
        with anyio.move_on_after(0):  # already expired: cancels the await at once
            await turn.finished
        result = await turn.finished
    assert result.stop_reason == "cancelled"
    assert len(agent.sent("session/cancel")) == 1


async def test_stop_also_cancels_queued_input_which_never_reaches_the_agent(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        running = await session.prompt(script({"update": tool_call("c1")}, {"wait_cancel": True}))
        await watcher.tool_call("c1")
        queued = await session.prompt("queued input")
        assert queued is not running
        await session.stop()
        queued_result = await queued.finished
        assert await session.stop() is None  # nothing running any more
    assert queued_result.stop_reason == "cancelled" and not queued_result.success
    assert running.result is not None and running.result.stop_reason == "cancelled"
    assert len(agent.sent("session/prompt")) == 1


async def test_cancel_during_a_flood_of_chunks(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        turn = await session.prompt(
            script({"update": tool_call("c1")}, {"chunks": 10_000_000, "size": 8})
        )
        await watcher.tool_call("c1")
        result = await turn.cancel()
    assert result.stop_reason == "cancelled"
    assert len(result.text) % 8 == 0 and len(result.text) < 80_000_000


@pytest.mark.scripted_agent("process")  # the process and its kill are the point
async def test_no_agent_process_is_left_after_cancellation_and_close(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client("--ignore-sigterm", cancel_grace=0.5) as client:
            session = await client.new_session()
            watcher = Watcher(session)
            await session.prompt(
                script({"ignore_cancel": True}, {"update": tool_call("c1")}, {"wait_cancel": True})
            )
            await watcher.tool_call("c1")
            pid = client.pid
            assert pid is not None and alive(pid)
        # Leaving the block with a hung turn: close stops it, the agent is killed.
    assert not alive(pid)
