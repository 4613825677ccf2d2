"""The protocol log (issue 11): the last messages each way, a JSON-lines file with secrets
masked, a W3C traceparent in requests' `_meta`, and `%agent log` in a real kernel."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from acp_notebook.protocol import methods
from acp_notebook.protocol.wirelog import WireLog, traceparent, with_trace
from tests.client_helpers import Agent
from tests.nb_util import execute, kernel_env, text
from tests.shared_kernel import SharedKernel

pytestmark = pytest.mark.anyio

SECRET = "sk-wire-log-secret-0123456789abcdef"
TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-01$")


def test_the_log_keeps_the_last_messages_each_way_in_order_and_clips_long_ones() -> None:
    log = WireLog(size=3, clip=100)
    out, into = log.recorder("out"), log.recorder("in")
    for i in range(5):
        out([json.dumps({"jsonrpc": "2.0", "id": i, "method": "session/prompt"}).encode()])
        into([json.dumps({"jsonrpc": "2.0", "id": i, "result": {"stopReason": "end_turn"}})])
    into(["x" * 1000])
    kept = log.entries()
    # Three kept each way (out 2-4; in 3, 4 and the long line), in the order they were carried.
    assert [e.direction for e in kept] == ["out", "out", "in", "out", "in", "in"]
    assert [e.summary() for e in kept[1:3]] == ["→ #3 session/prompt", "← #3 result"]
    assert kept[-1].size == 1000 and len(kept[-1].text) == 100 and kept[-1].clipped
    assert [e.direction for e in log.entries(1)] == ["out", "in"]
    assert log.entries(2, "in")[0].summary() == "← #4 result"


def test_an_update_is_summarised_by_its_kind_and_garbage_by_its_size() -> None:
    log = WireLog()
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    log.record("in", json.dumps({"method": "session/update", "params": {"update": update}}))
    log.record("in", "not json at all")
    first, second = log.entries()
    assert first.summary() == "← session/update agent_message_chunk"
    assert second.summary() == "← (not JSON-RPC, 15 chars)"


def test_a_traceparent_is_w3c_and_an_agents_own_meta_is_kept() -> None:
    parent = traceparent()
    assert TRACEPARENT.match(parent) and parent != traceparent()
    params = {"sessionId": "s", "_meta": {"zed.dev/x": 1}}
    traced = with_trace(params, parent)
    assert traced["_meta"] == {"zed.dev/x": 1, "traceparent": parent}
    assert params["_meta"] == {"zed.dev/x": 1}  # a copy, the caller's dict is untouched


@pytest.mark.scripted_agent("in_process")
async def test_a_turn_is_in_the_log_and_the_file_masks_the_key(
    agent: Agent, tmp_path: Path
) -> None:
    log_file = tmp_path / "wire.jsonl"
    env = {"WIRE_TEST_API_KEY": SECRET}
    async with agent.client(env=env, log_file=log_file, trace=True) as client:
        session = await client.new_session()
        result = await (await session.prompt(f"echo {SECRET} please")).finished
        assert result.success
        summaries = [e.summary() for e in client.wire_log.entries()]
    for expected in ("→ #1 initialize", "← #1 result", "→ #2 session/new", "session/prompt"):
        assert any(expected in s for s in summaries), (expected, summaries)
    assert any(s.startswith("← session/update agent_message_chunk") for s in summaries)

    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert {line["dir"] for line in lines} == {"in", "out"}
    assert SECRET not in log_file.read_text()
    prompt = next(x["message"] for x in lines if x["message"].get("method") == "session/prompt")
    assert "[redacted]" in json.dumps(prompt)
    # Every request carried a fresh traceparent; notifications and answers carry none.
    requests = [m for m in agent.messages() if "method" in m and "id" in m]
    parents = [m["params"]["_meta"]["traceparent"] for m in requests]
    assert len(parents) == len(requests) >= 3 and len(set(parents)) == len(parents)
    assert all(TRACEPARENT.match(p) for p in parents)


@pytest.mark.scripted_agent("in_process")
async def test_without_trace_no_meta_is_added(agent: Agent) -> None:
    async with agent.client() as client:
        await client.new_session()
    new = agent.sent(methods.SESSION_NEW)
    assert new and "_meta" not in new[0]["params"]


def test_agent_log_shows_the_turn_masked_and_clipped(tmp_path: Path, kernel: SharedKernel) -> None:
    env = kernel_env(tmp_path, WIRE_TEST_API_KEY=SECRET)
    long_word = "z" * 5000
    nb = execute(
        [
            "%agent log",
            f"%%agent -q\nremember {SECRET} and {long_word}",
            "%agent log -n 3",
            "%agent log -n 2 --raw",
            "%agent log -n 0",
        ],
        tmp_path,
        env=env,
        allow_errors=True,
        kernel=kernel,
    )
    empty, _, shown, raw, bad = (text(c) for c in nb.cells)
    assert "No JSON-RPC messages" in empty
    assert "→ #" in shown and "session/prompt" in shown and "← " in shown
    assert SECRET not in shown and SECRET not in raw
    assert long_word not in shown and re.search(
        r"z… \[4,8\d\d characters dropped\]", shown
    )  # clipped, sized
    assert "each line as sent" in raw and '"jsonrpc"' in raw
    html = "".join(o["data"]["text/html"] for o in nb.cells[2].outputs if "data" in o)
    assert "<script" not in html and "<pre>" in html
    assert "UsageError" in bad and "1 to 1000" in bad


def test_what_is_kept_is_bounded_in_characters_and_the_newest_read_always_kept() -> None:
    log = WireLog(size=1000, clip=10_000, budget=1000)
    into = log.recorder("in")
    for i in range(50):
        into([json.dumps({"id": i, "pad": "x" * 80})])  # about 100 characters each
    kept = log.entries()
    assert sum(len(e.text) for e in kept) <= 1000 and len(kept) >= 9
    assert json.loads(kept[-1].text)["id"] == 49  # the newest
    into(["y" * 5000])  # one read over the budget on its own: kept, alone
    assert [e.size for e in log.entries()] == [5000]
    # A second recorder of the same way (the connection after an agent restart) and single
    # records share the one budget.
    again = log.recorder("in")
    for i in range(30):
        again([json.dumps({"id": i, "pad": "x" * 80})])
        log.record("in", json.dumps({"id": -i, "pad": "x" * 80}))
    assert sum(len(e.text) for e in log.entries()) <= 1000
