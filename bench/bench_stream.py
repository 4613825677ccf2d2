#!/usr/bin/env python3
"""Streaming benchmark: one agent streams N agent_message_chunk updates of S bytes per turn.

    .venv/bin/python bench/bench_stream.py [--reps 7] [--chunks 20000] [--size 20] [--no-memory]

Consumers, all against bench/stream_agent.py, all in this one process and event loop, each with
its own agent process started (initialize + session/new) before any timing:

  a       bare reader: asyncio subprocess, reads stdout in 256 KiB reads, splits lines,
          json.loads each, appends the text of agent_message_chunk updates, stops at the
          session/prompt response. No validation, no dispatch: the floor for Python.
  b       the official SDK (agent-client-protocol, `acp`): spawn_agent_process + a Client whose
          session_update appends the text.
  c       acp_notebook, public API: session.prompt(...) then await turn.finished; result.text.
  c+sub   the same with a no-op subscriber attached to the session (Delta per chunk).

Each timed turn runs from sending session/prompt to having the response and the whole text as
one string (verified against the expected text). One warm-up turn per consumer, then --reps
rounds; each round runs every consumer once, in a rotated order. Medians are reported, with
the ratios and PASS/FAIL against the targets of the issue: c/a <= 1.5 and c faster than b.
Nothing is asserted: it is a benchmark.

Then (unless --no-memory) tracemalloc measures the memory a finished acp_notebook turn keeps
(its TurnResult and the session's history record) for the same total text in 20000 x 20 B,
2000 x 200 B and 200 x 2000 B chunks: bytes kept per byte of text should be about equal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from stream_agent import expected_text  # noqa: E402

AGENT = [sys.executable, str(HERE / "stream_agent.py")]
READ_SIZE = 256 * 1024  # the same read size acp_notebook uses (AgentProcess.receive)

Turn = Callable[[int, int], Awaitable[str]]


# -- (a) the bare reader ---------------------------------------------------------------------------


class BareReader:
    """What anyone would write first: asyncio subprocess, big reads, split lines, json.loads.

    It reads stdout with `StreamReader.read(256 KiB)` (whatever is buffered, up to 256 KiB), keeps
    the unfinished last line for the next read, `json.loads` every complete line, appends the text
    of each agent_message_chunk to a list, and stops at the line answering the request; the text
    is then `"".join(parts)`. No schema validation, no per-message dispatch or tasks.
    """

    name = "a  bare reader"

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *AGENT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        stack.push_async_callback(self._close)
        self.rest = b""
        self.next_id = 0
        await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = await self.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        self.session_id = new["sessionId"]

    async def _close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5)
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def request(self, method: str, params: Any, parts: list[str] | None = None) -> Any:
        rid = self.next_id
        self.next_id += 1
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
            + b"\n"
        )
        await stdin.drain()
        loads = json.loads
        while True:
            data = await stdout.read(READ_SIZE)
            if not data:
                raise EOFError("the agent closed stdout")
            lines = (self.rest + data).split(b"\n")
            self.rest = lines.pop()
            for i, line in enumerate(lines):
                msg = loads(line)
                if msg.get("method") == "session/update":
                    update = msg["params"]["update"]
                    if parts is not None and update.get("sessionUpdate") == "agent_message_chunk":
                        parts.append(update["content"]["text"])
                elif msg.get("id") == rid:
                    if lines[i + 1 :]:  # never happens with one request at a time; keep them
                        self.rest = b"\n".join(lines[i + 1 :]) + b"\n" + self.rest
                    return msg.get("result")

    async def turn(self, n: int, size: int) -> str:
        parts: list[str] = []
        await self.request(
            "session/prompt",
            {"sessionId": self.session_id, "prompt": [{"type": "text", "text": f"{n} {size}"}]},
            parts,
        )
        return "".join(parts)


# -- (b) the official SDK --------------------------------------------------------------------------


class SdkCollector:
    """An `acp.Client` whose session_update appends the text of agent message chunks."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        content = getattr(update, "content", None)
        if (
            getattr(update, "session_update", None) == "agent_message_chunk"
            and getattr(content, "type", None) == "text"
        ):
            self.parts.append(content.text)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        import acp

        raise acp.RequestError.method_not_found("session/request_permission")


