"""Tests of the scripted ACP agent itself, over plain pipes (no ACP client library).

Every test synchronises on lines read from the agent, never on sleeps; pytest-timeout bounds
a test that would otherwise block on a line that never comes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.script import agent_command, script

Msg = dict[str, Any]


class AgentPipe:
    """The scripted agent as a subprocess, spoken to one JSON line at a time."""

    def __init__(self, *flags: str, stderr: Path | None = None) -> None:
        self._stderr = open(stderr, "wb") if stderr else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            agent_command(*flags),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._next_id = 100

    def send(self, msg: Msg) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def recv(self) -> Msg:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"agent closed stdout (exit code {self.proc.poll()})"
        msg: Msg = json.loads(line)
        return msg

    def start(self, method: str, params: Msg) -> int:
        request_id = self._next_id
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def until_response(self, request_id: int) -> tuple[Msg, list[Msg]]:
        """Reads up to the response to request_id; returns it and what came before it."""
        before: list[Msg] = []
        while True:
            msg = self.recv()
            if msg.get("id") == request_id and "method" not in msg:
                return msg, before
            before.append(msg)

    def call(self, method: str, params: Msg) -> tuple[Msg, list[Msg]]:
        return self.until_response(self.start(method, params))

    def initialize(self) -> Msg:
        response, _ = self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        result: Msg = response["result"]
        return result

    def new_session(self, cwd: Path) -> str:
        response, _ = self.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        session_id: str = response["result"]["sessionId"]
        return session_id

    def prompt(self, session_id: str, text: str) -> int:
        return self.start(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=5)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self._stderr is not subprocess.DEVNULL:
                self._stderr.close()  # type: ignore[union-attr]
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        return code


@pytest.fixture
def spawn() -> Iterator[Any]:
    agents: list[AgentPipe] = []

    def start(*flags: str, stderr: Path | None = None) -> AgentPipe:
        agents.append(AgentPipe(*flags, stderr=stderr))
        return agents[-1]

    yield start
    for agent in agents:
        if agent.proc.stdin is not None and not agent.proc.stdin.closed:
            agent.close()


def texts(notes: list[Msg], kind: str = "agent_message_chunk") -> list[str]:
    return [
        n["params"]["update"]["content"]["text"]
        for n in notes
        if n.get("method") == "session/update" and n["params"]["update"]["sessionUpdate"] == kind
    ]


def test_initialize_new_session_and_echo(spawn: Any, tmp_path: Path) -> None:
    agent = spawn(
        "--agent-name",
        "tester",
        "--prompt-capabilities",
        "image,embedded",
        "--load-session",
        "--list",
    )
    result = agent.initialize()
    assert result["protocolVersion"] == 1
    assert result["agentInfo"] == {"name": "tester", "version": "0.1.0"}
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"] == {"image": True, "audio": False, "embeddedContext": True}
    assert caps["sessionCapabilities"] == {"list": {}}
    assert result["authMethods"] == []

    session_id = agent.new_session(tmp_path)
    response, notes = agent.until_response(agent.prompt(session_id, "hello"))
    assert response["result"] == {"stopReason": "end_turn"}
    assert texts(notes) == ["echo: hello"]
    assert notes[0]["params"]["sessionId"] == session_id
    assert agent.close() == 0


def test_script_say_think_update_and_stop(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    agent.initialize()
    session_id = agent.new_session(tmp_path)
    plan = {
        "sessionUpdate": "plan",
        "entries": [{"content": "a", "priority": "high", "status": "pending"}],
    }
    prompt = script(
        {"think": "hmm"},
        {"say": "hi", "message_id": "m1"},
        {"update": plan},
        {"chunks": 3, "size": 4},
        {"stop": "max_tokens"},
    )
    response, notes = agent.until_response(agent.prompt(session_id, prompt))
    assert response["result"] == {"stopReason": "max_tokens"}
    updates = [n["params"]["update"] for n in notes]
    assert updates[0] == {
        "sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": "hmm"},
    }
    assert updates[1]["messageId"] == "m1"
    assert updates[2] == plan
    assert texts(notes) == ["hi", "0000", "0001", "0002"]


def test_unknown_method_and_error_step(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    agent.initialize()
    response, _ = agent.call("session/load", {"sessionId": "x", "cwd": "/", "mcpServers": []})
    assert response["error"]["code"] == -32601  # not advertised, so not implemented
    session_id = agent.new_session(tmp_path)
    error = {"code": -32603, "message": "boom"}
    response, _ = agent.until_response(agent.prompt(session_id, script({"error": error})))
    assert response["error"] == error
    response, _ = agent.until_response(agent.prompt(session_id, script({"nope": 1})))
    assert response["error"]["code"] == -32602


def test_permission_request_answered_by_the_client(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    agent.initialize()
    session_id = agent.new_session(tmp_path)
    tool_call = {"toolCallId": "t1", "title": "rm -rf", "kind": "execute"}
    prompt_id = agent.prompt(session_id, script({"permission": tool_call}, {"say": "after"}))
    request = agent.recv()
    assert request["method"] == "session/request_permission"
    assert request["params"]["sessionId"] == session_id
    assert request["params"]["toolCall"] == tool_call
    assert [o["optionId"] for o in request["params"]["options"]] == [
        "allow",
        "allow-always",
        "reject",
        "reject-always",
    ]
    outcome = {"outcome": {"outcome": "selected", "optionId": "reject"}}
    agent.send({"jsonrpc": "2.0", "id": request["id"], "result": outcome})
    response, notes = agent.until_response(prompt_id)
    assert response["result"] == {"stopReason": "end_turn"}
    assert texts(notes) == [
        "PERMISSION " + json.dumps({"result": outcome}, sort_keys=True),
        "after",
    ]


def test_request_with_cancel_after_sends_cancel_request(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    agent.initialize()
    session_id = agent.new_session(tmp_path)
    step = {"request": "fs/read_text_file", "params": {"path": "/x"}, "cancel_after": 0.01}
    prompt_id = agent.prompt(session_id, script(step))
    request = agent.recv()
    assert request["params"] == {"path": "/x", "sessionId": session_id}
    cancel = agent.recv()
    assert cancel == {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": request["id"]},
    }
    error = {"code": -32800, "message": "Request cancelled"}
    agent.send({"jsonrpc": "2.0", "id": request["id"], "error": error})
    _, notes = agent.until_response(prompt_id)
    assert texts(notes) == ["RESPONSE " + json.dumps({"error": error}, sort_keys=True)]


def test_wait_cancel_runs_after_cancel_steps(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    agent.initialize()
    session_id = agent.new_session(tmp_path)
    late = {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "failed"}
    prompt_id = agent.prompt(
        session_id,
        script(
            {"say": "waiting"},
            {"wait_cancel": True, "after_cancel": [{"update": late}]},
            {"say": "never"},
        ),
    )
    assert texts([agent.recv()]) == ["waiting"]
    agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
    response, notes = agent.until_response(prompt_id)
    assert response["result"] == {"stopReason": "cancelled"}
    assert [n["params"]["update"] for n in notes] == [late]
    # The session still works after a cancelled turn.
    response, notes = agent.until_response(agent.prompt(session_id, "again"))
    assert texts(notes) == ["echo: again"]


def test_cancel_during_sleep(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    agent.initialize()
    session_id = agent.new_session(tmp_path)
    prompt_id = agent.prompt(session_id, script({"say": "zz"}, {"sleep": 60}, {"say": "no"}))
    agent.recv()
    agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
    response, notes = agent.until_response(prompt_id)
    assert response["result"] == {"stopReason": "cancelled"}
    assert notes == []


def test_record_holds_every_received_message(spawn: Any, tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    agent = spawn("--record", str(record))
    agent.initialize()
    session_id = agent.new_session(tmp_path)
    prompt_id = agent.prompt(session_id, script({"wait_cancel": True}))
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
    agent.send(cancel)
    agent.until_response(prompt_id)
    agent.send({"jsonrpc": "2.0", "method": "_unknown/notification", "params": {}})
    agent.close()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [m.get("method") for m in lines] == [
        "initialize",
        "session/new",
        "session/prompt",
        "session/cancel",
        "_unknown/notification",
    ]
    assert lines[0]["params"] == {"protocolVersion": 1, "clientCapabilities": {}}
    assert lines[3] == cancel


def test_load_after_restart_replays_history(spawn: Any, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = spawn("--state-dir", str(state), "--load-session")
    first.initialize()
    session_id = first.new_session(tmp_path)
    first.until_response(first.prompt(session_id, script({"think": "t"}, {"say": "a"})))
    first.until_response(first.prompt(session_id, "second"))
    assert first.close() == 0

    second = spawn("--state-dir", str(state), "--load-session")
    second.initialize()
    response, _ = second.call("session/prompt", {"sessionId": session_id, "prompt": []})
    assert response["error"]["code"] == -32002  # not live in this process until loaded
    response, notes = second.call(
        "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
    )
    assert response["result"] == {}
    kinds = [n["params"]["update"]["sessionUpdate"] for n in notes]
    assert kinds == [
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
    ]
    assert texts(notes, "user_message_chunk")[1] == "second"
    assert texts(notes) == ["a", "echo: second"]
    response, notes = second.until_response(second.prompt(session_id, "third"))
    assert texts(notes) == ["echo: third"]


def test_list_pages_and_resume(spawn: Any, tmp_path: Path) -> None:
    agent = spawn("--list", "--resume", "--list-page-size", "2", "--state-dir", str(tmp_path / "s"))
    agent.initialize()
    created = [agent.new_session(tmp_path) for _ in range(3)]
    title = {"sessionUpdate": "session_info_update", "title": "Named"}
    agent.until_response(agent.prompt(created[0], script({"update": title})))
    listed: list[Msg] = []
    cursor = None
    while True:
        params = {"cwd": str(tmp_path)} | ({"cursor": cursor} if cursor else {})
        response, _ = agent.call("session/list", params)
        listed += response["result"]["sessions"]
        cursor = response["result"].get("nextCursor")
        if cursor is None:
            break
    assert sorted(s["sessionId"] for s in listed) == sorted(created)
    assert listed[0] == {
        "sessionId": created[0],
        "cwd": str(tmp_path),
        "title": "Named",
        "updatedAt": listed[0]["updatedAt"],
    }
    response, notes = agent.call("session/resume", {"sessionId": created[1], "cwd": str(tmp_path)})
    assert response["result"] == {} and notes == []


def test_auth_modes_and_config_options(spawn: Any, tmp_path: Path) -> None:
    agent = spawn("--auth-required", "--modes", "--config-options")
    assert agent.initialize()["authMethods"] == [
        {"id": "token", "name": "Token", "description": "test"}
    ]
    new_params = {"cwd": str(tmp_path), "mcpServers": []}
    response, _ = agent.call("session/new", new_params)
    assert response["error"] == {"code": -32000, "message": "Authentication required"}
    response, _ = agent.call("authenticate", {"methodId": "token"})
    assert response["result"] == {}
    response, _ = agent.call("session/new", new_params)
    session_id = response["result"]["sessionId"]
    assert response["result"]["modes"]["currentModeId"] == "ask"
    assert [o["id"] for o in response["result"]["configOptions"]] == ["model", "verbose"]

    response, notes = agent.call("session/set_mode", {"sessionId": session_id, "modeId": "code"})
    assert response["result"] == {}
    assert notes[0]["params"]["update"] == {
        "sessionUpdate": "current_mode_update",
        "currentModeId": "code",
    }
    response, _ = agent.call(
        "session/set_config_option",
        {"sessionId": session_id, "configId": "verbose", "type": "boolean", "value": True},
    )
    assert [o["currentValue"] for o in response["result"]["configOptions"]] == ["fast", True]


def test_fail_until_exits_then_succeeds(spawn: Any, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    prompt = script(
        {"fail_until": {"counter": str(counter), "attempts": 1, "mode": "exit"}}, {"say": "ok"}
    )
    stderr = tmp_path / "stderr.txt"
    first = spawn(stderr=stderr)
    first.initialize()
    first.prompt(first.new_session(tmp_path), prompt)
    assert first.proc.stdout.readline() == b""  # it exits mid-turn, before any output
    assert first.close() == 3
    assert "transient failure 1\n" in stderr.read_text()

    second = spawn()
    second.initialize()
    _, notes = second.until_response(second.prompt(second.new_session(tmp_path), prompt))
    assert texts(notes) == ["ok"]
    assert counter.read_text() == "2"


def test_raw_and_invalid_input(spawn: Any, tmp_path: Path) -> None:
    agent = spawn()
    agent.initialize()
    session_id = agent.new_session(tmp_path)
    prompt_id = agent.prompt(
        session_id, script({"raw": "not json"}, {"raw_hex": "ff00"}, {"respond_id": 9999})
    )
    assert agent.proc.stdout.readline() == b"not json\n"
    assert agent.proc.stdout.readline() == b"\xff\x00\n"
    assert agent.recv() == {"jsonrpc": "2.0", "id": 9999, "result": {}}
    agent.until_response(prompt_id)
    agent.proc.stdin.write(b"{oops\n")
    agent.proc.stdin.flush()
    assert agent.recv()["error"]["code"] == -32700
