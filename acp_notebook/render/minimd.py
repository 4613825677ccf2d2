"""A small, safe Markdown → HTML converter for the agent's answer (no dependency).

Covers what agents write: paragraphs, ATX headings, bullet/numbered/task lists (nested),
block quotes, fenced code, GFM tables, rules, and inline code, emphasis, strikethrough, links.
Everything is HTML-escaped: raw HTML from the agent is shown as text, never passed through, and
only http(s), mailto and relative links become links. Anything it does not understand stays
readable as text. Results are memoised: a streaming turn re-renders the same text many times.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from html import escape

from . import fences
from .emphasis import emphasis
from .urls import safe_url

# A fence: the info string of a backtick fence may not hold a backtick.
_FENCE = re.compile(r" {0,3}(?:(`{3,})([^`]*)|(~{3,})(.*))$")
_LANG_UNSAFE = re.compile(r"[^A-Za-z0-9_+.#-]")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_RULE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r" {0,3}> ?(.*)$")
_ITEM = re.compile(r"([ \t]*)([-*+]|\d{1,9}[.)])([ \t]+|$)(.*)$")
_TABLE_SEP = re.compile(r" {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_TASK = re.compile(r"\[([ xX])\][ \t]+")

# Inline patterns begin with a literal where they can: the regex engine then skips ahead to it
# instead of trying every position (a large difference on a 100 KB answer).
_LINK = re.compile(r"\[([^\]\n]{0,500})\]\(\s*<?([^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*)>?"
                   r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^\s<>]+)>")
_BARE_URL = re.compile(r"https?://[^\s<>()\[\]`]*[^\s<>()\[\]`.,;:!?'\"*_~]")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_HARD_BREAK = re.compile(r"(?: {2,}|\\)\n")
_PLAIN = re.compile(r"[^`\\\[\]<>&*_~:\n\x00]*")
_TOKEN = re.compile(r"\x00(\d+)\x00")


def to_html(src: str) -> str:
    """The Markdown `src` as safe HTML."""
    return _to_html(src)


@lru_cache(maxsize=32)
def _to_html(src: str) -> str:
    if "\r" in src:
        src = src.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in src:
        src = src.replace("\x00", "")
    if len(src) < 2000:
        return _chunk_html(src)
    # Top-level chunks are independent: each is converted once, however often the answer is
    # re-rendered while it grows.
    return "".join(_chunk_html(chunk) for chunk in fences.chunks(src))


@lru_cache(maxsize=4096)
def _chunk_html(src: str) -> str:
    out: list[str] = []
    _blocks(src.split("\n"), out)
    return "".join(out)


def _indent(line: str) -> int:
    n = 0
    for ch in line:
        if ch == " ":
            n += 1
        elif ch == "\t":
            n += 4 - n % 4
        else:
            break
    return n


def _starts_block(line: str) -> bool:
    """Whether `line` begins a block that interrupts a paragraph."""
    first = line.lstrip(" ")[:1]
    if not first or first.isalpha():
        return False
    return bool(_FENCE.match(line) or _HEADING.match(line) or _RULE.match(line)
                or _QUOTE.match(line) or _ITEM.match(line))


def _blocks(lines: list[str], out: list[str]) -> None:
    para: list[str] = []
    i, n = 0, len(lines)

    def flush() -> None:
        if para:
            out.append(f"<p>{inline(chr(10).join(para).strip())}</p>\n")
            para.clear()

    while i < n:
        line = lines[i]
        first = line.lstrip(" ")[:1]
        if not first:
            flush()
            i += 1
            continue
        if first.isalpha() or first in "\"'(":  # the common case: prose
            if _is_table(lines, i):
                flush()
                i = _table(lines, i, out)
            else:
                para.append(line)
                i += 1
            continue
        if m := _FENCE.match(line):
            flush()
            i = _fence(lines, i, m, out)
        elif m := _HEADING.match(line):
            flush()
            level = len(m.group(1))
            title = line[m.end():].strip()
            closing = title.rstrip("#")  # an optional closing run of #s, after a space
            if not closing or closing[-1] in " \t":
                title = closing.strip()
            out.append(f"<h{level}>{inline(title)}</h{level}>\n")
            i += 1
        elif _RULE.match(line):
            flush()
            out.append("<hr>\n")
            i += 1
        elif _QUOTE.match(line):
            flush()
            quoted = []
            while i < n and (m := _QUOTE.match(lines[i])):
                quoted.append(m.group(1))
                i += 1
            out.append("<blockquote>\n")
            _blocks(quoted, out)
            out.append("</blockquote>\n")
        elif (m := _ITEM.match(line)) is not None and (not para or m.group(4)):
            flush()
            i = _list(lines, i, out)
        elif _is_table(lines, i):
            flush()
            i = _table(lines, i, out)
        else:
            para.append(line)
            i += 1
    flush()


def _fence(lines: list[str], i: int, m: re.Match[str], out: list[str]) -> int:
    marker = m.group(1) or m.group(3)
    info = (m.group(2) if m.group(1) else m.group(4)).split()
    lang = _LANG_UNSAFE.sub("", info[0])[:30] if info else ""
    indent = _indent(lines[i])
    body = []
    i += 1
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(marker) and stripped.strip(marker[0]) == "":
            i += 1
            break
        body.append(line[min(indent, _indent(line)):] if indent else line)
        i += 1
    cls = f' class="language-{escape(lang)}"' if lang else ""
    code = escape("\n".join(body), quote=False)
    out.append(f"<pre><code{cls}>{code}</code></pre>\n")
    return i


def _list(lines: list[str], i: int, out: list[str]) -> int:
    first = _ITEM.match(lines[i])
    assert first is not None
    base = _indent(first.group(1))
    ordered = first.group(2)[0].isdigit()
    items: list[list[str]] = []
    content_indent = 0
    loose = False
    n = len(lines)
    while i < n:
        line = lines[i]
        m = _ITEM.match(line)
        if m is not None and _indent(m.group(1)) <= base + 1:
            if m.group(2)[0].isdigit() != ordered:
                break
            width = _indent(m.group(1)) + len(m.group(2)) + max(1, min(len(m.group(3)), 4))
            items.append([m.group(4)])
            content_indent = width
            i += 1
            continue
        if not line.strip():
            # A blank line: the list goes on if an item or an indented line follows.
            j = i + 1
            while j < n and not lines[j].strip():
                j += 1
            if j < n and (_indent(lines[j]) > base or (
                    (mm := _ITEM.match(lines[j])) is not None
                    and mm.group(2)[0].isdigit() == ordered)):
                if j < n and _indent(lines[j]) <= base + 1:
                    loose = True
                items[-1].extend([""] * (j - i))
                i = j
                continue
            break
        ind = _indent(line)
        if ind > base:
            items[-1].append(line[content_indent:] if ind >= content_indent else line.lstrip())
            i += 1
            continue
        if items[-1][-1].strip() and not _starts_block(line):  # a lazy continuation line
            items[-1].append(line.lstrip())
            i += 1
            continue
        break

    start = ""
    if ordered:
        number = int(first.group(2)[:-1])
        start = f' start="{number}"' if number != 1 else ""
    tag = "ol" if ordered else "ul"
    out.append(f"<{tag}{start}>\n")
    for body in items:
        out.append("<li>")
        head = body[0]
        if (task := _TASK.match(head)) is not None:
            out.append("☑ " if task.group(1) in "xX" else "☐ ")
            body = [head[task.end():], *body[1:]]
        inner: list[str] = []
        _blocks(body, inner)
        html = "".join(inner)
        if not loose and html.startswith("<p>"):
            # A tight item: its first paragraph without <p>.
            end = html.find("</p>\n")
            html = html[3:end] + html[end + 5:]
        out.append(html.rstrip("\n"))
        out.append("</li>\n")
    out.append(f"</{tag}>\n")
    return i


def _is_table(lines: list[str], i: int) -> bool:
    """A GFM table: a row with pipes, then a delimiter row with as many cells."""
    if "|" not in lines[i] or i + 1 >= len(lines):
        return False
    sep = lines[i + 1]
    return ("|" in sep and _TABLE_SEP.match(sep) is not None
            and len(_cells(sep)) == len(_cells(lines[i])))


def _cells(row: str) -> list[str]:
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


def _table(lines: list[str], i: int, out: list[str]) -> int:
    header = _cells(lines[i])
    aligns = []
    for spec in _cells(lines[i + 1]):
        left, right = spec.startswith(":"), spec.endswith(":")
        aligns.append("center" if left and right else "right" if right else
                      "left" if left else "")
    i += 2
    out.append("<table>\n<thead><tr>")
    for k, cell in enumerate(header):
        out.append(f"<th{_align(aligns, k)}>{inline(cell)}</th>")
    out.append("</tr></thead>\n<tbody>\n")
    while i < len(lines) and lines[i].strip() and "|" in lines[i]:
        cells = _cells(lines[i])
        out.append("<tr>")
        for k in range(len(header)):
            cell = cells[k] if k < len(cells) else ""
            out.append(f"<td{_align(aligns, k)}>{inline(cell)}</td>")
        out.append("</tr>\n")
        i += 1
    out.append("</tbody>\n</table>\n")
    return i


def _align(aligns: list[str], k: int) -> str:
    a = aligns[k] if k < len(aligns) else ""
    return f' style="text-align:{a}"' if a else ""


# -- inline -------------------------------------------------------------------------------------


def inline(src: str) -> str:
    """One paragraph's inline Markdown as safe HTML."""
    tokens: list[str] = []

    def stash(html: str) -> str:
        tokens.append(html)
        return f"\x00{len(tokens) - 1}\x00"

    if _PLAIN.fullmatch(src):
        return src  # nothing to convert and nothing to escape: the common table cell, title
    s = src.replace("\x00", "")
    if "`" in s:
        s = _code_spans(s, stash)
    if "\\" in s:
        s = _ESCAPED.sub(lambda m: stash(escape(m.group(1))), s)
    if "](" in s:
        s = _links(s, stash)
    if "<" in s:
        s = _AUTOLINK.sub(lambda m: stash(_anchor(m.group(1), escape(m.group(1)))), s)
    if "://" in s:
        s = _BARE_URL.sub(lambda m: _bare_url(m, stash), s)
    s = emphasis(escape(s, quote=False))
    if "  \n" in s or "\\\n" in s:
        s = _HARD_BREAK.sub("<br>\n", s)
    if tokens:
        # Stashed pieces may hold stashes of their own (a link's text): resolve until none left.
        while "\x00" in s:
            s = _TOKEN.sub(lambda m: tokens[int(m.group(1))], s)
    return s


