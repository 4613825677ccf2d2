"""Where a long Markdown text splits into independent chunks, for speed only.

A long answer is cut into chunks that are parsed (and memoised) one by one, so a streaming
answer only re-parses its last chunk. Cuts are after a blank line, at the margin, outside what
looks like fenced code. A wrong guess here only changes how a chunk is laid out, never what is
safe: each chunk goes through the full parser and the escaping on its own.
"""

from __future__ import annotations

import re
from functools import lru_cache

_FENCE_RUN = re.compile(r"```+|~~~+")


def fence_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, marker) of each fenced block, markers included; an open one runs to the end.

    `end` is the offset just past the closing fence line (or len(text)); `marker` is the opening
    run of backticks or tildes.
    """
    if "```" not in text and "~~~" not in text:
        return []
    return _fence_spans(text)


@lru_cache(maxsize=8)
def _fence_spans(text: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    open_at = -1
    marker = ""
    for m in _FENCE_RUN.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if m.start() - line_start > 3 or text[line_start : m.start()].strip(" "):
            continue  # not at the start of a line
        line_end = text.find("\n", m.end())
        if line_end < 0:
            line_end = len(text)
        run, rest = m.group(0), text[m.end() : line_end]
        if open_at < 0:
            if run[0] == "`" and "`" in rest:
                continue  # not a fence: an info string may not hold a backtick
            open_at, marker = line_start, run
        elif run[0] == marker[0] and len(run) >= len(marker) and not rest.strip():
            spans.append((open_at, line_end, marker))
            open_at = -1
    if open_at >= 0:
        spans.append((open_at, len(text), marker))
    return spans


def chunks(text: str) -> list[str]:
    """`text` cut after blank lines (outside fenced code) followed by a line at the margin.

    The chunks concatenate back to `text`.
    """
    result: tuple[str, ...] | None = None
    for prev_text, prev in _recent:
        if prev_text == text:
            result = prev
            break
        if len(prev) > 1 and text.startswith(prev_text):
            # A streaming answer only grows: the chunks before the last one stay as they were
            # (each ends outside fenced code, so what follows cannot change them).
            start = len(prev_text) - len(prev[-1])
            result = prev[:-1] + _chunks(text[start:])
            break
    if result is None:
        result = _chunks(text)
    # Most recent first; a few texts grow side by side (the answer, the thoughts).
    _recent[:] = [(text, result), *(r for r in _recent if r[0] != text)][:_RECENT]
    return list(result)


_RECENT = 4
_recent: list[tuple[str, tuple[str, ...]]] = []


@lru_cache(maxsize=8)
def _chunks(text: str) -> tuple[str, ...]:
    spans = fence_spans(text)
    out: list[str] = []
    pos = 0
    k = 0
    find = text.find
    cut = find("\n\n")
    while cut >= 0:
        after = cut + 2
        while after < len(text) and text[after] == "\n":
            after += 1
        if after < len(text) and text[after] not in " \t":
            while k < len(spans) and spans[k][1] <= cut:
                k += 1
            if not (k < len(spans) and spans[k][0] <= cut):  # not inside a fenced block
                out.append(text[pos:after])
                pos = after
        cut = find("\n\n", after)
    out.append(text[pos:])
    return tuple(out)
