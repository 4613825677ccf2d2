#!/usr/bin/env python3
"""Kernel benchmark: the 20,000-chunk turn of bench_stream.py, run through `%%agent` in a kernel.

    .venv/bin/python bench/bench_kernel.py [--reps 5] [--chunks 20000] [--size 20] [--profile]

One kernel (this venv's `python3`, which loads acp_notebook through
.venv/etc/ipython/ipython_kernel_config.json) is started with nbclient; cells are executed one
by one in it. Both sides run in that kernel, on its event loop, each with its own
bench/stream_agent.py process started before any timing:

  a   the bare reader of bench_stream.py (asyncio subprocess, 256 KiB reads, split lines,
      json.loads, append the text), in a cell `await bare.turn(N, S)`.
  b   a `%%agent --agent "<python> bench/stream_agent.py" --out _bench_r` cell whose body is
      "N S": the live display is on (not --quiet), as a user would run it. nbclient has no
      widget front-end, so there are no Stop/permission widgets.

Each side is timed inside the kernel from the start to the end of its cell (IPython's
pre_run_cell / post_run_cell events, time.perf_counter); the bare cell's own turn time is kept
too. One warm-up turn each (the %%agent warm-up starts the agent and the session, which later
cells reuse), then --reps rounds of a and b, in alternating order. Text is checked against the
expected text after each timed cell, in an untimed cell.

Display messages: every iopub message of the %%agent cell passes through nbclient's
`process_message` (nbclient 0.11 has no per-output hook; this subclass overrides it), which
counts `display_data` and `update_display_data` and their payload sizes, and keeps when the
kernel sent each (its header's date) and to which view (its display id). The rate limit is per
view: the most messages to one view inside any 1 s window, and the shortest gap between two of
its redraws (the throttle). A count divided by a turn of 100 ms would read 40 a second for 4
messages. Bytes: every iopub message of the cell as sent (header, parent header, metadata,
content; no signature), against the turn's transcript (`TurnResult.to_json()` as JSON).

Each cell's CPU time in the kernel process (time.process_time, same events) is reported too:
on a shared machine it moves less with the load than wall time. Payload bytes count every
display_data, update_display_data and execute_result of the cell.

Targets (issue 12): b/a <= 1.3 (median of per-round ratios), at most 25 display messages to
one view in any second and at most 2x the transcript's bytes sent per turn (every turn).
Nothing is asserted. --profile runs one more %%agent turn under cProfile in the kernel and
prints the top functions.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shlex
import statistics
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MARK = "BENCH-JSON "
DISPLAY_TYPES = ("display_data", "update_display_data")
TARGET = 1.3  # b/a, issue 12
RATE_TARGET = 25.0  # display messages to one view in any second (issue 12)
BYTES_TARGET = 2.0  # bytes sent per turn / the transcript's (issue 12)


def most_in_a_second(sent: list[tuple[float, str]]) -> int:
    """The most messages of `sent` (kernel times) inside any window of 1 s."""
    times = sorted(t for t, _ in sent)
    most, first = 0, 0
    for last, t in enumerate(times):
        while t - times[first] >= 1.0:
            first += 1
        most = max(most, last - first + 1)
    return most


def shortest_redraw_gap(sent: list[tuple[float, str]]) -> float:
    """The shortest time between two consecutive redraws of one view: its updates less the
    last, which `finish` sends as the turn ends, whenever that is (inf with fewer than two).
    The first display, `start`'s, is not a redraw either: the first redraw follows the first
    chunk at once."""
    redraws = sorted(t for t, kind in sent if kind == "update_display_data")[:-1]
    return min((b - a for a, b in itertools.pairwise(redraws)), default=math.inf)


def longest_redraw_gap(sent: list[tuple[float, str]]) -> float:
    """The longest time a view went without a message while its turn streamed: from its first
    display to the record (the last), 0 with fewer than two messages."""
    times = sorted(t for t, _ in sent)
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def _kernel_time(header: dict[str, Any]) -> float:
    """When the kernel built a message (its header's date), in seconds: the kernel's clock, so
    the gaps between messages are the kernel's, not those of their arrival here."""
    date = header.get("date")
    if isinstance(date, str):
        date = datetime.fromisoformat(date.replace("Z", "+00:00"))
    return date.timestamp() if isinstance(date, datetime) else float("nan")


class CountingClient(NotebookClient):
    """NotebookClient that tallies the iopub messages of each cell (type, count, bytes), and
    when each display message of each view (display id) was sent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.counts: dict[int, Counter[str]] = defaultdict(Counter)
        self.sizes: dict[int, Counter[str]] = defaultdict(Counter)
        self.mimes: dict[int, Counter[str]] = defaultdict(Counter)  # display payload by MIME type
        self.wire: Counter[int] = Counter()  # bytes of every iopub message of the cell
        # cell -> display id -> (kernel time, msg_type) of each display message, in order
        self.views: dict[int, dict[str, list[tuple[float, str]]]] = defaultdict(
            lambda: defaultdict(list)
        )

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        msg_type = msg["msg_type"]
        self.counts[cell_index][msg_type] += 1
        # The message as it goes to a front-end, less its signature and routing frames.
        frames = [msg["header"], msg["parent_header"], msg["metadata"], msg["content"]]
        self.wire[cell_index] += len(json.dumps(frames, default=str).encode())
        if msg_type in DISPLAY_TYPES:
            view = (msg["content"].get("transient") or {}).get("display_id") or "(no id)"
            self.views[cell_index][view].append((_kernel_time(msg["header"]), msg_type))
        if msg_type in DISPLAY_TYPES or msg_type == "execute_result":
            data = msg["content"].get("data") or {}
            for mime, value in data.items():
                size = len(value) if isinstance(value, str) else len(json.dumps(value))
                self.sizes[cell_index][msg_type] += size
                if msg_type in DISPLAY_TYPES:
                    self.mimes[cell_index][mime] += size
        return super().process_message(msg, cell, cell_index)


class Kernel:
    """Runs cells one at a time in one kernel and reads back what they print after MARK."""

    def __init__(self, client: CountingClient) -> None:
        self.client = client
        self.nb = client.nb

    def run(self, source: str) -> int:
        cell = nbformat.v4.new_code_cell(source)  # type: ignore[no-untyped-call]
        self.nb.cells.append(cell)
        index = len(self.nb.cells) - 1
        self.client.execute_cell(cell, index)
        return index

    def ask(self, source: str) -> Any:
        """Run a cell that prints MARK + json; return the decoded value."""
        index = self.run(source)
        for out in self.nb.cells[index].outputs:
            if out.get("output_type") == "stream":
                for line in out.get("text", "").splitlines():
                    if line.startswith(MARK):
                        return json.loads(line[len(MARK) :])
        outputs = self.nb.cells[index].outputs
        raise RuntimeError(f"no result from cell:\n{source}\noutputs: {outputs}")


SETUP = """\
import asyncio, contextlib, gc, json, sys, time
sys.path.insert(0, {bench!r})
import bench_stream
from stream_agent import expected_text

_bench = {{"expected": expected_text({n}, {size}), "cells": [], "cpus": [], "t0": 0.0, "c0": 0.0}}

def _bench_pre(info=None):
    _bench["t0"] = time.perf_counter()
    _bench["c0"] = time.process_time()

def _bench_post(result=None):
    _bench["cells"].append(time.perf_counter() - _bench["t0"])
    _bench["cpus"].append(time.process_time() - _bench["c0"])

get_ipython().events.register("pre_run_cell", _bench_pre)
get_ipython().events.register("post_run_cell", _bench_post)
_bench_stack = contextlib.AsyncExitStack()
_bench_bare = bench_stream.BareReader()
_t = time.perf_counter()
await _bench_bare.start(_bench_stack)
print({mark!r} + json.dumps({{
    "startup_ms": 1000 * (time.perf_counter() - _t),
    "agent_magic": "agent" in get_ipython().magics_manager.magics["cell"],
    "python": sys.version.split()[0], "executable": sys.executable}}))
"""

BARE = """\
_t = time.perf_counter()
_bench_text = await _bench_bare.turn({n}, {size})
_bench["inner"] = time.perf_counter() - _t
"""

BARE_CHECK = """\
print({mark!r} + json.dumps({{"cell": _bench["cells"][-1], "inner": _bench["inner"],
                              "cpu": _bench["cpus"][-1],
                              "ok": _bench_text == _bench["expected"]}}))
del _bench_text
gc.collect()
"""

AGENT = """\
%%agent --agent {agent} --out _bench_r
{body}
"""

AGENT_QUIET = """\
%%agent --agent {agent} --quiet --out _bench_r
{body}
"""

AGENT_CHECK = """\
print({mark!r} + json.dumps({{"cell": _bench["cells"][-1], "duration": _bench_r.duration,
                              "cpu": _bench["cpus"][-1],
                              "success": _bench_r.success,
                              "transcript": len(json.dumps(_bench_r.to_json())),
                              "ok": _bench_r.text == _bench["expected"]}}))
del _bench_r
gc.collect()
"""

PROFILE_START = """\
import cProfile, pstats, io
gc.collect()
_bench_prof = cProfile.Profile()
_bench_prof.enable()
"""

PROFILE_REPORT = """\
_bench_prof.disable()
_s = io.StringIO()
_st = pstats.Stats(_bench_prof, stream=_s).sort_stats({sort!r})
_st.print_stats({top})
print(_s.getvalue())
"""

TEARDOWN = """\
await _bench_stack.aclose()
print({mark!r} + json.dumps({{"closed": True}}))
"""


def run(args: argparse.Namespace) -> None:
    n, size = args.chunks, args.size
    agent_cmd = shlex.join([sys.executable, str(HERE / "stream_agent.py")])
    fmt = {
        "n": n,
        "size": size,
        "mark": MARK,
        "bench": str(HERE),
        "agent": shlex.quote(agent_cmd),
        "body": f"{n} {size}" + (f" {args.pace}" if args.pace else ""),
    }
    unpaced = {**fmt, "body": f"{n} {size}"}  # the warm-ups: they only start things
    nb = nbformat.v4.new_notebook()  # type: ignore[no-untyped-call]
    client = CountingClient(
        nb, kernel_name="python3", timeout=args.timeout, resources={"metadata": {"path": str(REPO)}}
    )
    kernel = Kernel(client)
    bare_cell: list[float] = []
    bare_inner: list[float] = []
    agent_cell: list[float] = []
    agent_dur: list[float] = []
    bare_cpu: list[float] = []
    agent_cpu: list[float] = []
    quiet_cpu: list[float] = []
    all_bytes: list[int] = []
    quiet_cell: list[float] = []
    quiet_dur: list[float] = []
    displays: list[int] = []
    disp_bytes: list[int] = []
    wire_bytes: list[int] = []  # every iopub message of the cell, as sent
    transcripts: list[int] = []  # the turn's TurnResult.to_json(), as JSON
    per_window: list[int] = []  # the most display messages to one view in any 1 s
    redraw_gaps: list[float] = []  # the shortest gap between two redraws of one view
    longest_gaps: list[float] = []  # the longest, from the first display to the record
    t_start = time.perf_counter()
    with client.setup_kernel():
        info = kernel.ask(SETUP.format(**fmt))
        if not info["agent_magic"]:
            raise SystemExit("the kernel has no %%agent magic: is the extension configured?")
        print(
            f"kernel: Python {info['python']} ({info['executable']}); agent: {agent_cmd}; "
            f"{n} chunks x {size} B = {n * size} B per turn; {args.reps} rounds after 1 warm-up"
        )
        print(
            f"bare reader startup (spawn + initialize + session/new): "
            f"{info['startup_ms']:.1f} ms, untimed"
        )

        def bare() -> None:
            kernel.run(BARE.format(**fmt))
            r = kernel.ask(BARE_CHECK.format(**fmt))
            if not r["ok"]:
                raise RuntimeError("bare reader: wrong text")
            bare_cell.append(r["cell"])
            bare_inner.append(r["inner"])
            bare_cpu.append(r["cpu"])

        def agent(quiet: bool = False, warm: bool = False) -> tuple[float, float, int, int]:
            index = kernel.run(
                (AGENT_QUIET if quiet else AGENT).format(**(unpaced if warm else fmt))
            )
            r = kernel.ask(AGENT_CHECK.format(**fmt))
            if not (r["ok"] and r["success"]):
                raise RuntimeError(
                    f"%%agent turn: wrong text or failed: {r}; "
                    f"outputs: {str(nb.cells[index].outputs)[:2000]}"
                )
            (quiet_cpu if quiet else agent_cpu).append(r["cpu"])
            return r["cell"], r["duration"], index, r["transcript"]

        t0 = time.perf_counter()
        cell, dur, _, _ = agent(warm=True)  # warm-up: starts the agent process and the session
        print(
            f"%%agent warm-up turn (agent start + session/new + turn): cell {1000 * cell:.1f} ms "
            f"(seen from here {1000 * (time.perf_counter() - t0):.1f} ms), untimed"
        )
        if not args.pace:  # a paced turn is a slow one: its bytes and liveness, no ratio
            bare()  # warm-up
        bare_cell.clear()
        bare_inner.clear()
        bare_cpu.clear()
        agent_cpu.clear()
        counts_seen: Counter[str] = Counter()
        mimes_seen: Counter[str] = Counter()
        if args.with_quiet:
            agent(quiet=True, warm=True)  # warm-up of the --quiet variant
            quiet_cpu.clear()
        sides = (["b"] if args.pace else ["a", "b"]) + (["q"] if args.with_quiet else [])
        for rep in range(args.reps):
            k = rep % len(sides)
            for side in sides[k:] + sides[:k]:
                if side == "a":
                    bare()
                    continue
                if side == "q":
                    cell, dur, _, _ = agent(quiet=True)
                    quiet_cell.append(cell)
                    quiet_dur.append(dur)
                    continue
                cell, dur, index, transcript = agent()
                agent_cell.append(cell)
                agent_dur.append(dur)
                counts, sizes = client.counts[index], client.sizes[index]
                displays.append(sum(counts[t] for t in DISPLAY_TYPES))
                disp_bytes.append(sum(sizes[t] for t in DISPLAY_TYPES))
                all_bytes.append(sum(sizes.values()))
                wire_bytes.append(client.wire[index])
                transcripts.append(transcript)
                views = client.views[index].values()
                per_window.append(max((most_in_a_second(v) for v in views), default=0))
                redraw_gaps.append(min((shortest_redraw_gap(v) for v in views), default=math.inf))
                longest_gaps.append(max((longest_redraw_gap(v) for v in views), default=0.0))
                counts_seen.update(counts)
                mimes_seen.update(client.mimes[index])
            if args.verbose and args.pace:
                print(
                    f"  round {rep + 1}: b {agent_cell[-1]:.1f} s, {displays[-1]} display msgs, "
                    f"{wire_bytes[-1] / transcripts[-1]:.2f}x the transcript's bytes"
                )
            elif args.verbose:
                print(
                    f"  round {rep + 1}: a {1000 * bare_cell[-1]:.1f} ms, "
                    f"b {1000 * agent_cell[-1]:.1f} ms (turn {1000 * agent_dur[-1]:.1f} ms, "
                    f"{displays[-1]} display msgs)"
                    + (f", b --quiet {1000 * quiet_cell[-1]:.1f} ms" if quiet_cell else "")
                )
        if args.profile:
            kernel.run(PROFILE_START)
            kernel.run(AGENT.format(**fmt))
            index = kernel.run(PROFILE_REPORT.format(sort=args.profile_sort, top=args.profile_top))
            text = "".join(
                o.get("text", "")
                for o in nb.cells[index].outputs
                if o.get("output_type") == "stream"
            )
            print(
                f"cProfile of one more %%agent turn (kernel main thread, sorted by "
                f"{args.profile_sort}):"
            )
            print(text)
        kernel.ask(TEARDOWN.format(**fmt))
    wall = time.perf_counter() - t_start

    def line(label: str, ts: list[float], note: str = "") -> None:
        med = statistics.median(ts)
        print(
            f"  {label:44s} {1000 * med:8.1f}   ({1000 * min(ts):.1f}..{1000 * max(ts):.1f})"
            f"   {1e6 * med / n:6.2f} us/chunk{note}"
        )

    if not args.pace:  # no bare side: nothing to compare with
        print(f"time in the kernel, ms (median of {args.reps}; min..max):")
        line("a  bare reader, cell", bare_cell)
        line("   bare reader, turn alone", bare_inner)
        line("b  %%agent cell (live display)", agent_cell)
        line("   %%agent turn (TurnResult.duration)", agent_dur)
        if quiet_cell:
            line("b' %%agent --quiet cell (no live display)", quiet_cell)
            line("   %%agent --quiet turn (TurnResult.duration)", quiet_dur)
        per_round = statistics.median(b / a for a, b in zip(bare_cell, agent_cell, strict=True))
        of_medians = statistics.median(agent_cell) / statistics.median(bare_cell)
        per_round_turn = statistics.median(
            b / a for a, b in zip(bare_inner, agent_dur, strict=True)
        )
        cpu_round = statistics.median(b / a for a, b in zip(bare_cpu, agent_cpu, strict=True))
        cpu_medians = statistics.median(agent_cpu) / statistics.median(bare_cpu)
        print(
            f"CPU time of the kernel process per cell (time.process_time), ms: a "
            f"{1000 * statistics.median(bare_cpu):.1f}, b {1000 * statistics.median(agent_cpu):.1f}"
            + (f", b' --quiet {1000 * statistics.median(quiet_cpu):.1f}" if quiet_cpu else "")
        )
        print("ratio b/a (of medians | median of per-round ratios):")
        print(
            f"  cells           {of_medians:5.2f} | {per_round:5.2f}   target <= {TARGET}    "
            f"{'PASS' if per_round <= TARGET else 'FAIL'}"
        )
        print(
            f"  CPU of cells    {cpu_medians:5.2f} | {cpu_round:5.2f}   target <= {TARGET}    "
            f"{'PASS' if cpu_round <= TARGET else 'FAIL'}   (steadier on a shared machine)"
        )
        if quiet_cell:
            q_round = statistics.median(q / a for a, q in zip(bare_cell, quiet_cell, strict=True))
            q_medians = statistics.median(quiet_cell) / statistics.median(bare_cell)
            print(
                f"  --quiet cells   {q_medians:5.2f}"
                f" | {q_round:5.2f}   (b' / a, no live display; for information)"
            )
        print(
            f"  turns alone     {statistics.median(agent_dur) / statistics.median(bare_inner):5.2f}"
            f" | {per_round_turn:5.2f}   (TurnResult.duration / bare turn; for information)"
        )
    print(
        f"display messages per %%agent turn (display_data + update_display_data): "
        f"{displays}, median {statistics.median(displays):g}, "
        f"median {statistics.median(disp_bytes) / 1e6:.2f} MB of payload per turn; "
        f"with the cell's execute_result {statistics.median(all_bytes) / 1e6:.2f} MB"
    )
    worst, gap = max(per_window), min(redraw_gaps)
    if args.pace:
        print(
            f"  longest time without a redraw while the turn streamed (liveness): "
            f"{', '.join(f'{g:.1f}' for g in longest_gaps)} s"
        )
    print(
        f"  to one view in any 1 s (kernel's send times): max {worst}   "
        f"target <= {RATE_TARGET:g}   {'PASS' if worst <= RATE_TARGET else 'FAIL'}; "
        f"shortest gap between two redraws "
        + (f"{1000 * gap:.1f} ms" if math.isfinite(gap) else "(fewer than 2 redraws)")
        + f" (the view's throttle: {1000 / RATE_TARGET:g} ms)"
    )
    byte_ratios = [w / t for w, t in zip(wire_bytes, transcripts, strict=True)]
    ratio = statistics.median(byte_ratios)
    print(
        f"bytes sent per %%agent turn (every iopub message of the cell, less signatures): "
        f"median {statistics.median(wire_bytes) / 1e6:.2f} MB, for a transcript "
        f"(TurnResult.to_json()) of {statistics.median(transcripts) / 1e6:.2f} MB: "
        f"{ratio:.2f}x   target <= {BYTES_TARGET:g}x   "
        f"{'PASS' if max(byte_ratios) <= BYTES_TARGET else 'FAIL'} (every turn)"
    )
    if args.verbose:
        print(f"  all iopub messages of the timed %%agent cells, by type: {dict(counts_seen)}")
        print(
            "  display payload per turn by MIME type, MB (mean): "
            + ", ".join(f"{m} {v / args.reps / 1e6:.2f}" for m, v in mimes_seen.most_common())
        )
    print(f"(whole run {wall:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--size", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=600, help="per cell, seconds")
    parser.add_argument(
        "--pace",
        type=int,
        default=0,
        help="characters a second the agent streams (a slow turn: its bytes and redraws only, "
        "no bare side to compare with); 0: as fast as it can",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="per-round figures, iopub message types, payload by MIME type",
    )
    parser.add_argument(
        "--with-quiet",
        action="store_true",
        help="also time a `%%%%agent --quiet` cell each round (no live display)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile one more %%agent turn inside the kernel"
    )
    parser.add_argument(
        "--profile-sort", default="cumulative", help="pstats sort key (cumulative, tottime, ...)"
    )
    parser.add_argument("--profile-top", type=int, default=40)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
