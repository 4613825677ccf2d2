"""What ACP v1 gained late in 2026, through the real client and the scripted agent (which sends
each kind only to a client that opted in, as a conforming agent does): subagents folded into
their parent's turn (their permission requests naming them, Stop cancelling those that allow
it), plans by id, notices, compaction, the tool's name; the legacy plan still folds; an agent
that announces too much, or updates children it never announced, is bounded and counted."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from acp_notebook.client.serving.permissions import PermissionRequest
from acp_notebook.protocol.mutations import PartUpdated
from acp_notebook.protocol.notes import CompactionPart, NoticePart
from acp_notebook.protocol.state import MessagePart, PermissionPart, PlanPart, SubagentPart
from acp_notebook.render import render_bundle
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher, run_script

pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]

ITEMS = [{"content": "read", "priority": "high", "status": "completed"}]


def child(child_id: str, *steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"subagent": {"id": child_id, "steps": list(steps), **extra}}


async def test_a_subagent_is_a_card_in_its_parents_turn(agent: Agent) -> None:
    asked: list[PermissionRequest] = []

    async def allow(request: PermissionRequest) -> str | None:
        asked.append(request)
        return str(request.options[0]["optionId"])

    steps = (
        {"say": "Delegating."},
        child(
            "kid-1",
            {"say": "Child answer."},
            {
                "update": {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "k1",
                    "title": "Read",
                    "name": "read_file",
                }
            },
            {"update": {"sessionUpdate": "plan", "entries": ITEMS}},
            {"permission": {"toolCallId": "k1", "title": "Read", "kind": "read"}},
            {
                "update": {
                    "sessionUpdate": "usage_update",
                    "used": 5,
                    "size": 100,
                    "cost": {"amount": 0.25, "currency": "USD"},
                }
            },
            title="Explore",
            description="reads",
        ),
        {"say": "Back."},
    )
    async with agent.session(permission_handler=allow, bound=30) as session:
        result = await run_script(session, *steps)
    assert result.success and result.text == "Delegating.\n\nBack."  # not the child's
    (sub,) = result.subagents
    assert (sub.session_id, sub.title, sub.state, sub.stop_reason) == (
        "kid-1",
        "Explore",
        "idle",
        "end_turn",
    )
    assert sub.text.startswith("Child answer.")
    assert [c.name for c in sub.tool_calls] == ["read_file"]
    card = next(p for p in result.parts if isinstance(p, SubagentPart))
    assert card.usage is not None and card.usage.cost_amount == 0.25
    assert any(isinstance(p, PlanPart) and p.entries for p in card.parts)
    # The child's request names it; it is recorded in the child's card, not the parent's.
    (request,) = asked
    assert request.subagent == "Explore" and request.session_id == session.id
    assert any(isinstance(p, PermissionPart) and p.outcome == "selected" for p in card.parts)
    assert not any(isinstance(p, PermissionPart) for p in result.parts)
    # Every view shows it.
    bundle = render_bundle(result.to_json())
    assert "acpnb-subagent" in bundle["text/html"] and "Explore" in bundle["text/html"]
    assert "🤖 subagent Explore: done" in bundle["text/plain"]
    assert "**Subagents**" in bundle["text/markdown"]


async def test_stop_cancels_the_children_that_allow_it(agent: Agent) -> None:
    steps = (
        child("cannot", {"say": "no cancel for me"}),
        {"subagent_update": {"sessionId": "cannot", "state": {"state": "running"}}},
        child("can", {"wait_child_cancel": True}, cancel=True),
        {"wait_cancel": True},
    )
    async with agent.session(bound=30) as session:
        watcher = Watcher(session)
        turn = await session.prompt(script(*steps))
        await watcher.wait_for(
            lambda m: (
                isinstance(m, PartUpdated)
                and isinstance(m.part, SubagentPart)
                and m.part.session_id == "can"
            )
        )
        await session.stop()
        result = await turn.finished
    assert result.cancelled
    cancelled = [m["params"]["sessionId"] for m in agent.sent("session/cancel")]
    assert sorted(cancelled) == sorted([session.id, "can"])  # never "cannot"
    can = next(s for s in result.subagents if s.session_id == "can")
    assert can.stop_reason == "cancelled"


async def test_plans_by_id_notices_and_compaction(agent: Agent) -> None:
    steps = (
        {"plan_update": {"type": "items", "planId": "a", "entries": ITEMS}},
        {"plan_update": {"type": "markdown", "planId": "b", "content": "# B", "path": "/w/b.md"}},
        {"plan_removed": "a"},
        {"notice": {"severity": "error", "title": "Model rerouted"}},
        {"compaction": {"id": "c", "chunks": ["kept ", "this"], "used": 3, "size": 100}},
        {
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "t",
                "title": "Grep",
                "name": "grep",
            }
        },
    )
    async with agent.session(bound=30) as session:
        result = await run_script(session, *steps)
    assert result.success  # an error notice does not fail the turn
    plans = {p.plan_id: p for p in result.parts if isinstance(p, PlanPart)}
    assert plans["a"].removed and plans["b"].markdown == "# B" and plans["b"].path == "/w/b.md"
    assert result.plan == ()  # no legacy plan: the agent sent plans by id
    (notice,) = [p for p in result.parts if isinstance(p, NoticePart)]
    assert (notice.severity, notice.title) == ("error", "Model rerouted")
    (compaction,) = [p for p in result.parts if isinstance(p, CompactionPart)]
    assert compaction.status == "completed" and compaction.text == "kept this"
    assert result.usage is not None and result.usage.used == 3  # the meter follows
    assert [c.name for c in result.tool_calls] == ["grep"]


async def test_the_legacy_plan_still_folds(agent: Agent) -> None:
    async with agent.session(bound=30) as session:
        result = await run_script(session, {"update": {"sessionUpdate": "plan", "entries": ITEMS}})
    assert [e.content for e in result.plan] == ["read"]
    assert "Plan" in render_bundle(result.to_json())["text/plain"]


async def test_children_past_the_limits_are_counted_not_kept(agent: Agent) -> None:
    many = [child(f"c{i}", {"say": "x" * 10}) for i in range(55)]
    deep: dict[str, Any] = child("d4", {"say": "too deep"})
    for level in (3, 2, 1):
        deep = child(f"d{level}", deep)
    stray = {
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "?"},
        },
        "session_id": "never-announced",
    }
    with anyio.fail_after(30):
        async with agent.client() as client:
            session = await client.new_session()
            result = await run_script(session, *many, stray)
            # Never announced (the stray), or announced past the limit (5): unknown sessions.
            assert client.dropped_updates == 6
            nested = await run_script(session, deep)
    # Each update of the 5 past the limit is counted (the announcement and the last state).
    assert len(result.subagents) == 50 and result.dropped["subagents"] == 10
    # Nested three deep; the fourth is counted in the third's card.
    (d1,) = nested.subagents
    d2 = next(p for p in d1.parts if isinstance(p, SubagentPart))
    d3 = next(p for p in d2.parts if isinstance(p, SubagentPart))
    assert not any(isinstance(p, SubagentPart) for p in d3.parts)
    assert d3.dropped.get("subagents") == 2  # its announcement and its last state


async def test_a_child_reused_in_a_later_turn_gets_a_card_there(agent: Agent) -> None:
    async with agent.session(bound=30) as session:
        first = await run_script(session, child("kid", {"say": "first"}, title="Kid"))
        again = {
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "second"},
            },
            "session_id": "kid",
        }
        second = await run_script(session, again)
    assert [s.text for s in first.subagents] == ["first"]
    assert [(s.title, s.text) for s in second.subagents] == [("Kid", "second")]


async def test_a_message_between_sessions_is_shown_not_answered(agent: Agent) -> None:
    steps = (
        child("kid", {"session_message": {"messageId": "m", "text": "report to parent"}}),
        {
            "session_message": {
                "messageId": "n",
                "text": "task for kid",
                "recipientSessionId": "kid",
            }
        },
    )
    async with agent.session(bound=30) as session:
        result = await run_script(session, *steps)
    assert result.text == ""
    (own,) = [p for p in result.parts if isinstance(p, MessagePart)]
    assert (own.role, own.text) == ("session", "task for kid")
    assert "a message between the agent's sessions" in render_bundle(result.to_json())["text/html"]
    (sub,) = result.subagents
    assert [p.text for p in sub.parts if isinstance(p, MessagePart)] == ["report to parent"]


async def test_the_system_prompt_goes_where_the_agent_takes_one(agent: Agent) -> None:
    prompt = {"mode": "append", "content": [{"type": "text", "text": "In a notebook."}]}
    with anyio.fail_after(30):
        async with agent.client(
            "--system-prompt", "append", "--load-session", system_prompt="In a notebook."
        ) as client:
            session = await client.new_session()
            echoed = await run_script(session, {"echo_system_prompt": True})
            await client.load_session(session.id)
        async with agent.client(system_prompt="In a notebook.") as client:
            await client.new_session()  # this agent takes none: none is sent
        async with agent.client("--system-prompt", "append", system_prompt="") as client:
            await client.new_session()  # none configured
    assert echoed.text == "SYSTEM PROMPT " + json.dumps(prompt)
    news = [m["params"] for m in agent.sent("session/new")]
    assert [p.get("systemPrompt") for p in news] == [prompt, None, None]
    (load,) = agent.sent("session/load")
    assert load["params"]["systemPrompt"] == prompt  # re-sent: the agent does not keep it


async def test_an_older_adapters_draft_subagent_is_a_card(agent: Agent) -> None:
    """The draft of 2026-08 (`subagent_spawned`, `subagent_state_update`): the same card, and
    the child's updates are routed to it, as a stable `subagent_update`'s."""
    spawned = {
        "sessionUpdate": "subagent_spawned",
        "subagentSessionId": "old-kid",
        "name": "Investigator <b>",
        "task": "Find the failing test",
        "capabilities": {"cancel": True, "close": True},
    }
    said = {
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "Found it."},
        },
        "session_id": "old-kid",
    }
    done = {
        "sessionUpdate": "subagent_state_update",
        "subagentSessionId": "old-kid",
        "state": "failed",
    }
    bad = {"sessionUpdate": "subagent_state_update", "subagentSessionId": "old-kid", "state": "?"}
    # A state that is no string (no key of the draft's table): raw too, the connection lives on.
    worse = {**bad, "state": {"a": []}}
    async with agent.session(bound=30) as session:
        result = await run_script(
            session, {"update": spawned}, said, {"update": done}, {"update": bad}, {"update": worse}
        )
    (kid,) = result.subagents
    assert (kid.title, kid.description, kid.text) == (
        "Investigator <b>",
        "Find the failing test",
        "Found it.",
    )
    assert (kid.state, kid.stop_reason) == ("idle", "error")
    (card,) = [p for p in result.parts if isinstance(p, SubagentPart)]
    assert card.can_cancel
    # A state the draft did not have: kept as a raw part, not taken as an end.
    raws = [p for p in result.parts if p.kind == "raw"]
    assert [r.kind for r in raws] == ["raw", "raw"]
    assert all("completed, failed or cancelled" in str(r.to_json()) for r in raws)
    text = render_bundle(result.to_json())["text/plain"]
    assert "Investigator <b>" in text and "subagent_spawned" not in text
