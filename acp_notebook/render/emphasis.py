"""Emphasis (`*em*`, `**strong**`, `_em_`, `__strong__`) and `~~strikethrough~~` in one pass.

A simplified CommonMark delimiter-run algorithm: runs of `*`, `_` and `~` are found with one
regex, classed as able to open or close by their neighbours (so `snake_case_name` stays as it
is), and matched with a stack. Linear in the text: a regex with a lazy body would rescan the rest
of the paragraph for every opener that has no closer (`*a *a *a …`).

The input is already HTML-escaped text; only tags are added.
"""

from __future__ import annotations

import re
import unicodedata

_RUNS = re.compile(r"\*+|_+|~~+")
#: How far down the stack a closer looks for its opener.
_DEPTH = 64
_SPACE, _PUNCT, _WORD = 0, 1, 2
_ASCII = {chr(c): (_SPACE if chr(c).isspace() else _WORD if chr(c).isalnum() else _PUNCT)
          for c in range(128)}
_ASCII["\x00"] = _WORD  # a stashed token (code span, link) counts as a word


class _Run:
    """A delimiter run that can open or close: its unmatched length and the tags it gained."""

    __slots__ = ("can_close", "can_open", "char", "closes", "end", "length", "opens", "start")

    def __init__(self, char: str, start: int, end: int, can_open: bool, can_close: bool) -> None:
        self.char, self.start, self.end = char, start, end
        self.length = end - start
        self.can_open, self.can_close = can_open, can_close
        self.opens: list[str] = []  # tags after the run's unmatched rest
        self.closes: list[str] = []  # tags before it


def _kind(ch: str) -> int:
    k = _ASCII.get(ch)
    if k is not None:
        return k
    if ch.isspace():
        return _SPACE
    return _PUNCT if unicodedata.category(ch)[0] in "PS" else _WORD


def emphasis(s: str) -> str:
    """`s` (escaped text) with emphasis and strikethrough delimiters turned into tags."""
    if "*" not in s and "_" not in s and "~~" not in s:
        return s
    runs: list[_Run] = []
    stack: list[_Run] = []
    n = len(s)
    matched = False
    for m in _RUNS.finditer(s):
        start, end = m.span()
        before = _kind(s[start - 1]) if start else _SPACE
        after = _kind(s[end]) if end < n else _SPACE
        left = after != _SPACE and (after != _PUNCT or before != _WORD)
        right = before != _SPACE and (before != _PUNCT or after != _WORD)
        char = s[start]
        if char == "_":
            can_open = left and (not right or before == _PUNCT)
            can_close = right and (not left or after == _PUNCT)
        else:
            can_open, can_close = left, right
        if not (can_open or can_close):
            continue  # literal: nothing to do
        run = _Run(char, start, end, can_open, can_close)
        runs.append(run)
        if can_close and stack:
            matched = _close(run, stack) or matched
        if can_open and run.length:
            stack.append(run)
    if not matched:
        return s
    out: list[str] = []
    pos = 0
    for r in runs:
        if r.opens or r.closes:
            out.append(s[pos:r.start])
            out.extend(r.closes)
            out.append(r.char * r.length)
            out.extend(r.opens)
            pos = r.end
    out.append(s[pos:])
    return "".join(out)


def _close(closer: _Run, stack: list[_Run]) -> bool:
    """Match `closer` against openers on `stack`; whether any tag was placed."""
    char = closer.char
    placed = False
    while closer.length:
        found = -1
        for k in range(len(stack) - 1, max(-1, len(stack) - 1 - _DEPTH), -1):
            opener = stack[k]
            if opener.char == char and opener.length and (
                    char != "~" or opener.length == closer.length == 2):
                found = k
                break
        if found < 0:
            break
        opener = stack[found]
        del stack[found + 1:]  # delimiters between them can no longer match
        if char == "~":
            use, tag = 2, "del"
        else:
            use = 2 if opener.length >= 2 and closer.length >= 2 else 1
            tag = "strong" if use == 2 else "em"
        opener.length -= use
        closer.length -= use
        opener.opens.insert(0, f"<{tag}>")  # a later match encloses the earlier ones
        closer.closes.append(f"</{tag}>")
        placed = True
        if not opener.length:
            stack.pop()
    return placed
