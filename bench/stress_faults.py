#!/usr/bin/env python3
"""Fault stress: many agent faults with random timing, and what the user gets each time.

    .venv/bin/python bench/stress_faults.py [--kills 60] [--seed 1] [--quick] [--json FILE]

Every fault runs against tests/agents/scripted_agent.py through the public client API, in this
one process. For each kind of fault it reports how many times it ran, what the turn (or the
connect) gave, how long the user waited, and whether anything was lost: the text the agent had
streamed before a crash must be kept exactly (chunk i is the number i, so a gap or a duplicate
shows), the next prompt must work (on a fresh process after a crash), no agent process may be
left, and this process's file descriptors, asyncio tasks, threads and children must be back to
where they were. Kills land at random points: after a random number of streamed updates, or a
random delay after the prompt reached the agent. The figures feed FAULTS.md.

--quick runs a few of each (about 20 s); the default takes one to two minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shlex
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio.lowlevel

from acp_notebook.client.client import connect
from acp_notebook.client.session import Session
from acp_notebook.errors import AgentStartError, ProtocolError
from acp_notebook.protocol import jsonrpc as rpc
from acp_notebook.protocol.mutations import Delta, Mutation, PartUpdated
from acp_notebook.protocol.state import MessagePart, PermissionPart, ToolCallPart
from tests.agents.script import agent_command, script

# -- bookkeeping ----------------------------------------------------------------------------------


@dataclass
class Row:
    fault: str
    runs: int = 0
    ok: int = 0  # runs where every check held
    waits: list[float] = field(default_factory=list)  # what the user waited, seconds
    seen: str = ""  # what the user sees (one example)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def check(self, cond: bool, what: str) -> bool:
        if not cond and len(self.failures) < 5:
            self.failures.append(what)
        return cond

    def wait_text(self) -> str:
        if not self.waits:
            return ""
        w = sorted(self.waits)
        p99 = w[min(len(w) - 1, round(0.99 * (len(w) - 1)))]
        return (
            f"median {statistics.median(w) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
            f"max {w[-1] * 1000:.0f} ms"
        )


def children() -> int:
    me, count = os.getpid(), 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            count += int(stat.rsplit(")", 1)[1].split()[1]) == me
    return count


def counts() -> dict[str, int]:
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "tasks": len(asyncio.all_tasks()),
        "threads": threading.active_count(),
        "children": children(),
    }


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


class Watch:
    """Counts a session's mutations; wait(n) returns once n have arrived for the running turn."""

    def __init__(self, session: Session) -> None:
        self.count = 0
        self.kinds: set[type] = set()
        self.event = anyio.Event()
        session.subscribe(self._on)

    def reset(self) -> None:
        self.count = 0
        self.kinds = set()

    def _on(self, m: Mutation) -> None:
        if isinstance(m, Delta | PartUpdated):
            self.count += 1
            if isinstance(m, PartUpdated):
                self.kinds.add(type(m.part))
            self.event.set()

    async def until(self, pred: Callable[[], bool], timeout: float = 10) -> None:
        with anyio.fail_after(timeout):
            while not pred():
                self.event = anyio.Event()
                await self.event.wait()


