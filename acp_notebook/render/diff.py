"""Unified diffs of a tool call's `diff` content (oldText → newText), computed with difflib.

Results are memoised: a live turn is re-rendered many times a second with the same texts.
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass
from functools import lru_cache

CONTEXT = 3
#: Above this many line pairs difflib may take long: fall back to "remove all, add all".
_MAX_WORK = 16_000_000
_HUNK = re.compile(r"@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


@dataclass(frozen=True, slots=True)
class Diff:
    lines: tuple[str, ...]  # unified diff lines, headers included, no line terminators
    added: int
    removed: int
    new_file: bool


def unified(path: str, old: str | None, new: str) -> Diff:
    """The unified diff of one file; `old` None (or missing) means a new file."""
    return _unified(path, old, new)


@lru_cache(maxsize=256)
def _unified(path: str, old: str | None, new: str) -> Diff:
    a = [] if old is None else old.splitlines()
    b = new.splitlines()
    # Strip the common head and tail (keeping context): typical edits touch a few lines of a
    # long file, and difflib's cost grows with what it is given.
    limit = min(len(a), len(b))
    same_head = 0
    while same_head < limit and a[same_head] == b[same_head]:
        same_head += 1
    same_tail = 0
    while same_tail < limit - same_head and a[-1 - same_tail] == b[-1 - same_tail]:
        same_tail += 1
    offset = max(0, same_head - CONTEXT)
    cut = max(0, same_tail - CONTEXT)
    a_mid, b_mid = a[offset : len(a) - cut], b[offset : len(b) - cut]

    # Agents send absolute paths: shown as they are (git's a/ b/ prefixes are for relative ones).
    name = path or "file"
    a_name, b_name = (name, name) if name.startswith("/") else (f"a/{name}", f"b/{name}")
    lines = ["--- /dev/null" if old is None else f"--- {a_name}", f"+++ {b_name}"]
    if a_mid == b_mid:
        return Diff((), 0, 0, old is None)
    if len(a_mid) * len(b_mid) > _MAX_WORK:
        lines.append(f"@@ -{_range(offset, len(a_mid))} +{_range(offset, len(b_mid))} @@")
        lines.extend("-" + line for line in a_mid)
        lines.extend("+" + line for line in b_mid)
    else:
        body = difflib.unified_diff(a_mid, b_mid, lineterm="", n=CONTEXT)
        for line in itertools.islice(body, 2, None):  # past difflib's own file headers
            if offset and line.startswith("@@"):
                line = _HUNK.sub(lambda m: _shift(m, offset), line, count=1)
            lines.append(line)
    added = sum(1 for line in lines[2:] if line.startswith("+"))
    removed = sum(1 for line in lines[2:] if line.startswith("-"))
    return Diff(tuple(lines), added, removed, old is None)


def _range(start: int, length: int) -> str:
    """A unified-diff range for `length` lines from 0-based `start` (as difflib formats it)."""
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _shift(m: re.Match[str], offset: int) -> str:
    return f"@@ -{int(m.group(1)) + offset}{m.group(2)} +{int(m.group(3)) + offset}{m.group(4)} @@"
