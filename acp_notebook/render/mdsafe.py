"""Make the agent's Markdown safe to hand to a Markdown renderer as `text/markdown`.

Jupyter renders Markdown output with raw HTML enabled (and, for trusted output, runs its
scripts), so outside code the agent's `<` and `&` are escaped as entities (they still read as
`<` and `&`), and link targets with unsafe schemes (`javascript:`...) become `#`. Code spans and
fenced code are left alone: renderers show them literally. An unterminated fence is closed, so
what follows the answer is not swallowed into a code block.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .fences import chunks, code_spans, fence_spans
from .urls import safe_url

_LINK_DEST = re.compile(r"(\]\(\s*)(<[^>\n]*>|[^\s)]*)")
_REF_DEF = re.compile(r"^( {0,3}\[[^\]\n]+\]:[ \t]*)(<[^>\n]*>|\S+)", re.M)
_DOLLAR = re.compile(r"(?<!\\)\$")


def neutralize(md: str, *, dollars: bool = False) -> str:
    """`md` with raw HTML and unsafe links defused; `dollars` also escapes `$` (no math)."""
    md = md.replace("\x00", "")
    if len(md) < 2000:
        text, open_fence = _neutralize(md, dollars)
    else:
        # Chunk by chunk, memoised: a streaming answer only re-does its last chunk.
        done = [_neutralize(chunk, dollars) for chunk in chunks(md)]
        text, open_fence = "".join(t for t, _ in done), done[-1][1]
    if open_fence:
        text += ("" if text.endswith("\n") else "\n") + open_fence
    return text


@lru_cache(maxsize=4096)
def _neutralize(md: str, dollars: bool) -> tuple[str, str]:
    """The defused text, and the marker of a fence left open at its end ("" if none)."""
    out: list[str] = []
    pos = 0
    spans = fence_spans(md)
    for start, end, _ in spans:
        out.append(_prose_with_code(md[pos:start], dollars))
        out.append(md[start:end])
        pos = end
    out.append(_prose_with_code(md[pos:], dollars))
    open_fence = ""
    if spans and spans[-1][1] == len(md) and not _closes(md, spans[-1]):
        open_fence = spans[-1][2]
    return "".join(out), open_fence


def inline(text: str) -> str:
    """One line of the record (a title, a plan entry): defused, on one line, `$` escaped."""
    return _prose_with_code(" ".join(text.split()), True)


def _closes(md: str, span: tuple[int, int, str]) -> bool:
    """Whether the fenced block running to the end of `md` ends with its closing fence."""
    start, end, marker = span
    body = md[start:end].rstrip("\n")
    last = body.rsplit("\n", 1)[-1].strip()
    return "\n" in body and last.startswith(marker) and not last.strip(marker[0])


def _prose_with_code(s: str, dollars: bool) -> str:
    if ("<" not in s and "&" not in s and "](" not in s and "]:" not in s
            and (not dollars or "$" not in s)):
        return s
    if "`" not in s:
        return _prose(s, dollars)
    pieces = []
    pos = 0
    for start, end, _ in code_spans(s):
        if not _surely_code(s, start, end):
            continue  # left to _prose with the text around it: escaped, so safe either way
        pieces.append(_prose(s[pos:start], dollars))
        pieces.append(s[start:end])
        pos = end
    pieces.append(_prose(s[pos:], dollars))
    return "".join(pieces)


def _surely_code(s: str, start: int, end: int) -> bool:
    """Whether a Markdown renderer will surely read s[start:end] as a code span, whose content
    it shows verbatim. A span does not cross a blank line (a new paragraph), and a backtick after
    an odd number of backslashes opens nothing. In doubt it is prose, and gets escaped."""
    if _BLANK_LINE.search(s, start, end):
        return False
    slashes = 0
    while start - slashes > 0 and s[start - slashes - 1] == "\\":
        slashes += 1
    return slashes % 2 == 0


_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def _prose(s: str, dollars: bool) -> str:
    if "](" in s:
        s = _LINK_DEST.sub(_defuse_dest, s)
    if "]:" in s:
        s = _REF_DEF.sub(_defuse_dest, s)
    s = s.replace("&", "&amp;").replace("<", "&lt;")
    if dollars and "$" in s:
        s = _DOLLAR.sub(r"\\$", s)
    return s


def _defuse_dest(m: re.Match[str]) -> str:
    dest = m.group(2)
    url = dest[1:-1] if dest.startswith("<") and dest.endswith(">") else dest
    return m.group(1) + (dest if safe_url(url) is not None else "#")