class SdkClient:
    name = "b  official SDK (acp 0.12.1)"

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        import acp

        self.acp = acp
        self.collector = SdkCollector()
        self.conn, _proc = await stack.enter_async_context(
            acp.spawn_agent_process(self.collector, AGENT[0], *AGENT[1:])
        )
        await self.conn.initialize(protocol_version=1)
        new = await self.conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        self.session_id = new.session_id

    async def turn(self, n: int, size: int) -> str:
        self.collector.parts = parts = []
        response = await self.conn.prompt(
            session_id=self.session_id, prompt=[self.acp.text_block(f"{n} {size}")]
        )
        assert response.stop_reason == "end_turn", response
        # conn.prompt() waits for the session_update tasks it has seen; make sure of all of them.
        # The SDK gives nothing to wait on here, so yield to its tasks until all chunks landed.
        while len(parts) < n:  # noqa: ASYNC110
            await asyncio.sleep(0)
        return "".join(parts)


# -- (c) acp_notebook ------------------------------------------------------------------------------


class NotebookClient:
    def __init__(self, subscriber: bool) -> None:
        self.subscriber = subscriber
        self.name = "c+sub acp_notebook, no-op subscriber" if subscriber else "c  acp_notebook"
        self.deliveries = 0

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        import acp_notebook

        self.client = await stack.enter_async_context(acp_notebook.connect(AGENT))
        self.session = await self.client.new_session()
        if self.subscriber:
            self.session.subscribe(self._noop)

    def _noop(self, mutation: Any) -> None:
        pass

    async def turn(self, n: int, size: int) -> str:
        turn = await self.session.prompt(f"{n} {size}")
        result = await turn.finished
        assert result.success, result
        return result.text


# -- the timed rounds ------------------------------------------------------------------------------


async def timed_turn(consumer: Any, n: int, size: int, expected: str) -> float:
    gc.collect()
    t0 = time.perf_counter()
    text = await consumer.turn(n, size)
    elapsed = time.perf_counter() - t0
    if text != expected:
        raise RuntimeError(
            f"{consumer.name}: got {len(text)} chars of text, expected {len(expected)}"
        )
    return elapsed


