#!/usr/bin/env python3
"""Redraw benchmark: what one redraw of a live view costs while a long answer streams.

    .venv/bin/python bench/bench_redraw.py [--chunks 20000] [--size 200] [--every 500] [--keys 2]

One process, one `stream_agent.py` turn of N chunks of S bytes. Every E chunks a subscriber
redraws, as a view would between two of its pauses, and times it (CPU, `time.process_time`):

  headless   `LiveView._bundle()` (display/live.py: the turn's last parts, masked where they
             changed, clipped, rendered)
  widget     what `TurnView` does at a redraw (widgets/turn_view.py): `LiveTurn.transcript()`
             and `TurnDiff.update` on it with the new text and the parts changed (no widget: no
             kernel here)

Both views hear every mutation of the turn (`LiveTurn.take`, as the views' subscription does);
that cost is per chunk, not per redraw, and is reported apart ("per chunk"). "last quarter" is
the mean of the last quarter of the redraws: with the turn four times as long, it should not
grow (a redraw costs what changed since the last one, not the turn).

Each view runs in its own turn (each would mask texts the other has just masked otherwise).
`--keys K` puts K made-up keys in the environment under secret-looking names first, so the
masking has work to do, as in a kernel with API keys in its environment. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
AGENT = [sys.executable, str(HERE / "stream_agent.py")]
KEYS = ["ghp_Zq8xW2vN5rT7yU1iO3pL9kJ4hG6fD0sA", "sk-ant-api03-Qm4Rt8Wz2Xc6Vb1Nn5Kk9Jj3Hh7Gg0Ff"]


async def one_turn(args: argparse.Namespace, view: str) -> tuple[list[float], float, int, int]:
    import acp_notebook
    from acp_notebook.display.live import LiveView
    from acp_notebook.widgets.turn_diff import TurnDiff

    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(acp_notebook.connect(AGENT))
        session = await client.new_session()
        turn = await session.prompt(f"{args.chunks} {args.size}")
        live = LiveView(session, turn, show=False)
        diff = TurnDiff()

        def widget() -> None:
            drawn = live.live.transcript()
            changed = set(live.live.changed)
            live.live.changed.clear()
            diff.update(drawn, live.live.texts, changed)

        redraw: Callable[[], Any] = live._bundle if view == "headless" else widget
        seen, spent = 0, []

        def on_mutation(_mutation: object) -> None:
            nonlocal seen
            seen += 1
            if seen % args.every == 0:
                started = time.process_time()
                live._redrawing()  # as a view's redraw starts: listening again, if it stopped
                redraw()
                spent.append(time.process_time() - started)

        session.subscribe(on_mutation)
        live.start()
        result = await turn.finished
        live.finish(result, keep_record=False)
        await live.aclose()
        # What hearing every mutation costs the view (`LiveTurn.take`), per chunk.
        from acp_notebook.protocol.mutations import Delta

        delta = Delta(turn.id, "m-bench", "text", "x" * args.size)
        take, rounds = live.live.take, 20_000
        started = time.process_time()
        for _ in range(rounds):
            take(delta)
        per_chunk = (time.process_time() - started) / rounds
        return spent, per_chunk, seen, len(live.redactor.secrets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--every", type=int, default=500, help="chunks between two redraws")
    parser.add_argument("--keys", type=int, default=2, choices=range(len(KEYS) + 1))
    args = parser.parse_args()
    for i in range(args.keys):
        os.environ[f"BENCH_REDRAW_API_KEY_{i}"] = KEYS[i]
    mb = args.chunks * args.size / 1e6
    print(f"{args.chunks} chunks x {args.size} B ({mb:.1f} MB), a redraw every {args.every}:")
    for view in ("headless", "widget"):
        spent, per_chunk, seen, secrets = asyncio.run(one_turn(args, view))
        last = spent[-max(len(spent) // 4, 1) :]
        print(
            f"  {view:9s} {1000 * sum(spent) / max(len(spent), 1):6.2f} ms CPU per redraw "
            f"(mean of {len(spent)}), last quarter {1000 * sum(last) / max(len(last), 1):.2f} ms; "
            f"{1e6 * per_chunk:.2f} us per chunk heard; {seen} mutations, {secrets} secrets known"
        )


if __name__ == "__main__":
    main()
