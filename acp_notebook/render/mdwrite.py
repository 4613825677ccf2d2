"""The agent's Markdown written back as Markdown that is safe by construction.

The text is parsed (`agentmd`: the same parser as the HTML view) and the Markdown is written
from the syntax tree: the structure (headings, lists, quotes, tables, emphasis, links) by our
code, every piece of text through `mdsafe`, which leaves nothing a renderer could read as
markup. Code goes out as `<code>`/`<pre>` around character references, links only to
checked destinations, and anything unknown as escaped text. So whatever the agent wrote, the
result holds no tag, attribute, entity, link or math of the agent's making, under any
CommonMark or GFM renderer, with raw HTML on or off.
"""

from __future__ import annotations

from functools import lru_cache

from markdown_it.tree import SyntaxTreeNode

from ..protocol import weburl
from . import agentmd, mdsafe

_ALIGN = {"text-align:left": ":--", "text-align:right": "--:", "text-align:center": ":-:"}


def to_markdown(src: str) -> str:
    """The agent's Markdown `src`, rewritten safe; blocks end with no trailing newline."""
    out = [_piece(p) if ok else plain(p) for p, ok in agentmd.pieces(src)]
    return "\n\n".join(o for o in out if o)


@lru_cache(maxsize=512)
def _piece(src: str) -> str:
    tokens = agentmd.parse(src)
    if tokens is None:
        return plain(src)
    return "\n".join(_blocks(SyntaxTreeNode(tokens).children, tight=False))


def plain(src: str) -> str:
    """Text shown as text: each line escaped, blank lines kept as paragraph breaks."""
    return "\n".join(line.strip() for line in mdsafe.text(src.strip("\n")).split("\n"))


def _blocks(nodes: list[SyntaxTreeNode], *, tight: bool) -> list[str]:
    lines: list[str] = []
    for k, node in enumerate(nodes):
        if k and not tight:
            lines.append("")
        lines.extend(_block(node))
    return lines


def _block(node: SyntaxTreeNode) -> list[str]:
    kind = node.type
    if kind == "paragraph":
        return _inline_of(node).split("\n")
    if kind == "heading":
        level = int(node.tag[1:]) if node.tag[1:].isdigit() else 1
        return ["#" * level + " " + _one_line(_inline_of(node))]
    if kind == "blockquote":
        return [f"> {line}" if line else ">" for line in _blocks(node.children, tight=False)]
    if kind in ("bullet_list", "ordered_list"):
        return _list(node)
    if kind in ("fence", "code_block"):
        return mdsafe.pre(node.content.removesuffix("\n"), node.info)  # info: see agentmd
    if kind == "hr":
        return ["***"]
    if kind == "table":
        return _table(node)
    return plain(node.content).split("\n")  # html_block or anything new: as text


def _list(node: SyntaxTreeNode) -> list[str]:
    items = node.children
    tight = any(c.type == "paragraph" and c.hidden for item in items for c in item.children)
    ordered = node.type == "ordered_list"
    start = int(str(node.attrGet("start") or 1)) if ordered else 0
    delim = ")" if node.markup == ")" else "."
    bullet = node.markup if node.markup in ("-", "*", "+") else "-"
    lines: list[str] = []
    for k, item in enumerate(items):
        if k and not tight:
            lines.append("")
        marker = f"{start + k}{delim}" if ordered else bullet
        body = _blocks(item.children, tight=tight) or [""]
        pad = " " * (len(marker) + 1)
        lines.append(f"{marker} {body[0]}".rstrip())
        lines.extend(pad + line if line else "" for line in body[1:])
    return lines


def _table(node: SyntaxTreeNode) -> list[str]:
    rows: list[list[str]] = []
    aligns: list[str] = []
    for section in node.children:
        for tr in section.children:
            cells = [_one_line(_inline_of(cell)) for cell in tr.children]
            if not aligns:
                aligns = [_ALIGN.get(str(c.attrGet("style") or ""), "---") for c in tr.children]
            rows.append(cells)
    if not rows:
        return []
    lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join(aligns) + " |"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows[1:])
    return lines


def _one_line(md: str) -> str:
    """Inline Markdown with its line breaks (soft, and hard: a backslash at the end of a line;
    the agent's own backslashes are references) made spaces."""
    return md.replace("\\\n", " ").replace("\n", " ")


def _inline_of(node: SyntaxTreeNode) -> str:
    """The inline content of a paragraph, heading or table cell."""
    return "".join(_inline(child) for inline in node.children for child in inline.children)


def _inline(node: SyntaxTreeNode, *, in_link: bool = False) -> str:
    kind = node.type
    if kind == "text":
        return mdsafe.text(node.content.replace("\n", " "))
    if kind == "softbreak":
        return "\n"
    if kind == "hardbreak":
        return "\\\n"
    if kind == "code_inline":
        return mdsafe.code(node.content)
    if kind in ("em", "strong", "s"):
        mark = {"em": "*", "strong": "**", "s": "~~"}[kind]
        return mark + _children(node, in_link) + mark
    if kind == "link":
        label = _children(node, True)
        href = str(node.attrGet("href") or "")
        dest = mdsafe.destination(href)
        if dest is None or in_link:
            return label
        return f"[{label}]({dest})" + _host_note(
            href, "".join(_plain_text(c) for c in node.children)
        )
    if kind == "image":
        alt = "".join(_plain_text(c) for c in node.children)
        label = "🖼 " + mdsafe.text(" ".join(alt.split()) or "image")
        src = str(node.attrGet("src") or "")
        dest = mdsafe.destination(src)
        return label if dest is None or in_link else f"[{label}]({dest})" + _host_note(src, alt)
    return mdsafe.text(node.content.replace("\n", " "))  # html_inline or anything new


def _host_note(href: str, label: str) -> str:
    """The host the link opens, after it, when its label does not say it (`weburl.beside`)."""
    host = weburl.beside(href, label)
    return f" ({mdsafe.text(host)})" if host else ""


def _children(node: SyntaxTreeNode, in_link: bool) -> str:
    return "".join(_inline(c, in_link=in_link) for c in node.children)


def _plain_text(node: SyntaxTreeNode) -> str:
    if node.children:
        return "".join(_plain_text(c) for c in node.children)
    return node.content


@lru_cache(maxsize=1024)
def inline(src: str) -> str:
    """A one-line string the agent wrote as Markdown (a tool title, a plan entry), rewritten."""
    line = " ".join(src.split())
    if len(line) > agentmd.MAX_INLINE:
        return mdsafe.text(line)
    return _one_line(_inline_of(SyntaxTreeNode(agentmd.MD.parseInline(line))))
