"""Fault injection: agents that die, flood, hang, lie about ids or write garbage.

What must hold every time: the turn ends (within a second of a crash) with `success` False and an
error that says what happened, what the agent had already said is kept intact, the next prompt
works (on a fresh process if the old one died), and no agent process is left. Tests that overlap
tests/client/test_client_process.py (exit mid-turn, 50 MB valid line, version 2, exit during
initialize at the client level) are not repeated here; these cover the other fault points, and the
same faults seen from a notebook. `bench/stress_faults.py` runs them many times with random timing.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_notebook import AgentStartError
from acp_notebook.client import handshake
from acp_notebook.client.client import connect
from acp_notebook.client.process import StderrTail
from acp_notebook.protocol.mutations import Delta, Mutation, PartUpdated
from acp_notebook.protocol.state import ErrorPart, MessagePart, PermissionPart, ToolCallPart
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher, alive, tool_call
from tests.nb_util import errors, execute, scripted, text
from tests.polling import until
from tests.shared_kernel import SharedKernel

pytestmark = pytest.mark.anyio


def rss() -> int:
    """Resident memory of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def digits_text(count: int, size: int = 8) -> str:
    return "".join(f"{i:0{size}d}" for i in range(count))


# -- SIGKILL at points of a turn ------------------------------------------------------------------


def is_part(kind: type) -> Callable[[Mutation], bool]:
    return lambda m: isinstance(m, PartUpdated) and isinstance(m.part, kind)


def after_chunks(count: int) -> Callable[[Mutation], bool]:
    seen = [0]

    def pred(m: Mutation) -> bool:
        seen[0] += isinstance(m, Delta | PartUpdated)
        return seen[0] >= count

    return pred