async def wait_file(pred: Callable[[], bool], timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not pred():  # noqa: ASYNC110  (a file another process writes: no event)
            await anyio.sleep(0.005)


def digits(count: int, size: int = 8) -> str:
    return "".join(f"{i:0{size}d}" for i in range(count))


# -- the faults -----------------------------------------------------------------------------------

SHAPES = ["stream", "permission", "tool call", "before output", "stderr flood", "thinking"]


async def kills(n: int, rng: random.Random, tmp: Path) -> Row:
    row = Row("SIGKILL at a random point of a turn")
    record = tmp / "kills.jsonl"
    shapes_seen: dict[str, int] = {}
    never = anyio.Event()

    async def nobody(request: Any) -> str | None:
        await never.wait()
        return None

    cmd = agent_command("--record", str(record), "--resume", "--state-dir", str(tmp / "state"))
    async with connect(cmd, cwd=tmp, max_retries=0, permission_handler=nobody) as client:
        session = await client.new_session()
        watch = Watch(session)
        for _ in range(n):
            shape = rng.choice(SHAPES)
            shapes_seen[shape] = shapes_seen.get(shape, 0) + 1
            prompts_before = sum(
                1 for line in record.read_text().splitlines() if '"session/prompt"' in line
            )
            steps: list[dict[str, Any]]
            if shape == "stream":
                steps = [{"chunks": 5_000_000, "size": 8}]
            elif shape == "permission":
                steps = [
                    {"say": "asking"},
                    {"permission": {"toolCallId": "c1", "kind": "edit", "title": "Edit"}},
                ]
            elif shape == "tool call":
                steps = [
                    {
                        "update": {
                            "sessionUpdate": "tool_call",
                            "toolCallId": "c1",
                            "title": "Run",
                            "kind": "execute",
                            "status": "in_progress",
                        }
                    },
                    {"chunks": 5_000_000, "size": 8},
                ]
            elif shape == "before output":
                steps = [{"sleep": 30}]
            elif shape == "stderr flood":
                steps = [{"say": "log"}, {"stderr": 2_000_000_000}]
            else:
                steps = [{"think": "hmm"}, {"chunks": 5_000_000, "size": 8, "message_id": "m1"}]
            steps.append({"wait_cancel": True})
            watch.reset()
            turn = await session.prompt(script(*steps))
            # A random point: some streamed updates in, or a random delay after the prompt.
            if shape in ("before output", "stderr flood") or rng.random() < 0.3:
                await wait_file(
                    lambda n=prompts_before: (
                        sum(
                            1
                            for line in record.read_text().splitlines()
                            if '"session/prompt"' in line
                        )
                        > n
                    )
                )
                await anyio.sleep(rng.uniform(0, 0.2))
            else:
                # permission: the message, the tool call, the request; the others stream.
                target = rng.randint(1, 3) if shape == "permission" else rng.randint(1, 3000)
                await watch.until(lambda n=target: watch.count >= n)
            pid = client.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            with anyio.fail_after(10):
                result = await turn.finished
            row.waits.append(time.monotonic() - killed)
            row.runs += 1
            good = row.check(result.success is False, f"{shape}: success {result.success}")
            good &= row.check(
                "the agent process exited with code -9" in (result.error or ""),
                f"{shape}: error {result.error!r}",
            )
            row.seen = row.seen or (result.error or "").split(";")[0]
            # Nothing lost: the streamed text is exactly chunks 0..k-1, no gap, no duplicate.
            if shape in ("stream", "tool call", "thinking"):
                k = len(result.text) // 8
                good &= row.check(result.text == digits(k), f"{shape}: text corrupted")
            if shape == "thinking":
                good &= row.check(result.thoughts == "hmm", f"thoughts {result.thoughts!r}")
            if shape == "permission" and PermissionPart in watch.kinds:
                good &= row.check(
                    all(p.outcome == "cancelled" for p in result.permissions),
                    "permission left pending",
                )
            if shape == "tool call" and ToolCallPart in watch.kinds:
                good &= row.check(
                    all(c.status == "failed" for c in result.tool_calls), "tool call left running"
                )
            with anyio.fail_after(10):
                again = await (await session.prompt("next")).finished
            good &= row.check(again.success and again.text == "echo: next", f"next prompt: {again}")
            good &= row.check(not alive(pid) and client.pid != pid, "old agent alive")
            row.ok += good
        row.notes.append("points: " + ", ".join(f"{k} {v}" for k, v in sorted(shapes_seen.items())))
        row.notes.append(f"{client.processes_started} agent processes started")
    return row


async def ignore_cancel(n: int, tmp: Path) -> Row:
    row = Row("agent never answers session/cancel (grace 0.5 s)")
    async with connect(agent_command("--ignore-sigterm"), cwd=tmp, cancel_grace=0.5) as client:
        session = await client.new_session()
        watch = Watch(session)
        for _ in range(n):
            watch.reset()
            turn = await session.prompt(
                script({"ignore_cancel": True}, {"say": "busy"}, {"wait_cancel": True})
            )
            await watch.until(lambda: MessagePart in watch.kinds)
            pid = client.pid
            start = time.monotonic()
            result = await session.stop()
            row.waits.append(time.monotonic() - start)
            row.runs += 1
            assert result is not None
            good = row.check(result.cancelled and not result.success, f"{result}")
            good &= row.check(
                "did not answer session/cancel" in (result.error or ""), f"{result.error}"
            )
            row.seen = row.seen or (result.error or "")
            again = await (await session.prompt("hi")).finished
            good &= row.check(again.success and pid is not None and not alive(pid), "after")
            row.ok += good and turn.result is result
    return row


async def stderr_flood(n: int, tmp: Path) -> Row:
    row = Row("100 MB on stderr (at start and mid-turn)")
    size = 100_000_000
    before = rss_mb()
    for _ in range(n):
        start = time.monotonic()
        async with connect(agent_command("--stderr-at-start", str(size)), cwd=tmp) as client:
            session = await client.new_session()
            result = await (
                await session.prompt(script({"say": "a"}, {"stderr": size}, {"say": "b"}))
            ).finished
            assert client._process is not None
            total = client._process.stderr.total
            tail = client.stderr_tail
        row.waits.append(time.monotonic() - start)
        row.runs += 1
        good = row.check(result.success and result.text == "ab", f"{result}")
        good &= row.check(total >= 2 * size and len(tail) <= 2001, f"total {total}")
        row.ok += good
    row.seen = "the turn completes; the error message of a failure would quote the last 2000 chars"
    row.notes.append(f"RSS grew {rss_mb() - before:.0f} MB over {n} runs of 200 MB of stderr")
    return row


async def huge_lines(n: int, tmp: Path) -> Row:
    row = Row("one 50 MB line on stdout (valid, then garbage)")
    size = 50 * 1024 * 1024
    before = rss_mb()
    async with connect(agent_command(), cwd=tmp) as client:
        session = await client.new_session()
        for i in range(2 * n):
            garbage = i % 2 == 1
            steps = (
                [{"say": "<"}, {"raw": "{" + "x" * size}, {"say": ">"}]
                if garbage
                else [{"huge_say": size}]
            )
            start = time.monotonic()
            result = await (await session.prompt(script(*steps))).finished
            row.waits.append(time.monotonic() - start)
            row.runs += 1
            if garbage:
                good = row.check(
                    result.success
                    and result.text == "<\n\n>"
                    and len(result.errors) == 1
                    and len(result.errors[0]) < 300,
                    f"garbage: {result.errors}",
                )
                row.seen = result.errors[0][:60] + "…"
            else:
                good = row.check(result.success and len(result.text) == size, "valid line")
            row.ok += good
        row.notes.append(f"{client.processes_started} process; RSS grew {rss_mb() - before:.0f} MB")
    return row


async def start_faults(n: int, tmp: Path) -> list[Row]:
    rows = []
    for name, flags, want in [
        ("agent exits during initialize", ["--exit-during-initialize", "3"], AgentStartError),
        ("agent answers protocol version 2", ["--protocol-version", "2"], ProtocolError),
    ]:
        row = Row(name)
        for _ in range(n):
            start = time.monotonic()
            try:
                async with connect(agent_command(*flags), cwd=tmp):
                    raise AssertionError("connected")
            except want as exc:
                row.seen = row.seen or str(exc).split("\n")[0][:140]
                row.ok += 1
            except Exception as exc:
                row.check(False, repr(exc))
            row.waits.append(time.monotonic() - start)
            row.runs += 1
        rows.append(row)
    row = Row("not an ACP agent: a banner on stdout, then silence")
    command = ["sh", "-c", "printf 'Welcome to the CLI\\n> '; exec sleep 60"]
    for _ in range(max(1, n // 10)):
        start = time.monotonic()
        try:
            async with connect(command, cwd=tmp):
                raise AssertionError("connected")
        except AgentStartError as exc:
            row.seen = str(exc)[:120] + "…"
            row.ok += "not ACP JSON-RPC" in str(exc)
        row.waits.append(time.monotonic() - start)
        row.runs += 1
    rows.append(row)
    row = Row("garbage on stdout, then exit, during initialize")
    command = ["sh", "-c", "printf 'oops \\377\\n'; exit 2"]
    for _ in range(n):
        start = time.monotonic()
        try:
            async with connect(command, cwd=tmp):
                raise AssertionError("connected")
        except AgentStartError as exc:
            row.seen = str(exc).split("(command")[0] + "… " + str(exc).split("):", 1)[-1][:90]
            row.ok += "exited with code 2" in str(exc) and "invalid UTF-8" in str(exc)
        row.waits.append(time.monotonic() - start)
        row.runs += 1
    rows.append(row)
    return rows


async def bad_ids(n: int, tmp: Path) -> Row:
    row = Row("answers to unknown or already answered ids")
    async with connect(agent_command(), cwd=tmp) as client:
        session = await client.new_session()
        for i in range(n):
            ids = [999 + i, 1, f"x{i}", None, True]
            steps = [{"say": "a"}, *[{"respond_id": r} for r in ids], {"say": "b"}]
            result = await (await session.prompt(script(*steps))).finished
            row.runs += 1
            row.ok += row.check(
                result.success and len(result.errors) == len(ids) and result.text == "a\n\nb",
                f"{result.errors}",
            )
            row.seen = row.seen or result.errors[0]
        row.notes.append(f"{len(ids)} bad answers a turn; {client.processes_started} process")
    return row


def garbage_line(rng: random.Random) -> bytes:
    kind = rng.choice(["bytes", "utf8", "json", "deep", "utf16", "frame"])
    if kind == "bytes":
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 80)))
    elif kind == "utf8":
        data = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"\xff"}}'
    elif kind == "json":
        data = rng.choice([b"[]", b"42", b'"s"', b"null", b'{"jsonrpc":"2.0"}', b'{"method":1}'])
    elif kind == "deep":
        data = b"[" * rng.randint(101, 100_000)
    elif kind == "utf16":
        data = '{"jsonrpc":"2.0","method":"x"}'.encode("utf-16-le")
    else:
        data = b'{"jsonrpc":"2.0","method":"session/update","params":' + b"{" * 3
    data = data.replace(b"\n", b" ")
    return data if data.strip() and isinstance(rpc.decode(data), rpc.Malformed) else b"{"