async def run_speed(args: argparse.Namespace) -> None:
    n, size = args.chunks, args.size
    expected = expected_text(n, size)
    consumers = [BareReader(), SdkClient(), NotebookClient(False), NotebookClient(True)]
    times: dict[str, list[float]] = {c.name: [] for c in consumers}
    async with contextlib.AsyncExitStack() as stack:
        print(
            f"agent: {' '.join(Path(a).name for a in AGENT)}; {n} chunks x {size} B "
            f"= {n * size} B of text per turn; {args.reps} reps after 1 warm-up; "
            f"Python {sys.version.split()[0]}"
        )
        print(
            "startup (spawn + initialize + session/new; the first of a library includes "
            "importing it; not in the turn times):"
        )
        for c in consumers:
            t0 = time.perf_counter()
            await c.start(stack)
            print(f"  {c.name:40s} {1000 * (time.perf_counter() - t0):8.1f} ms")
        for c in consumers:
            await timed_turn(c, n, size, expected)  # warm-up
        for rep in range(args.reps):
            k = rep % len(consumers)
            for c in consumers[k:] + consumers[:k]:
                times[c.name].append(await timed_turn(c, n, size, expected))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"turn time, ms (median of {args.reps}; min..max):")
    for name, ts in times.items():
        print(
            f"  {name:40s} {1000 * med[name]:8.1f}   ({1000 * min(ts):.1f}..{1000 * max(ts):.1f})"
            f"   {1e6 * med[name] / n:6.2f} us/chunk"
        )

    # Shared CPUs make the machine's speed drift during a run, so besides the ratio of the
    # medians we give the median of the per-round ratios (a round runs every consumer back to
    # back, so both sides of a ratio saw the same machine); PASS/FAIL uses the per-round figure.
    def ratio(x: Any, y: Any) -> tuple[float, float]:
        pairs = zip(times[x.name], times[y.name], strict=True)
        per_round = statistics.median(t / u for t, u in pairs)
        return med[x.name] / med[y.name], per_round

    a, b, c, cs = consumers
    print("ratios (of medians | median of per-round ratios):")
    rows = [("b/a", ratio(b, a), "issue measured about 3.7", None)]
    for label, x in (("c", c), ("c+sub", cs)):
        rows.append((f"{label}/a", ratio(x, a), "target <= 1.5", lambda r: r <= 1.5))
        rows.append((f"{label}/b", ratio(x, b), "target < 1 (faster than b)", lambda r: r < 1))
    for label, (of_medians, per_round), target, check in rows:
        verdict = "" if check is None else ("PASS" if check(per_round) else "FAIL")
        print(f"  {label:8s} {of_medians:5.2f} | {per_round:5.2f}   {target:28s} {verdict}")


# -- memory ----------------------------------------------------------------------------------------

MEMORY_SHAPES = ((20000, 20), (2000, 200), (200, 2000))


async def run_memory(args: argparse.Namespace) -> None:
    """Bytes a finished turn keeps alive (result + the session's history record) per text byte.

    For each shape: one warm-up turn of the same shape (so connection buffers have their steady
    size), gc, snapshot; one turn whose TurnResult is kept; gc, snapshot; the difference of traced
    memory is what the turn retains. The transport's read buffer (asyncio/streams.py, a bytearray
    whose capacity wobbles by tens of KiB from turn to turn) belongs to the connection, not to the
    turn: it is shown separately, not counted.
    """
    import acp_notebook

    print("memory kept by a finished acp_notebook turn (tracemalloc; result kept, gc'd):")
    tracemalloc.start()
    own = [tracemalloc.Filter(False, tracemalloc.__file__)]
    transport = "*/asyncio/streams.py"
    kept: list[Any] = []
    try:
        async with acp_notebook.connect(AGENT) as client:
            session = await client.new_session()
            for n, size in MEMORY_SHAPES:
                total = n * size
                expected = expected_text(n, size)
                warm = await (await session.prompt(f"{n} {size}")).finished
                assert warm.text == expected
                del warm
                gc.collect()
                before = tracemalloc.take_snapshot().filter_traces(own)
                result = await (await session.prompt(f"{n} {size}")).finished
                assert result.text == expected
                kept.append(result)
                gc.collect()
                after = tracemalloc.take_snapshot().filter_traces(own)
                stats = after.compare_to(before, "lineno")
                buffer = sum(
                    s.size_diff
                    for s in after.filter_traces([tracemalloc.Filter(True, transport)]).compare_to(
                        before.filter_traces([tracemalloc.Filter(True, transport)]), "filename"
                    )
                )
                retained = sum(s.size_diff for s in stats) - buffer
                print(
                    f"  {n:6d} x {size:5d} B = {total} B text: retained {retained:7d} B "
                    f"= {retained / total:4.2f} B per text byte   (read buffer {buffer:+d} B)"
                )
                if args.verbose:
                    for s in stats[:6]:
                        print(f"      {s}")
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--size", type=int, default=20)
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc part")
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="top allocation sites (memory)")
    args = parser.parse_args()
    if not args.memory_only:
        asyncio.run(run_speed(args))
    if not args.no_memory:
        asyncio.run(run_memory(args))


if __name__ == "__main__":
    main()