def _code_spans(s: str, stash: Callable[[str], str]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, ticks in fences.code_spans(s):
        out.append(s[pos:start])
        out.append(stash(f"<code>{_code(s[start + ticks:end - ticks])}</code>"))
        pos = end
    out.append(s[pos:])
    return "".join(out)


def _code(body: str) -> str:
    """A code span's text, escaped (CommonMark: newlines are spaces, one padding space goes)."""
    body = body.replace("\n", " ")
    if body.startswith(" ") and body.endswith(" ") and body.strip():
        body = body[1:-1]
    return escape(body, quote=False)


def _links(s: str, stash: Callable[[str], str]) -> str:
    """`[label](url)` and `![alt](url)` replaced by stashed anchors."""
    out: list[str] = []
    pos = 0
    for m in _LINK.finditer(s):
        start = m.start()
        image = start > 0 and s[start - 1] == "!"
        out.append(s[pos:start - 1] if image else s[pos:start])
        label, url = m.group(1), m.group(2)
        # The label may hold stashed code spans: they are resolved with the rest by `inline`.
        text = emphasis(escape(label, quote=False)) if label else escape(url, quote=False)
        if image:
            # Images are not loaded (a remote image could track the reader): they are linked.
            text = "🖼 " + (text or "image")
        out.append(stash(_anchor(url, text)))
        pos = m.end()
    out.append(s[pos:])
    return "".join(out)


def _bare_url(m: re.Match[str], stash: Callable[[str], str]) -> str:
    start = m.start()
    if start > 0 and (m.string[start - 1].isalnum() or m.string[start - 1] in "_/@\"'="):
        return m.group(0)  # part of a word or an attribute-like text: left as it is
    return stash(_anchor(m.group(0), escape(m.group(0))))


def _anchor(url: str, text_html: str) -> str:
    safe = safe_url(url)
    if safe is None or not safe:
        return text_html
    return (f'<a href="{escape(safe, quote=True)}" target="_blank" '
            f'rel="noopener noreferrer nofollow">{text_html}</a>')
