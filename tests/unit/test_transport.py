"""The in-process transport on its own: a few lines of agent on a thread, no scripted agent."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from acp_notebook.client.client import connect
from acp_notebook.client.transport import AgentStreams, InProcessTransport, in_process
from acp_notebook.errors import AgentExitedError, AgentStartError
from acp_notebook.protocol import methods

pytestmark = pytest.mark.anyio


def reply(streams: AgentStreams, request: dict[str, Any], result: Any) -> None:
    line = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    streams.stdout.write(json.dumps(line).encode() + b"\n")
    streams.stdout.flush()


def tiny_agent(streams: AgentStreams) -> int:
    """Answers initialize, logs to stderr, exits with code 7 at session/new."""
    for raw in streams.stdin:
        request = json.loads(raw)
        if request["method"] == methods.INITIALIZE:
            streams.stderr.write(b"tiny agent ready\n")
            streams.stderr.flush()
            reply(streams, request, {"protocolVersion": 1, "agentInfo": {"name": "tiny"}})
        elif request["method"] == methods.SESSION_NEW:
            streams.exit(7)
            return 0  # ignored: the first end wins
    return 0


async def test_an_in_process_agent_starts_logs_and_exits_with_its_code() -> None:
    with anyio.fail_after(20):
        async with connect(["tiny"], transport=in_process(tiny_agent), max_retries=0) as client:
            assert client.agent_name == "tiny" and client.pid is None
            with pytest.raises(AgentExitedError) as info:
                await client.new_session()
            assert "tiny agent ready" in client.stderr_tail
    assert info.value.returncode == 7 and "code 7" in str(info.value)
    assert "tiny agent ready" in info.value.stderr_tail


async def test_an_agent_that_raises_is_an_exit_with_code_1_and_its_traceback() -> None:
    def broken(streams: AgentStreams) -> int:
        raise RuntimeError("the agent's own bug")

    with anyio.fail_after(20), pytest.raises(AgentStartError) as info:
        async with connect(["broken"], transport=in_process(broken)):
            pass
    assert "code 1" in str(info.value) and "the agent's own bug" in str(info.value)


async def test_close_ends_an_agent_that_ignores_the_end_of_its_stdin() -> None:
    made: list[InProcessTransport] = []

    def deaf(streams: AgentStreams) -> int:
        for raw in streams.stdin:
            reply(streams, json.loads(raw), {"protocolVersion": 1})
            break
        streams.ended.wait()  # until the client ends it
        return 0

    def factory(*args: Any) -> InProcessTransport:
        made.append(in_process(deaf)(*args))  # type: ignore[arg-type]
        return made[-1]

    with anyio.fail_after(20):
        async with connect(["deaf"], transport=factory):
            pass
    (transport,) = made
    assert transport.killed_by_us and transport.returncode == -15
