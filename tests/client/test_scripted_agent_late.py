"""The scripted agent's late-2026 steps (subagents, plan operations, notices, compaction, prompt
suggestions), over
plain pipes: each kind goes only to a client that opted in, and a client that did not gets
what a conforming agent sends it instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.acp_late_schema import UPDATES
from tests.agents.script import script
from tests.client.test_scripted_agent import AgentPipe, Msg, spawn, texts
from tests.conformance import Stream, capability_errors, check_frames, late_update

__all__ = ["spawn"]  # the fixture, used by name

ALL_IN = {
    "subagents": {},
    "plan": {},
    "session": {"notices": {}, "compaction": {}, "promptSuggestions": {}},
}


def opened(spawn: Any, tmp_path: Path, caps: Msg) -> tuple[AgentPipe, str]:
    agent: AgentPipe = spawn()
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    return agent, agent.new_session(tmp_path)


def updates(notes: list[Msg]) -> list[tuple[str, Msg]]:
    return [
        (n["params"]["sessionId"], n["params"]["update"])
        for n in notes
        if n.get("method") == "session/update"
    ]


STEPS = (
    {"notice": {"severity": "warning", "title": "MCP down", "description": "going on"}},
    {
        "compaction": {
            "id": "c1",
            "chunks": ["sum", "mary"],
            "summary": "summary",
            "used": 5,
            "size": 100,
        }
    },
    {
        "plan_update": {
            "type": "items",
            "planId": "p1",
            "entries": [{"content": "a", "priority": "high", "status": "pending"}],
        }
    },
    {"plan_update": {"type": "markdown", "planId": "p2", "content": "# Plan"}},
    {"plan_removed": "p1"},
    {"suggest": ["Run the tests", [{"type": "text", "text": "Fix it"}]]},
)


def test_late_kinds_go_to_a_client_that_opted_in(spawn: Any, tmp_path: Path) -> None:
    agent, sid = opened(spawn, tmp_path, ALL_IN)
    response, notes = agent.until_response(agent.prompt(sid, script(*STEPS)))
    assert response["result"] == {"stopReason": "end_turn"}
    kinds = [u["sessionUpdate"] for _, u in updates(notes)]
    assert kinds == [
        "notice",
        "compaction_update",
        "compaction_summary_chunk",
        "compaction_summary_chunk",
        "compaction_update",
        "usage_update",
        "plan_update",
        "plan_update",
        "plan_removed",
        "prompt_suggestions_update",
    ]
    by_kind = [u for _, u in updates(notes)]
    assert by_kind[0]["description"] == "going on"
    assert by_kind[4] == {
        "sessionUpdate": "compaction_update",
        "compactionId": "c1",
        "status": "completed",
        "summary": [{"type": "text", "text": "summary"}],
    }
    assert by_kind[7]["plan"] == {"type": "markdown", "planId": "p2", "content": "# Plan"}
    assert by_kind[9]["suggestions"] == [
        {"prompt": [{"type": "text", "text": "Run the tests"}]},
        {"prompt": [{"type": "text", "text": "Fix it"}]},
    ]


def test_a_client_that_did_not_opt_in_gets_the_legacy_forms(spawn: Any, tmp_path: Path) -> None:
    agent, sid = opened(spawn, tmp_path, {})
    _, notes = agent.until_response(agent.prompt(sid, script(*STEPS)))
    kinds = [u["sessionUpdate"] for _, u in updates(notes)]
    # The notice as a message, no compaction (only the usage), a legacy plan, then it cleared;
    # no suggestions.
    assert kinds == ["agent_message_chunk", "usage_update", "plan", "plan"]
    assert texts(notes) == ["Notice: MCP down\n"]
    plans = [u["entries"] for _, u in updates(notes) if u["sessionUpdate"] == "plan"]
    assert plans == [[{"content": "a", "priority": "high", "status": "pending"}], []]


CHILD = {
    "subagent": {
        "id": "child-1",
        "title": "Explore",
        "description": "reads the code",
        "steps": [{"say": "child says"}, {"permission": True}],
    }
}


def test_a_subagent_speaks_and_asks_under_its_own_session_id(spawn: Any, tmp_path: Path) -> None:
    agent, sid = opened(spawn, tmp_path, {"subagents": {}})
    prompt_id = agent.prompt(sid, script(CHILD, {"say": "parent says"}))
    seen: list[Msg] = []
    while True:  # up to the child's permission request
        msg = agent.recv()
        if msg.get("method") == "session/request_permission":
            break
        seen.append(msg)
    assert msg["params"]["sessionId"] == "child-1"
    agent.send({"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": {"outcome": "cancelled"}}})
    response, rest = agent.until_response(prompt_id)
    assert response["result"] == {"stopReason": "end_turn"}
    sent = updates(seen + rest)
    assert sent[0] == (
        sid,
        {
            "sessionUpdate": "subagent_update",
            "sessionId": "child-1",
            "title": "Explore",
            "description": "reads the code",
            "state": {"state": "running"},
        },
    )
    assert (
        "child-1",
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "child says"}},
    ) in sent
    assert sent[-1][0] == sid and sent[-1][1]["content"]["text"] == "parent says"
    done = [u for s, u in sent if s == sid and u["sessionUpdate"] == "subagent_update"][-1]
    assert done["state"] == {"state": "idle", "stopReason": "end_turn"}


def test_a_child_that_can_be_cancelled_stops_on_its_session_cancel(
    spawn: Any, tmp_path: Path
) -> None:
    agent, sid = opened(spawn, tmp_path, {"subagents": {}})
    child = {"subagent": {"id": "kid", "cancel": True, "steps": [{"wait_child_cancel": True}]}}
    prompt_id = agent.prompt(sid, script(child, {"say": "parent goes on"}))
    announce = agent.recv()
    assert announce["params"]["update"]["capabilities"] == {"cancel": {}}
    agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "kid"}})
    response, notes = agent.until_response(prompt_id)
    assert response["result"] == {"stopReason": "end_turn"}  # the parent's turn goes on
    done = updates(notes)[0][1]
    assert done["capabilities"] is None
    assert done["state"] == {"state": "idle", "stopReason": "cancelled"}
    assert texts(notes) == ["parent goes on"]


def test_without_subagents_the_child_work_is_the_parents(spawn: Any, tmp_path: Path) -> None:
    agent, sid = opened(spawn, tmp_path, {})
    child = {"subagent": {"id": "kid", "steps": [{"say": "child says"}]}}
    _, notes = agent.until_response(agent.prompt(sid, script(child)))
    assert updates(notes) == [
        (
            sid,
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "child says"},
            },
        )
    ]


@pytest.mark.parametrize("caps", [ALL_IN, {}], ids=["opted-in", "not"])
def test_the_late_frames_conform_to_the_spec(spawn: Any, tmp_path: Path, caps: Msg) -> None:
    """Checked against `tests/acp_late_schema.py`, and each only where the client opted in."""
    agent, sid = opened(spawn, tmp_path, caps)
    steps = (
        *STEPS,
        CHILD,
        {"subagent_update": {"sessionId": "child-1", "title": None}},
        {"session_message": {"messageId": "m1", "text": "hi", "recipientSessionId": "child-1"}},
    )
    prompt_id = agent.prompt(sid, script(*steps))
    frames: list[Msg] = []
    while True:
        msg = agent.recv()
        frames.append(msg)
        if msg.get("method") == "session/request_permission":
            answer = {"outcome": {"outcome": "selected", "optionId": "allow"}}
            agent.send({"jsonrpc": "2.0", "id": msg["id"], "result": answer})
        if msg.get("id") == prompt_id and "method" not in msg:
            break
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"clientCapabilities": caps},
    }
    asked = {"jsonrpc": "2.0", "id": prompt_id, "method": "session/prompt", "params": {}}
    stream = Stream(to_agent=bytearray(f"{json.dumps(init)}\n{json.dumps(asked)}\n".encode()))
    for msg in frames:
        stream.from_agent += json.dumps(msg).encode() + b"\n"
    problems, _ = check_frames(stream, "agent")
    problems += capability_errors(stream, "agent")
    assert problems == []
    late = {late_update(str(m.get("method")), m.get("params")) for m in frames} - {None}
    assert late == (set(UPDATES) - {"session_message"} if caps else set())


PROMPT = {"mode": "append", "content": [{"type": "text", "text": "You work in a notebook."}]}


def test_a_system_prompt_is_taken_only_where_advertised(spawn: Any, tmp_path: Path) -> None:
    plain: AgentPipe = spawn()
    caps = plain.initialize()["agentCapabilities"]["sessionCapabilities"]
    assert "systemPrompt" not in caps
    refused, _ = plain.call(
        "session/new", {"cwd": str(tmp_path), "mcpServers": [], "systemPrompt": PROMPT}
    )
    assert refused["error"]["message"] == "systemPrompt was not advertised"

    agent: AgentPipe = spawn("--system-prompt", "append")
    assert agent.initialize()["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == {}
    override = {**PROMPT, "mode": "override"}
    refused, _ = agent.call(
        "session/new", {"cwd": str(tmp_path), "mcpServers": [], "systemPrompt": override}
    )
    assert refused["error"]["message"] == "override was not advertised"
    made, _ = agent.call(
        "session/new", {"cwd": str(tmp_path), "mcpServers": [], "systemPrompt": PROMPT}
    )
    sid = made["result"]["sessionId"]
    _, notes = agent.until_response(agent.prompt(sid, script({"echo_system_prompt": True})))
    assert texts(notes) == ["SYSTEM PROMPT " + json.dumps(PROMPT)]