async def garbage(n: int, rng: random.Random, tmp: Path) -> Row:
    row = Row("invalid UTF-8 / invalid JSON / deep JSON mid-turn")
    lines = 0
    async with connect(agent_command(), cwd=tmp) as client:
        session = await client.new_session()
        for _ in range(n):
            junk = [garbage_line(rng) for _ in range(rng.randint(1, 5))]
            lines += len(junk)
            steps = [{"say": "a"}, *[{"raw_hex": j.hex()} for j in junk], {"say": "b"}]
            result = await (await session.prompt(script(*steps))).finished
            row.runs += 1
            row.ok += row.check(
                result.success and len(result.errors) == len(junk) and result.text == "a\n\nb",
                f"{result.errors} {result.text!r}",
            )
            row.seen = row.seen or result.errors[0]
        row.notes.append(f"{lines} garbage lines; {client.processes_started} process")
    return row


async def cycles(n: int, tmp: Path) -> Row:
    row = Row("prompt then stop (session/cancel honoured)")
    async with connect(agent_command(), cwd=tmp) as client:
        session = await client.new_session()
        watch = Watch(session)
        for _ in range(n):
            watch.reset()
            turn = await session.prompt(script({"say": "working"}, {"wait_cancel": True}))
            await watch.until(lambda: MessagePart in watch.kinds)
            start = time.monotonic()
            result = await session.stop()
            row.waits.append(time.monotonic() - start)
            row.runs += 1
            row.ok += row.check(
                result is turn.result and result is not None and result.cancelled, f"{result}"
            )
        row.notes.append(f"{client.processes_started} process")
    row.seen = "stop_reason 'cancelled', success False, no error"
    return row