# name: (script steps, when to kill: a fresh mutation predicate, or "prompt" once it arrived)
KILL_POINTS: dict[str, tuple[list[dict[str, Any]], Any]] = {
    "before any output": ([{"sleep": 30}], "prompt"),
    "mid stream": (
        [{"say": "partial "}, {"chunks": 2_000_000, "size": 8}],
        lambda: after_chunks(500),
    ),
    "pending permission": (
        [
            {"say": "asking"},
            {"permission": {"toolCallId": "c1", "title": "rm", "kind": "delete"}},
            {"say": "never said"},
        ],
        lambda: is_part(PermissionPart),
    ),
    "running tool call": (
        [{"update": tool_call("c1", kind="execute", status="in_progress")}, {"wait_cancel": True}],
        lambda: is_part(ToolCallPart),
    ),
    "mid stderr flood": (
        [{"say": "logging"}, {"stderr": 500_000_000}],
        lambda: is_part(MessagePart),
    ),
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
async def test_sigkill_at_a_point_of_a_turn(agent: Agent, point: str) -> None:
    steps, when = KILL_POINTS[point]
    never = anyio.Event()

    async def nobody_answers(request: Any) -> str | None:
        await never.wait()
        return None

    with anyio.fail_after(45):
        async with agent.client(max_retries=0, permission_handler=nobody_answers) as client:
            session = await client.new_session()
            watcher = Watcher(session)
            turn = await session.prompt(script(*steps))
            if when == "prompt":
                await until(lambda: agent.sent("session/prompt"), 10, "the prompt to arrive")
            else:
                await watcher.wait_for(when())
            if point == "mid stderr flood":  # and the flood is under way, not just begun
                process = client._process
                assert process is not None
                await until(lambda: process.stderr.total > 1_000_000, 10, "stderr output")
            pid = client.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            result = await turn.finished
            took = time.monotonic() - killed
            assert not alive(pid)
            again = await (await session.prompt("still there?")).finished
            assert client.pid != pid and client.processes_started == 2
    assert took < 1.0, took
    assert result.success is False
    assert "the agent process exited with code -9" in (result.error or ""), result.error
    assert result.error in result.errors  # shown in the record too, not only in .error
    assert again.success and again.text == "echo: still there?"
    # What the agent said before it died is kept, exactly.
    if point == "mid stream":
        assert result.text.startswith("partial ")
        count = (len(result.text) - len("partial ")) // 8
        assert count >= 499 and result.text == "partial " + digits_text(count)
    elif point == "pending permission":
        assert result.text == "asking"
        (permission,) = result.permissions
        assert permission.outcome == "cancelled"  # not left "pending" in the record
    elif point == "running tool call":
        (call,) = result.tool_calls
        assert call.status == "failed"  # not left "in_progress": nothing will ever finish it
    elif point == "mid stderr flood":
        assert result.text == "logging"
        assert "stderr filler" in result.error and len(result.error) < 5000  # a tail


async def test_an_agent_ignoring_cancel_with_a_pending_permission_is_killed(agent: Agent) -> None:
    never = anyio.Event()
    asked: list[Any] = []

    async def nobody_answers(request: Any) -> str | None:
        asked.append(request)
        await never.wait()
        return None

    with anyio.fail_after(30):
        async with agent.client(
            "--ignore-sigterm", cancel_grace=0.5, permission_handler=nobody_answers
        ) as client:
            session = await client.new_session()
            watcher = Watcher(session)
            turn = await session.prompt(
                script(
                    {"ignore_cancel": True},
                    {"permission": {"toolCallId": "c1", "title": "Edit", "kind": "edit"}},
                    {"say": "answered, and still ignoring the cancel"},
                )
            )
            await watcher.wait_for(is_part(PermissionPart))
            pid = client.pid
            start = time.monotonic()
            result = await session.stop()
            took = time.monotonic() - start
            assert result is turn.result and pid is not None and not alive(pid)
            again = await (await session.prompt("next")).finished
            assert again.success and client.pid != pid
    assert 0.4 < took < 3
    assert result.stop_reason == "cancelled" and result.success is False
    assert "did not answer session/cancel within 0.5 s" in (result.error or "")
    (permission,) = result.permissions
    assert permission.outcome == "cancelled" and len(asked) == 1
    # The agent got the spec's answer to a cancelled permission request before it was killed.
    assert result.text == (
        'PERMISSION {"result": {"outcome": {"outcome": "cancelled"}}}'
        "answered, and still ignoring the cancel"
    )


async def test_stop_while_the_agent_restarts_is_not_lost(agent: Agent) -> None:
    # The agent died; the next turn starts a fresh process. A stop() during that start used to
    # be dropped (no connection to send session/cancel on, no watchdog): the prompt then went
    # out anyway and a deaf agent kept the turn, and stop(), waiting forever.
    with anyio.fail_after(30):
        async with agent.client(cancel_grace=0.5) as client:
            session = await client.new_session()
            old = client.pid
            assert old is not None
            os.kill(old, signal.SIGKILL)
            await until(lambda: client._connection.closed, 10, "the connection to close")
            watcher = Watcher(session)
            turn = await session.prompt(script({"ignore_cancel": True}, {"wait_cancel": True}))
            await watcher.wait_for(lambda m: type(m).__name__ == "TurnStarted")
            start = time.monotonic()
            result = await session.stop()  # the worker is inside the process start now
            took = time.monotonic() - start
            assert result is turn.result
            again = await (await session.prompt("hello")).finished
    assert result.stop_reason == "cancelled" and took < 3, (result, took)
    assert again.success and again.text == "echo: hello"
    prompts = [m["params"]["prompt"][0]["text"] for m in agent.sent("session/prompt")]
    assert prompts == ["hello"]  # the cancelled prompt never reached the agent


async def test_an_agent_that_cannot_restart_fails_turns_not_the_client(agent: Agent) -> None:
    # Killed, and then its fresh process exits during initialize (a revoked key, say): that
    # AgentStartError used to escape the session's worker and take the client down.
    broken = agent.tmp / "broken"
    command = [
        "sh",
        "-c",
        'if [ -e "$0" ]; then echo "bad key" >&2; exit 3; fi; exec "$@"',
        str(broken),
        *agent.command(),
    ]
    with anyio.fail_after(30):
        async with connect(command, cwd=agent.cwd, max_retries=0) as client:
            session = await client.new_session()
            first = await (await session.prompt(script({"say": "x"}, {"kill_self": True}))).finished
            broken.touch()
            second = await (await session.prompt("again")).finished
            broken.unlink()
            third = await (await session.prompt("and now?")).finished
    assert "exited with code -9" in (first.error or "")
    assert second.success is False
    assert (second.error or "").startswith("the agent exited during initialize")
    assert "exited with code 3" in second.error and "bad key" in second.error
    assert third.success and third.text == "echo: and now?"


# -- floods ---------------------------------------------------------------------------------------


async def test_100_megabytes_of_stderr_at_start_and_mid_turn(agent: Agent) -> None:
    size = 100_000_000
    before = rss()
    with anyio.fail_after(90):
        async with agent.client("--stderr-at-start", str(size)) as client:
            session = await client.new_session()
            result = await (
                await session.prompt(script({"say": "a"}, {"stderr": size}, {"say": "b"}))
            ).finished
            process = client._process
            assert process is not None
            total = process.stderr.total
            tail = client.stderr_tail
    grew = rss() - before
    assert result.success and result.text == "ab"
    assert total >= 2 * size  # every byte was read (or the agent would have blocked)
    assert "stderr filler" in tail and len(tail) <= 2001  # kept: a tail, not the flood
    assert grew < 64 * 1024 * 1024, f"RSS grew by {grew / 1e6:.0f} MB"


def test_the_stderr_tail_keeps_its_size_after_a_small_last_read() -> None:
    tail = StderrTail(limit=1000)
    reads = [f"line {n} ".encode() + b"." * 1100 + b"\n" for n in range(50)]
    reads.append(b"last words\n")  # a small read after big ones used to be all that was kept
    for data in reads:
        tail.feed(data)
    text = tail.text(max_chars=5000)
    assert text.endswith("...\nlast words") and len(text) >= 999
    assert tail.total == sum(map(len, reads)) and tail._size < 1000 + 1200


def test_the_stderr_tail_since_a_mark_holds_only_what_came_after() -> None:
    tail = StderrTail(limit=1000)
    tail.feed(b"agent ready (pid 1)\n")
    mark = tail.total
    assert tail.text(since=mark) == ""
    tail.feed(b"turn: upstream said 500\n")
    assert tail.text(since=mark) == "turn: upstream said 500"
    assert "agent ready" in tail.text()  # the whole tail, as before
    tail.feed(b"x" * 5000)  # the mark's bytes have left the tail: what is kept, all after it
    assert tail.text(since=mark, max_chars=5000) == "x" * 1000
    assert tail.text(since=tail.total + 10) == tail.text()  # a mark of an earlier process


async def test_a_50_megabyte_garbage_line_mid_turn(agent: Agent) -> None:
    size = 50 * 1024 * 1024
    with anyio.fail_after(90):
        async with agent.client() as client:
            session = await client.new_session()
            result = await (
                await session.prompt(
                    script({"say": "before"}, {"raw": "{" + "x" * size}, {"say": "after"})
                )
            ).finished
            again = await (await session.prompt("hi")).finished
            assert client.processes_started == 1
    assert result.success, result
    assert result.text == "before\n\nafter"
    (error,) = result.errors
    assert error.startswith("the agent sent invalid JSON: {xxxx")
    assert len(error) < 300 and f"({size + 1} chars)" in error  # an excerpt, with the size
    assert again.success


# -- ids and garbage mid-turn ---------------------------------------------------------------------


async def test_answers_to_unknown_or_already_answered_ids(agent: Agent) -> None:
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            result = await (
                await session.prompt(
                    script(
                        {"say": "one"},
                        {"respond_id": 999},
                        {"respond_id": 1},  # 1: initialize
                        {"respond_id": "abc"},
                        {"respond_id": None},
                        {"respond_id": True},
                        {"say": "two"},
                    )
                )
            ).finished
            assert client.processes_started == 1
    assert result.success, result
    assert [re.sub(r"request id .*", "", e) for e in result.errors] == [
        "the agent answered an unknown or already answered "
    ] * 5
    assert [e.rsplit(" ", 1)[1] for e in result.errors] == ["999", "1", "'abc'", "None", "True"]
    assert result.text == "one\n\ntwo"


async def test_invalid_utf8_and_json_mid_turn_are_error_parts(agent: Agent) -> None:
    utf16 = '{"jsonrpc":"2.0","method":"session/update"}'.encode("utf-16-le").replace(b"\n", b"")
    garbage = [
        ({"raw_hex": "c3"}, "invalid UTF-8"),
        ({"raw_hex": "7b2261ff7d"}, "invalid UTF-8"),  # {"a\xff}
        ({"raw_hex": utf16.hex()}, "invalid JSON"),  # never guessed as UTF-16
        ({"raw": "{not json"}, "invalid JSON"),
        ({"raw": "[1, 2]"}, "not a JSON-RPC object"),
        ({"raw": '{"jsonrpc": "2.0"}'}, "neither request, notification nor response"),
        ({"raw": '{"jsonrpc": "2.0", "method": 7}'}, "method is not a string"),
        ({"raw": "[" * 50_000}, "JSON nested too deeply"),
        ({"raw": '{"a":' + "[" * 150 + "]" * 150 + "}"}, "JSON nested too deeply"),
    ]
    steps = [{"say": "start"}]
    for step, _ in garbage:
        steps += [step, {"say": "."}]
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            result = await (await session.prompt(script(*steps))).finished
            assert client.processes_started == 1
    assert result.success, result
    reasons = [e.removeprefix("the agent sent ").split(":")[0] for e in result.errors]
    assert reasons == [reason for _, reason in garbage]
    # Each error sits where the garbage came, between the messages around it.
    kinds = [type(p).__name__ for p in result.parts]
    assert kinds == ["MessagePart"] + ["ErrorPart", "MessagePart"] * len(garbage)
    assert all(
        isinstance(p, ErrorPart) and len(p.message) < 300
        for p in result.parts
        if not isinstance(p, MessagePart)
    )


# -- faults at start ------------------------------------------------------------------------------


async def test_garbage_then_silence_at_start_fails_in_seconds_not_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CLI started without its ACP flag: a banner on stdout, then it waits for a human.
    command = ["sh", "-c", "printf 'Welcome to the interactive CLI\\n> '; exec sleep 60"]
    # The grace after garbage, shortened from 5 s: what is tested is that it, not the 60 s
    # initialize_timeout, ends the start (the message names the grace that did).
    monkeypatch.setattr(handshake, "_NOT_ACP_GRACE", 1.0)
    start = time.monotonic()
    with anyio.fail_after(20):
        with pytest.raises(AgentStartError) as info:
            async with connect(command, cwd=tmp_path):
                pytest.fail("connected to a banner")
    took = time.monotonic() - start
    message = str(info.value)
    assert took < 10, took  # the grace after garbage (1 s), not initialize_timeout (60 s)
    assert "did not answer initialize within 1 s after" in message, message
    assert "not ACP JSON-RPC" in message and "Welcome to the interactive CLI" in message
    assert "--acp" in message


async def test_garbage_then_exit_at_start_says_both(tmp_path: Path) -> None:
    command = ["sh", "-c", "printf 'Usage: agent [options]\\n\\377\\n'; echo oops >&2; exit 2"]
    with anyio.fail_after(20):
        with pytest.raises(AgentStartError) as info:
            async with connect(command, cwd=tmp_path):
                pytest.fail("connected")
    message = str(info.value)
    assert "exited with code 2" in message and "oops" in message
    assert "invalid JSON: Usage: agent [options]" in message


async def test_a_banner_before_a_real_agent_is_tolerated(agent: Agent) -> None:
    command = ["sh", "-c", 'printf "\\377\\376 banner\\n"; exec "$@"', "sh", *agent.command()]
    with anyio.fail_after(20):
        async with connect(command, cwd=agent.cwd) as client:
            session = await client.new_session()
            result = await (await session.prompt("hi")).finished
            errors_seen = list(client.protocol_errors)
    assert result.success and result.text == "echo: hi"
    assert errors_seen == ["the agent sent invalid UTF-8: \ufffd\ufffd banner"]


# -- the same faults seen from a notebook (nbclient, a real kernel) -------------------------------


def test_start_faults_in_a_notebook_fail_their_cell_clearly(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    not_acp = shlex.quote(shlex.join(["sh", "-c", "printf 'Welcome\\n> '; exec sleep 60"]))
    crash_mid_turn = script({"say": "partial"}, {"kill_self": True})
    cells = [
        # The not-ACP grace shortened from 5 s in this kernel (the failure, not the wait, is
        # tested here; test_garbage_then_silence_at_start_... tests the grace itself).
        "import acp_notebook.client.handshake as h\nh._NOT_ACP_GRACE = 1.0",
        f"%%agent --agent {scripted('--exit-during-initialize', '3')}\nhi",
        f"%%agent --agent {scripted('--protocol-version', '2')}\nhi",
        f"%%agent --agent {not_acp}\nhi",
        "%config AcpNotebook.max_retries = 0",
        f"%%agent --agent {scripted()} --session crashy\n{crash_mid_turn}",
        f"%%agent --agent {scripted()} --session crashy\nback again",
        "print(_.success, _.text)",
    ]
    started = time.monotonic()
    nb = execute(cells, tmp_path, allow_errors=True, timeout=60, kernel=kernel)
    took = time.monotonic() - started
    failed = {i: out for i, out in errors(nb)}
    assert sorted(failed) == [1, 2, 3, 5], {i: text(nb.cells[i]) for i in failed}
    for index in failed:
        assert failed[index]["ename"] == "TurnFailed"  # one clear paragraph, no traceback
    exit_msg, v2_msg, not_acp_msg, crash_msg = (text(nb.cells[i]) for i in (1, 2, 3, 5))
    assert "exited during initialize" in exit_msg and "code 3" in exit_msg
    assert "protocol version 2" in v2_msg and "version 1" in v2_msg
    assert "not ACP JSON-RPC" in not_acp_msg and "Welcome" in not_acp_msg
    assert "within 1 s after" in not_acp_msg, not_acp_msg  # the grace set above
    assert "exited with code -9" in crash_msg and "What to try" in crash_msg
    assert text(nb.cells[7]).strip() == "True echo: back again"
    assert took < 60, took  # nothing waited for a timeout (the not-ACP grace is 1 s here)
