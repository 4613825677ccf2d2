#!/usr/bin/env python3
"""What drawing a streaming answer as Markdown costs a redraw of the widget view, by its length.

    .venv/bin/python bench/bench_markdown.py [--chars 400000] [--chunk 40] [--every 10]

A Markdown answer (paragraphs with emphasis and code, quotes, lists, tables, fenced Python) is
fed `--chunk` characters at a time to a `MaskedText` (as the live view's fold does); every
`--every` chunks the view's Markdown step runs, as at a redraw (`TurnDiff._markdown`: the
blocks that finished, the HTML of the growing end, what changed of it). Reported: CPU
milliseconds per redraw (median and 95th percentile) in each quarter of the answer (flat: a
redraw reads the text after the finished blocks, not the answer), the bytes of HTML sent against
the answer's, and that the page's HTML at the end is the record's (`to_html`). Nothing is
asserted (`tests/unit/test_md_stream.py` and `tests/unit/test_turn_diff.py` assert).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SECTION = """## Step {i}

Some **bold** words, some *emphasis*, `inline code` and a [link](https://example.com/{i}).
A second line of the same paragraph, long enough to wrap once or twice in a notebook cell.

> A quote the agent makes, {i},
> over two lines.

- first item with `code`
- second item
  - nested item

| name | value |
|------|-------|
| a{i} | {i} |

```python
def step_{i}(x: int) -> int:
    # a comment
    return x * {i} + len("text")
```

"""


def main() -> None:
    from acp_notebook.display.live_turn import MaskedText
    from acp_notebook.protocol.redact import Redactor
    from acp_notebook.render.agentmd import to_html
    from acp_notebook.widgets.turn_diff import TurnDiff

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=400_000)
    parser.add_argument("--chunk", type=int, default=40)
    parser.add_argument("--every", type=int, default=10, help="chunks between two redraws")
    args = parser.parse_args()
    text = ""
    i = 0
    while len(text) < args.chars:
        text += SECTION.format(i=i)
        i += 1
    masked = MaskedText(Redactor([]))
    diff = TurnDiff()
    page_frozen, page_held, sent = "", "", 0
    costs: list[tuple[int, float]] = []
    chunks = range(0, len(text), args.chunk)
    for n, start in enumerate(chunks):
        masked.feed(text[start : start + args.chunk])
        if n % args.every and start + args.chunk < len(text):
            continue
        began = time.process_time()
        ops = diff._markdown("m1", masked.since)
        costs.append((start, time.process_time() - began))
        for op in ops:
            now = page_held[: op["keep"]] + op["add"]
            page_frozen += now[: op["freeze"]]
            page_held = now[op["freeze"] :]
            sent += len(op["add"])
    final = to_html(text)
    print(
        f"{len(text):,} characters of Markdown, {args.chunk} a chunk, a redraw every {args.every}:"
    )
    for q in range(4):
        part = [c for at, c in costs if q * len(text) // 4 <= at < (q + 1) * len(text) // 4]
        part.sort()
        p95 = part[int(0.95 * (len(part) - 1))]
        print(
            f"  quarter {q + 1}: {1000 * statistics.median(part):.3f} ms median, "
            f"{1000 * p95:.3f} ms 95th percentile ({len(part)} redraws)"
        )
    print(
        f"  HTML sent {sent:,} B for a final HTML of {len(final):,} B ({sent / len(final):.2f}x); "
        f"the page's HTML at the end is the record's: {page_frozen + page_held == final}"
    )


if __name__ == "__main__":
    main()
