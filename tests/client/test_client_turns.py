"""Turns and streaming: the fold of every session/update kind, the turn model, turn results."""

from __future__ import annotations

import anyio
import pytest

from acp_notebook import PromptError
from acp_notebook.client.session import Session
from acp_notebook.protocol.mutations import (
    Delta,
    PartUpdated,
    RequestWarning,
    SessionChanged,
    TurnFinished,
    TurnStarted,
)
from acp_notebook.protocol.state import MessagePart, PlanEntry, RawPart
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher, reports, tool_call, tool_update

# The agent runs in this process (no spawn per test) unless a test needs a real process.
pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]


def messages(result, role="agent"):
    return [p for p in result.parts if isinstance(p, MessagePart) and p.role == role]


# -- the fold ------------------------------------------------------------------------------------


async def test_chunks_append_and_a_new_message_id_starts_a_new_message(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        turn = await session.prompt(
            script(
                {"say": "Hel", "message_id": "m1"},
                {"say": "lo", "message_id": "m1"},
                {"say": "World", "message_id": "m2"},
                {"think": "hm", "message_id": "t1"},
                {"think": "m.", "message_id": "t1"},
                {"say": "!"},  # no id: a different kind came in between, so a new message
            )
        )
        result = await turn.finished
    agent_msgs = messages(result)
    assert [m.text for m in agent_msgs] == ["Hello", "World", "!"]
    assert [m.message_id for m in agent_msgs] == ["m1", "m2", None]
    assert [m.text for m in messages(result, "thought")] == ["hmm."]
    assert result.text == "Hello\n\nWorld\n\n!"
    assert result.thoughts == "hmm."
    # Live: the first chunk of a message is a PartUpdated, the next ones Deltas on the same part.
    deltas = [m for m in watcher.items if isinstance(m, Delta)]
    assert ("lo", "text", agent_msgs[0].part_id) in {(d.text, d.channel, d.part_id) for d in deltas}
    assert ("m.", "thought") in {(d.text, d.channel) for d in deltas}
    assert all(d.turn_id == turn.id for d in deltas)


async def test_a_failing_subscriber_breaks_neither_the_stream_nor_the_others(agent: Agent) -> None:
    # One subscriber is called straight by the fold, several through the session's loop: the
    # same guarantees either way, and every change of their number is followed.
    def failing(mutation: object) -> None:
        raise RuntimeError("a broken renderer")

    def deltas(watcher: Watcher) -> str:
        return "".join(m.text for m in watcher.items if isinstance(m, Delta))

    async with agent.session() as session:
        drop_failing = session.subscribe(failing)  # alone: called straight
        result = await (await session.prompt(script({"chunks": 50, "size": 4}))).finished
        assert result.text == "".join(f"{i:04d}" for i in range(50))
        first, second = Watcher(session), Watcher(session)  # three subscribers
        await (await session.prompt(script({"say": "a"}, {"say": "b"}))).finished
        second.unsubscribe()
        drop_failing()  # `first` alone
        await (await session.prompt(script({"say": "c"}, {"say": "d"}))).finished
        first.unsubscribe()  # nobody
        last = await (await session.prompt(script({"say": "e"}, {"say": "f"}))).finished
    assert deltas(first) == "bd" and deltas(second) == "b"
    assert isinstance(first.items[-1], TurnFinished) and last.text == "ef"


async def test_chunks_without_ids_keep_appending_to_one_message(agent: Agent) -> None:
    async with agent.session() as session:
        result = await (await session.prompt(script({"chunks": 600, "size": 4}))).finished
    assert len(messages(result)) == 1
    assert result.text == "".join(f"{i:04d}" for i in range(600))


async def test_tool_call_update_patches_and_replaces_content_and_locations(agent: Agent) -> None:
    def text(t):
        return {"type": "content", "content": {"type": "text", "text": t}}

    async with agent.session() as session:
        turn = await session.prompt(
            script(
                {
                    "update": tool_call(
                        "c1",
                        "Read files",
                        kind="read",
                        status="pending",
                        content=[text("a"), text("b")],
                        locations=[{"path": "/x/a.py"}, {"path": "/x/b.py"}],
                        rawInput={"path": "/x"},
                    )
                },
                {"update": tool_update("c1", status="in_progress")},
                {
                    "update": tool_update(
                        "c1", content=[text("c")], locations=[{"path": "/x/c.py", "line": 3}]
                    )
                },
                {"update": tool_update("c1", status="completed", rawOutput={"ok": True})},
                # An update for an id never announced creates the call.
                {"update": tool_update("ghost", title="Appeared", status="failed")},
            )
        )
        result = await turn.finished
    assert result.success, result
    calls = {c.tool_call_id: c for c in result.tool_calls}
    assert set(calls) == {"c1", "ghost"}
    c1 = calls["c1"]
    assert (c1.title, c1.tool_kind, c1.status) == ("Read files", "read", "completed")
    assert c1.content == [text("c")]  # replaced, not appended
    assert c1.locations == [{"path": "/x/c.py", "line": 3}]
    assert c1.raw_input == {"path": "/x"}  # absent in later updates: unchanged
    assert c1.raw_output == {"ok": True}
    assert (calls["ghost"].title, calls["ghost"].status) == ("Appeared", "failed")


async def test_plan_commands_and_config_options_are_whole_snapshots(agent: Agent) -> None:
    def entry(content, status="pending"):
        return {"content": content, "priority": "high", "status": status}

    def select(option_id, value):
        return {
            "id": option_id,
            "name": option_id,
            "type": "select",
            "currentValue": value,
            "options": [{"value": value, "name": value}],
        }

    async with agent.session() as session:
        turn = await session.prompt(
            script(
                {
                    "update": {
                        "sessionUpdate": "plan",
                        "entries": [entry("one"), entry("two"), entry("three")],
                    }
                },
                {"update": {"sessionUpdate": "plan", "entries": [entry("two", "completed")]}},
                {
                    "update": {
                        "sessionUpdate": "available_commands_update",
                        "availableCommands": [
                            {"name": "a", "description": "A"},
                            {"name": "b", "description": "B"},
                        ],
                    }
                },
                {
                    "update": {
                        "sessionUpdate": "available_commands_update",
                        "availableCommands": [
                            {"name": "c", "description": "C", "input": {"hint": "what"}}
                        ],
                    }
                },
                {
                    "update": {
                        "sessionUpdate": "config_option_update",
                        "configOptions": [select("model", "x"), select("effort", "low")],
                    }
                },
                {
                    "update": {
                        "sessionUpdate": "config_option_update",
                        "configOptions": [select("effort", "high")],
                    }
                },
                {"update": {"sessionUpdate": "current_mode_update", "modeId": "code"}},
            )
        )
        result = await turn.finished
        assert result.plan == (PlanEntry("two", "high", "completed"),)
        assert session.commands == [{"name": "c", "description": "C", "input": {"hint": "what"}}]
        assert [o["id"] for o in session.config_options] == ["effort"]
        assert session.config_options[0]["currentValue"] == "high"
        assert session.mode == "code"  # the docs' `modeId` spelling is accepted too
    plans = [p for p in result.parts if p.kind == "plan"]
    assert len(plans) == 1  # one plan part, replaced in place


async def test_session_info_update_patches_and_null_clears(session: Session) -> None:
    watcher = Watcher(session)
    await (
        await session.prompt(
            script(
                {
                    "update": {
                        "sessionUpdate": "session_info_update",
                        "title": "First",
                        "updatedAt": "2026-01-01T00:00:00Z",
                    }
                },
                {"update": {"sessionUpdate": "session_info_update", "title": "Second"}},
            )
        )
    ).finished
    assert session.title == "Second"
    assert session.info["updatedAt"] == "2026-01-01T00:00:00Z"  # omitted: unchanged
    await (
        await session.prompt(
            script(
                {"update": {"sessionUpdate": "session_info_update", "title": None}},
            )
        )
    ).finished
    assert session.title is None
    assert "title" not in session.info
    assert session.info["updatedAt"] == "2026-01-01T00:00:00Z"
    assert any(isinstance(m, SessionChanged) and m.field == "info" for m in watcher.items)


async def test_usage_cost_is_cumulative_and_the_result_has_the_turns_share(agent: Agent) -> None:
    def usage(used, amount):
        return {
            "update": {
                "sessionUpdate": "usage_update",
                "used": used,
                "size": 1000,
                "cost": {"amount": amount, "currency": "USD"},
            }
        }

    async with agent.session() as session:
        first = await (
            await session.prompt(script(usage(100, 0.25), usage(200, 1.0), {"say": "a"}))
        ).finished
        second = await (await session.prompt(script(usage(300, 1.5), {"say": "b"}))).finished
        assert session.usage is not None and session.usage.cost_amount == 1.5
    assert first.usage is not None and (first.usage.used, first.usage.size) == (200, 1000)
    assert first.cost == pytest.approx(1.0)
    assert second.usage is not None and second.usage.used == 300
    assert second.usage.cost_currency == "USD"
    assert second.cost == pytest.approx(0.5)  # 1.5 cumulative minus the 1.0 before the turn


async def test_unknown_and_invalid_updates_are_kept_as_raw_parts(agent: Agent) -> None:
    # A draft kind the client does not take (session cursors). `notice`, then
    # `prompt_suggestions_update`, were the example until the client showed them.
    notice = {"sessionUpdate": "cursor_update", "cursorId": "c1", "anchor": {}}
    future = {"sessionUpdate": "some_future_kind", "payload": [1, 2, 3]}
    broken = {"sessionUpdate": "tool_call", "title": "no id"}  # toolCallId is required
    async with agent.session() as session:
        result = await (
            await session.prompt(
                script(
                    {"say": "before"},
                    {"update": notice},
                    {"update": future},
                    {"update": broken},
                    {"say": "after"},
                )
            )
        ).finished
    assert result.success, result
    raws = list(result.unknown_updates)
    assert [r.update_kind for r in raws] == [
        "cursor_update",
        "some_future_kind",
        "tool_call",
    ]
    assert raws[0].raw == notice and raws[1].raw == future and raws[2].raw == broken
    assert raws[2].problem  # says why it could not be folded
    assert all(r in result.parts for r in raws)
    # Order is kept: the raw parts sit between the two messages.
    kinds = [type(p).__name__ for p in result.parts]
    assert kinds == ["MessagePart", "RawPart", "RawPart", "RawPart", "MessagePart"]
    assert isinstance(result.parts[1], RawPart)


async def test_updates_before_the_session_new_answer_is_handled_are_kept(agent: Agent) -> None:
    # --commands: the agent sends available_commands_update right after the session/new answer,
    # often in the same read, so before the awaiting task has registered the session. Either it
    # was buffered and is there already, or it is still to come; it must never be lost.
    async with agent.session("--commands") as session:
        watcher = Watcher(session)
        if not session.commands:
            await watcher.wait_for(
                lambda m: isinstance(m, SessionChanged) and m.field == "commands", timeout=5
            )
        assert [c["name"] for c in session.commands] == ["web", "test"]


async def test_updates_for_a_session_id_not_opened_are_dropped_and_counted(agent: Agent) -> None:
    # They used to be buffered for a later resume: an agent inventing ids then kept 400 MB.
    # Only a session being opened keeps its early updates (see the commands test above).
    state = str(agent.tmp / "state")
    with anyio.fail_after(30):
        async with agent.client("--state-dir", state, "--resume") as first:
            later = (await first.new_session()).id
        async with agent.client("--state-dir", state, "--resume") as client:
            session = await client.new_session()
            # The agent talks about a session this client has not opened.
            result = await (
                await session.prompt(
                    script(
                        {
                            "update": {"sessionUpdate": "session_info_update", "title": "Early"},
                            "session_id": later,
                        },
                        {
                            "update": {
                                "sessionUpdate": "agent_message_chunk",
                                "content": {"type": "text", "text": "early words"},
                            },
                            "session_id": later,
                        },
                        {"say": "done"},
                    )
                )
            ).finished
            assert result.text == "done"  # nothing leaked into the other session
            assert client.dropped_updates == 2
            assert any("did not open" in e for e in result.errors)  # told once, in the turn
            resumed = await client.resume_session(later)
            assert resumed.title is None
            assert resumed.ambient.joined("agent") == ""


# -- the turn model ------------------------------------------------------------------------------


async def test_prompt_returns_once_assigned_not_when_finished(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        turn = await session.prompt(script({"update": tool_call("c1")}, {"wait_cancel": True}))
        assert turn.result is None and not turn.done
        await watcher.tool_call("c1")  # the turn really runs at the agent
        assert session.running is turn and turn.result is None
        result = await turn.cancel()
    assert result.stop_reason == "cancelled"
    assert turn.result is result


async def test_input_sent_while_a_turn_runs_is_merged_into_the_next_turn(agent: Agent) -> None:
    asked = anyio.Event()
    release = anyio.Event()

    async def handler(request):
        asked.set()
        await release.wait()
        return "allow"

    async with agent.session(permission_handler=handler) as session:
        first = await session.prompt(script({"permission": True}))
        await asked.wait()  # the first turn is running
        second = await session.prompt(script({"echo_prompt": True}))
        third = await session.prompt("and also this")
        fourth = await session.prompt([{"type": "context", "tag": "note", "context": "n"}])
        assert second is third is fourth
        assert second.id == third.id != first.id
        release.set()
        first_result = await first.finished
        merged = await third.finished
    assert first_result.success and merged.success, (first_result, merged)
    assert merged.turn_id == second.id
    prompts = agent.sent("session/prompt")
    assert len(prompts) == 2  # the three later inputs went out as one session/prompt
    blocks = prompts[1]["params"]["prompt"]
    assert blocks == [
        {"type": "text", "text": script({"echo_prompt": True})},
        {"type": "text", "text": "and also this"},
        {"type": "text", "text": "<note>n</note>", "_meta": {"acp_notebook/context": "note"}},
    ]
    assert reports(merged.text, "PROMPT ") == [blocks]


@pytest.mark.parametrize(
    "query", ["", "   ", [], [{"type": "text", "text": ""}], [{"type": "text", "text": ""}, ""]]
)
async def test_empty_input_raises_prompt_error(agent: Agent, query) -> None:
    async with agent.session() as session:
        with pytest.raises(PromptError):
            await session.prompt(query)
        assert session.running is None
    assert agent.sent("session/prompt") == []


async def test_result_fields(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        turn = await session.prompt(
            script(
                {"think": "planning"},
                {
                    "update": {
                        "sessionUpdate": "plan",
                        "entries": [
                            {"content": "step", "priority": "low", "status": "in_progress"}
                        ],
                    }
                },
                {"update": tool_call("c1", "Edit", kind="edit", status="completed")},
                {"update": {"sessionUpdate": "usage_update", "used": 5, "size": 10}},
                {"say": "All done."},
            )
        )
        result = await turn.finished
        assert await turn.finished is result  # awaiting again gives the same result
    assert result.turn_id == turn.id
    assert result.success is True and result.error is None
    assert result.stop_reason == "end_turn"
    assert result.text == "All done."
    assert result.thoughts == "planning"
    assert result.plan == (PlanEntry("step", "low", "in_progress"),)
    assert [(c.tool_call_id, c.tool_kind, c.status) for c in result.tool_calls] == [
        ("c1", "edit", "completed")
    ]
    assert result.usage is not None and (result.usage.used, result.usage.size) == (5, 10)
    assert result.cost is None
    assert result.session_id == session.id
    assert result.prompt[0]["type"] == "text"
    # The live stream lines up with the result.
    assert isinstance(watcher.items[0], TurnStarted) and watcher.items[0].turn_id == turn.id
    finished = watcher.of(TurnFinished)
    assert len(finished) == 1 and finished[0].result is result
    assert not watcher.of(RequestWarning)
    assert session.history[-1].turn_id == turn.id


@pytest.mark.parametrize("reason", ["refusal", "max_tokens", "max_turn_requests"])
async def test_a_stop_reason_other_than_end_turn_is_not_success(agent: Agent, reason) -> None:
    async with agent.session() as session:
        result = await (await session.prompt(script({"say": "partial"}, {"stop": reason}))).finished
    assert result.success is False
    assert result.stop_reason == reason
    assert result.text == "partial"


async def test_an_error_answer_fails_the_turn_without_retry(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        result = await (
            await session.prompt(
                script({"error": {"code": -32602, "message": "bad prompt for this agent"}})
            )
        ).finished
        # The session still works afterwards.
        again = await (await session.prompt("hello")).finished
    assert result.success is False
    assert result.stop_reason is None
    assert "bad prompt for this agent" in (result.error or "")
    assert again.success and again.text == "echo: hello"
    warnings = watcher.of(RequestWarning)
    assert len(warnings) == 1 and warnings[0].will_retry is False
    assert len(agent.sent("session/prompt")) == 2


async def test_turn_finished_mutation_and_part_updates_arrive_in_order(agent: Agent) -> None:
    async with agent.session() as session:
        watcher = Watcher(session)
        turn = await session.prompt(script({"say": "x"}, {"update": tool_call("c9")}))
        done = await watcher.wait_for(lambda m: isinstance(m, TurnFinished))
        assert isinstance(done, TurnFinished) and done.turn_id == turn.id
        assert turn.result is done.result
    kinds = [type(m).__name__ for m in watcher.items if not isinstance(m, SessionChanged)]
    assert kinds[0] == "TurnStarted" and kinds[-1] == "TurnFinished"
    assert any(
        isinstance(m, PartUpdated) and getattr(m.part, "tool_call_id", None) == "c9"
        for m in watcher.items
    )


async def test_non_text_chunks_are_kept_as_blocks_of_the_message(agent: Agent) -> None:
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    async with agent.session() as session:
        result = await (
            await session.prompt(
                script(
                    {"say": "Here:", "message_id": "m1"},
                    {
                        "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": image,
                            "messageId": "m1",
                        }
                    },
                    {"user": "echoed user text"},
                )
            )
        ).finished
    (agent_msg,) = messages(result)
    assert agent_msg.text == "Here:"
    assert agent_msg.blocks == [image]
    assert [m.text for m in messages(result, "user")] == ["echoed user text"]
    assert result.text == "Here:"