# -- main -----------------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    q = args.quick
    tmp = Path(tempfile.mkdtemp(prefix="acpnb-stress-"))
    started = time.monotonic()
    before = counts()
    rows: list[Row] = []
    sections = [
        ("kills", lambda: kills(10 if q else args.kills, rng, tmp)),
        ("ignore cancel", lambda: ignore_cancel(3 if q else 10, tmp)),
        ("stderr", lambda: stderr_flood(1 if q else 3, tmp)),
        ("huge lines", lambda: huge_lines(1 if q else 3, tmp)),
        ("ids", lambda: bad_ids(10 if q else 50, tmp)),
        ("garbage", lambda: garbage(20 if q else 200, rng, tmp)),
        ("cycles", lambda: cycles(100 if q else 1000, tmp)),
    ]
    for name, run in sections:
        t = time.monotonic()
        rows.append(await run())
        print(f"  {name}: {time.monotonic() - t:.1f} s", file=sys.stderr, flush=True)
    t = time.monotonic()
    rows[1:1] = await start_faults(3 if q else 20, tmp)
    print(f"  start faults: {time.monotonic() - t:.1f} s", file=sys.stderr, flush=True)
    await anyio.lowlevel.checkpoint()
    after = counts()
    leftover = [p for p in _agent_pids(tmp)]
    return {
        "rows": rows,
        "before": before,
        "after": after,
        "leftover": leftover,
        "seconds": time.monotonic() - started,
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _agent_pids(tmp: Path) -> list[int]:
    """Live processes whose command line mentions the scripted agent or this run's directory."""
    found = []
    marker = str(Path(agent_command()[1])).encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if (marker in cmdline or str(tmp).encode() in cmdline) and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def report(out: dict[str, Any]) -> str:
    rows: list[Row] = out["rows"]
    lines = [
        "| fault | runs | all checks held | user waited | what the user sees | notes |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        seen = r.seen.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {r.fault} | {r.runs} | {r.ok}/{r.runs} | {r.wait_text()} | {seen} | "
            f"{'; '.join(r.notes)} |"
        )
    b, a = out["before"], out["after"]
    lines.append("")
    lines.append(
        "Resources of this process before → after everything: "
        + ", ".join(f"{k} {b[k]} → {a[k]}" for k in b)
        + f"; agent processes left: {len(out['leftover'])}; max RSS "
        f"{out['maxrss_mb']:.0f} MB; {out['seconds']:.0f} s in all."
    )
    failures = [f"{r.fault}: {f}" for r in rows for f in r.failures]
    if failures:
        lines.append("")
        lines.append("FAILED CHECKS:")
        lines.extend(f"- {f}" for f in failures)
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=60, help="random kill points (default 60)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a few of each, about 20 s")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    print(
        f"stress_faults: seed {args.seed}, python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs; command {shlex.join(agent_command())}",
        file=sys.stderr,
    )
    out = anyio.run(main, args)
    print(report(out))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": [r.__dict__ for r in out["rows"]],
                    **{k: out[k] for k in ("before", "after", "leftover", "seconds", "maxrss_mb")},
                },
                indent=1,
            )
        )
    bad = (
        any(r.failures or r.ok != r.runs for r in out["rows"])
        or out["leftover"]
        or out["after"]["children"] > out["before"]["children"]
    )
    sys.exit(1 if bad else 0)
