"""Exhaustion attacks the first hostile suite missed.

Lines from the agent were buffered at any length: an agent writing without a newline grew the
kernel's memory until it died. A line past `jsonrpc.MAX_LINE_BYTES` is now dropped as it arrives
and reported as a protocol error; the turn goes on.
"""

from __future__ import annotations

import anyio
import pytest

from acp_notebook.protocol import jsonrpc as rpc
from tests.agents.script import script
from tests.client_helpers import Agent

MiB = 1024 * 1024
# The agent runs in this process (no spawn per test): what is tested is the client's reader.
pytestmark = pytest.mark.scripted_agent("in_process")


def test_a_line_without_end_is_never_held_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rpc, "MAX_LINE_BYTES", MiB, raising=False)
    splitter = rpc.LineSplitter()
    most = 0
    for _ in range(160):  # 10 MiB in 64 KiB reads, no newline
        assert splitter.feed(b"x" * 65536) == []
        most = max(most, splitter.buffered)
    assert most <= MiB
    # The next newline ends it: dropped and counted, and the line after it is whole.
    assert splitter.feed(b"xx\n{}\n{") == [b"{}"]
    assert getattr(splitter, "dropped", None) == [10 * MiB + 2]
    assert splitter.feed(b"}\n") == [b"{}"]
    # A long line within one read, and one at the end of the stream.
    splitter.dropped.clear()
    assert splitter.feed(b"y" * (2 * MiB) + b"\n[]\n" + b"z" * (2 * MiB)) == [b"[]"]
    assert splitter.flush() == b""
    assert splitter.dropped == [2 * MiB, 2 * MiB]


@pytest.mark.anyio
async def test_an_overlong_line_is_an_error_part_and_the_turn_goes_on(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rpc, "MAX_LINE_BYTES", MiB, raising=False)
    async with agent.session(bound=50) as session:
        steps = script({"say": "before"}, {"raw": "x" * (3 * MiB)}, {"say": " after"})
        result = await (await session.prompt(steps)).finished
    assert result.success and result.text == "before\n\n after"
    assert len(result.errors) == 1 and "limit of 1048576 bytes" in result.errors[0]
    assert len(result.errors[0]) < 300


@pytest.mark.anyio
async def test_requests_from_the_agent_at_once_are_bounded(agent: Agent) -> None:
    """200 permission requests sent at once, none answered by the user: at most MAX_INCOMING
    are served (each holds a task and, for reads, up to 10 MB of answer); the rest are refused
    at once, and the turn goes on."""
    import json

    from acp_notebook.client import connection

    limit = getattr(connection, "MAX_INCOMING", 64)
    asked = 0

    async def handler(request: object) -> str | None:
        nonlocal asked
        asked += 1
        await anyio.sleep_forever()
        return None

    (agent.cwd / "f.txt").write_text("synchronised")
    flood = [
        {
            "raw": json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 10_000 + i,
                    "method": "session/request_permission",
                    "params": {
                        "sessionId": "x",
                        "options": [],
                        "toolCall": {"toolCallId": f"c{i}", "kind": "read"},
                    },
                }
            )
        }
        for i in range(200)
    ]
    with anyio.fail_after(50):
        async with agent.client(permission_handler=handler) as client:
            session = await client.new_session()
            steps = script(*flood, {"say": "done"})
            result = await (await session.prompt(steps)).finished
    assert result.success and result.text.endswith("done")
    assert asked <= limit, f"{asked} permission requests served at once"
