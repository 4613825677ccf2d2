"""Where fenced code blocks are in Markdown, and where the text splits into independent chunks.

Both Markdown paths use it to work on large pieces of text instead of line by line: fenced code
is left alone, and a long answer is cut into chunks that are converted (and memoised) one by one,
so a streaming answer only re-converts its last chunk.
"""

from __future__ import annotations

import re

_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$", re.M)
#: A blank line followed by a line that starts at the margin: a top-level block starts there.
_BOUNDARY = re.compile(r"\n[ \t]*\n(?=[^ \t\n])")


def fence_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, marker) of each fenced block, markers included; an open one runs to the end.

    `end` is the offset just past the closing fence line (or len(text)); `marker` is the opening
    run of backticks or tildes.
    """
    if "```" not in text and "~~~" not in text:
        return []
    spans: list[tuple[int, int, str]] = []
    open_at = -1
    marker = ""
    for m in _FENCE_LINE.finditer(text):
        run, rest = m.group(1), m.group(2)
        if open_at < 0:
            if run[0] == "`" and "`" in rest:
                continue  # not a fence: an info string may not hold a backtick
            open_at, marker = m.start(), run
        elif run[0] == marker[0] and len(run) >= len(marker) and not rest.strip():
            spans.append((open_at, m.end(), marker))
            open_at = -1
    if open_at >= 0:
        spans.append((open_at, len(text), marker))
    return spans


def chunks(text: str) -> list[str]:
    """`text` cut at blank lines outside fenced code where the next line is at the margin."""
    spans = fence_spans(text)
    out: list[str] = []
    pos = 0
    k = 0
    for m in _BOUNDARY.finditer(text):
        cut = m.start()
        while k < len(spans) and spans[k][1] <= cut:
            k += 1
        if k < len(spans) and spans[k][0] <= cut:
            continue  # inside a fenced block
        out.append(text[pos:cut])
        pos = m.end()
    out.append(text[pos:])
    return out
