#!/usr/bin/env python3
"""The first cell's wait: time to its first text, with and without `c.AcpNotebook.prestart`.

    .venv/bin/python bench/bench_prestart.py [--reps 5] [--think 3] [--agent demo|fast-agent]

Each round starts a fresh kernel (this venv's `python3`, which loads acp_notebook through its
ipython_kernel_config.json), waits until it answers (`wait_for_ready`), then `--think` seconds
(the person opening the notebook and typing), then runs the first cell, `%%agent` with a prompt
holding a marker. The time measured is from sending that cell's execute request to the first
iopub message of the cell whose content holds the marker (the answer's first text in the live
view; both agents quote the prompt: the demo agent as its first line, fast-agent's
`passthrough` model as its whole answer). Baseline: prestart off (the cell starts the agent and
its session); against it: `--AcpNotebook.prestart=True` (they started as the kernel loaded).
Rounds alternate the two; the ratio is of the medians. Nothing is asserted.

`--agent demo` runs the embedded demo agent without its pauses (ACP_NOTEBOOK_DEMO_SPEED=0, so
what is timed is the start, not its script); `--agent fast-agent` runs `.agents/fast-agent`
(tests/setup.sh) with `--model passthrough`, a real agent's start (Python, its MCP and model
set-up) without a model or network.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

REPO = Path(__file__).resolve().parent.parent
MARKER = "prestart-bench-marker"


def agent_env(agent: str, home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ACP_NOTEBOOK_AGENTS_FILE", None)
    env["XDG_CONFIG_HOME"] = str(home / "xdg")
    if agent == "demo":
        env.pop("ACP_NOTEBOOK_AGENT", None)
        env["ACP_NOTEBOOK_DEMO_SPEED"] = "0"
    else:
        fast = REPO / ".agents" / "fast-agent" / "bin" / "fast-agent"
        if not fast.exists():
            sys.exit(f"no {fast}: run `bash tests/setup.sh`")
        argv = [str(fast), "--no-update-check", "acp", "--model", "passthrough"]
        env["ACP_NOTEBOOK_AGENT"] = shlex.join([*argv, "--home", str(home / "fa-home")])
    return env


def first_text(km: KernelManager, think: float, timeout: float = 120) -> float:
    """Seconds from the first cell's request to its first text (after `think` seconds)."""
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        time.sleep(think)  # the person reading and typing: the start in the background runs
        start = time.perf_counter()
        msg_id = kc.execute(f"%%agent\n{MARKER}")
        seen: float | None = None
        deadline = start + timeout
        while time.perf_counter() < deadline:
            msg: dict[str, Any] = kc.get_iopub_msg(timeout=deadline - time.perf_counter())
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if (
                seen is None
                and MARKER in str(msg["content"])
                and msg["msg_type"] != "execute_input"
            ):
                seen = time.perf_counter() - start
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        reply = kc.get_shell_msg(timeout=30)
        if reply["content"]["status"] != "ok" or seen is None:
            sys.exit(f"the cell failed or showed no text: {reply['content']}")
        return seen
    finally:
        kc.stop_channels()


def one_round(agent: str, prestart: bool, think: float) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-prestart-") as tmp:
        home = Path(tmp)
        km = KernelManager(kernel_name="python3")
        args = ["--AcpNotebook.prestart=True"] if prestart else []
        km.start_kernel(extra_arguments=args, env=agent_env(agent, home), cwd=tmp)
        try:
            return first_text(km, think)
        finally:
            km.shutdown_kernel(now=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--think", type=float, default=3.0, help="seconds before the first cell")
    parser.add_argument("--agent", choices=["demo", "fast-agent"], default="demo")
    args = parser.parse_args()
    times: dict[bool, list[float]] = {False: [], True: []}
    for rep in range(args.reps):
        for prestart in (False, True) if rep % 2 == 0 else (True, False):
            times[prestart].append(one_round(args.agent, prestart, args.think))
    base, pre = statistics.median(times[False]), statistics.median(times[True])
    for prestart, label in ((False, "baseline (prestart off)"), (True, "prestart on")):
        each = " ".join(f"{t * 1000:.0f}" for t in times[prestart])
        print(
            f"{args.agent}: {label}: median {statistics.median(times[prestart]) * 1000:.0f} ms "
            f"to first text (each: {each})"
        )
    print(
        f"{args.agent}: prestart/baseline = {pre / base:.2f} (saved {(base - pre) * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()
