"""The agent's Markdown, parsed by markdown-it-py and turned into HTML, with bounds.

One parser for both views: CommonMark with GFM tables and strikethrough, raw HTML off (the
agent's tags are text), links only to http(s), mailto and relative targets, images shown as
links (a remote image could track the reader), task list boxes as ☐/☑.

Drawn as it streams (`MarkdownStream`): each finished top-level block is converted once, the
growing last block at every redraw, and `to_html` of the whole text is the same stream fed at
once, so the HTML that streamed is the HTML at the end. Code blocks are highlighted by Pygments
(`highlight.py`).

Bounded: nesting deeper than `MAX_NESTING` levels, a block longer than `MAX_PIECE` characters
(and all after it), one with more than `MAX_BRACKETS` brackets, or what lies past `MAX_CHARS` is
shown as plain escaped text instead (markdown-it-py's cost grows with such input, and past its
nesting limit it drops content). `pieces` (the Markdown view's, `mdwrite.py`) cuts a long answer
at blank lines instead (`fences.chunks`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from html import escape
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.normalize_url import normalizeLink
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import OptionsDict

from ..protocol.weburl import beside, link_host, safe_url
from . import fences, highlight

#: Levels of block nesting (a list item inside a list counts two) before the text goes plain.
MAX_NESTING = 20
#: The longest piece (text between blank lines at the margin) parsed as Markdown.
MAX_PIECE = 20_000
#: How much of one text is parsed as Markdown; the rest is shown as text.
MAX_CHARS = 100_000
#: While a turn streams, its last (growing) piece is parsed only up to this size.
MAX_LIVE_PIECE = 5_000
#: A piece with more `[` than this is shown as text (see `_parsable`).
MAX_BRACKETS = 1_000
#: A one-line string (a title) longer than this is shown as text.
MAX_INLINE = 2_000

#: A newline markdown-it writes after a block's tag: a reader sees nothing of it, and a saved
#: notebook spends a JSON string on every line (see `_lean`). Inline tags are not listed: a
#: newline after one is a soft break, a space between words.
_BLOCK_NEWLINE = re.compile(
    r"(</(?:p|li|ul|ol|h[1-6]|blockquote|table|thead|tbody|tr|th|td)>"
    r"|<(?:ul|ol|li|blockquote|table|thead|tbody|tr|hr|br)(?: [^>]*)?>)\n"
)
#: A newline before a block's tag (a tight list item's text, then a nested list): the end of a
#: line, which the browser drops.
_NEWLINE_BLOCK = re.compile(r"\n(?=<(?:ul|ol|li|blockquote|table|p|h[1-6]|hr)[ >])")
#: A `<pre>` element in markdown-it's output (its text is escaped: no `<` inside), and the
#: newline after it, which splitting on this drops.
_PRE = re.compile(r"(<pre[ >].*?</pre>)\n?", re.S)
#: The size pieces are grouped to (see `_grouped`).
_GROUP = 2000
_TASK = re.compile(r"\[([ xX])\][ \t]")
_LANG_UNSAFE = re.compile(r"[^A-Za-z0-9_+-]")
_LINK_ATTRS = {"target": "_blank", "rel": "noopener noreferrer nofollow"}


def _checked_link(url: str) -> bool:
    return bool(safe_url(url))


def _normalized_link(url: str) -> str:
    """A destination as its link will have it: an http(s) one as the browser reads it
    (`weburl.safe_url`), since markdown-it's own normalisation reads hosts its own way (it drops
    an empty `https://@host`'s `@`, and spells `ｅvil` as `xn--vil-376s`, not `evil`) before any
    check could see them; others as markdown-it writes them. "" (no link) when refused."""
    checked = safe_url(url)
    if checked is None:
        return ""
    return checked if link_host(checked) else normalizeLink(checked)


def _tidy(state: StateCore) -> None:
    """A fence's language reduced to a safe word (it becomes a class name); task list boxes:
    `- [x] done` → `- ☑ done` (the first text of a list item's first paragraph)."""
    tokens = state.tokens
    for i, tok in enumerate(tokens):
        if tok.type == "fence":
            words = tok.info.split()
            tok.info = _LANG_UNSAFE.sub("", words[0])[:30] if words else ""
        elif (
            i >= 2
            and tok.type == "inline"
            and tokens[i - 1].type == "paragraph_open"
            and tokens[i - 2].type == "list_item_open"
            and tok.children
            and tok.children[0].type == "text"
            and (m := _TASK.match(tok.children[0].content)) is not None
        ):
            first = tok.children[0]
            box = "☑ " if m.group(1) in "xX" else "☐ "
            first.content = box + first.content[m.end() :]


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any
) -> str:
    tok = tokens[idx]
    for name, value in _LINK_ATTRS.items():
        tok.attrSet(name, value)
    return self.renderToken(tokens, idx, options, env)


def _link_close(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any
) -> str:
    """The closing tag, then the host the link opens when its label does not say it."""
    start = next(i for i in range(idx - 1, -1, -1) if tokens[i].type == "link_open")
    label = self.renderInlineAsText(list(tokens[start + 1 : idx]), options, env)
    return self.renderToken(tokens, idx, options, env) + _host_note(
        str(tokens[start].attrGet("href") or ""), label
    )


def _host_note(href: str, label: str) -> str:
    host = beside(href, label)
    return f"<span class=acpnb-muted> ({escape(host, quote=False)})</span>" if host else ""


def _image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any
) -> str:
    tok = tokens[idx]
    alt = escape(self.renderInlineAsText(tok.children or [], options, env), quote=False)
    label = "🖼 " + (alt or "image")
    src = safe_url(str(tok.attrGet("src") or ""))
    if not src:
        return label
    return (
        f"<a href='{escape(src)}' target=_blank rel='noopener noreferrer nofollow'>{label}</a>"
        + _host_note(src, alt)
    )


def _fence(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any
) -> str:
    """A code block, highlighted (`highlight.py`); its language a class (`_tidy` made it safe)."""
    tok = tokens[idx]
    lang = tok.info if tok.type == "fence" else ""
    code = f"<code class=language-{lang}>" if lang else "<code>"
    return f"<pre>{code}{highlight.code_html(tok.content, lang)}</code></pre>\n"


def _parser() -> MarkdownIt:
    md = MarkdownIt(
        "commonmark",
        {
            "html": False,
            "linkify": False,
            "typographer": False,
            "maxNesting": MAX_NESTING,
            "xhtmlOut": False,
        },
    )
    md.enable(["table", "strikethrough"])
    md.normalizeLink = _normalized_link  # type: ignore[method-assign]
    md.validateLink = _checked_link  # type: ignore[method-assign]
    md.core.ruler.push("acpnb_tidy", _tidy)
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("image", _image)
    md.add_render_rule("fence", _fence)
    md.add_render_rule("code_block", _fence)
    # A soft line break is a space to the reader, and one line fewer in a saved notebook.
    md.add_render_rule("softbreak", lambda *_: " ")
    return md


MD = _parser()
#: The same grammar, its blocks only (no inline parsing): where the top-level blocks start.
_BLOCKS = _parser().disable("inline")


def parse(src: str) -> list[Token] | None:
    """The tokens of one piece, or None when it nests too deep to be shown as Markdown."""
    tokens = MD.parse(src)
    if any(t.level >= MAX_NESTING - 1 for t in tokens):
        return None
    return tokens


def pieces(src: str, *, live: bool = False) -> list[tuple[str, bool]]:
    """`src` cut into pieces, each with whether it may be parsed as Markdown."""
    src = src.replace("\x00", "")
    if "\r" in src:
        src = src.replace("\r\n", "\n").replace("\r", "\n")
    head, rest = src[:MAX_CHARS], src[MAX_CHARS:]
    parts = [head] if len(head) < _GROUP else _grouped(fences.chunks(head))
    out = [(p, _parsable(p)) for p in parts]
    if live and out and len(out[-1][0]) > MAX_LIVE_PIECE:
        out[-1] = (out[-1][0], False)
    if rest:
        out.append((rest, False))
    return out


def _parsable(piece: str) -> bool:
    # Brackets cost markdown-it-py the most (each may open a link it looks ahead for): a piece
    # made of thousands of them is not an answer anyone wrote.
    return len(piece) <= MAX_PIECE and piece.count("[") <= MAX_BRACKETS


def _grouped(chunks: list[str]) -> list[str]:
    """Consecutive chunks joined into pieces of at least `_GROUP` characters: fewer, larger
    pieces to convert and cache. Greedy from the start, so as the text grows the groups stay
    the same; the chunks after the last full group stay apart (only the last one grows)."""
    out: list[str] = []
    group: list[str] = []
    size = 0
    for chunk in chunks:
        group.append(chunk)
        size += len(chunk)
        if size >= _GROUP:
            out.append("".join(group))
            group, size = [], 0
    out.extend(group)
    return out


def to_html(src: str, *, live: bool = False) -> str:
    """The agent's Markdown `src` as safe HTML: what a `MarkdownStream` fed it shows, so an
    answer drawn as it streamed and drawn whole at the end is the same HTML.

    A text that grows from one seen lately (a live view redraws its answer) goes on from where
    that one's finished blocks end: only its end is converted again."""
    # Its blocks were finished by what followed them there: `src` must go on from all of it.
    hit = next((i for i, r in enumerate(_recent) if src.startswith(r[0])), len(_recent))
    if hit < len(_recent):
        _, done, plain, blocks = _recent.pop(hit)
        stream = MarkdownStream(live=live, done=done, plain=plain)
        new, tail = stream.feed(src[done:])
        blocks = blocks + new
    else:
        stream = MarkdownStream(live=live)
        blocks, tail = stream.feed(src)
    # Most recent first; a few texts grow side by side (the answer, the thoughts, the chat's).
    _recent.insert(0, (src, stream.done, stream.plain, blocks))
    del _recent[_RECENT:]
    return "".join(blocks) + tail


_RECENT = 4
_recent: list[tuple[str, int, bool, list[str]]] = []


#: The most of the text after the finished blocks read to find where the next blocks start. A
#: block longer than this (and the rest of the text after it) is shown as text.
WINDOW = MAX_PIECE
#: Text shown as text (past `MAX_CHARS`, or after a block longer than `WINDOW`) is cut at the
#: first line end this many characters on (or twice this many on, in a longer line): each run is
#: drawn once, as the blocks are.
PLAIN_RUN = 4_000
_LINE_END = re.compile(r"\r\n?|\n")  # as markdown-it reads lines


class MarkdownStream:
    """A growing Markdown text drawn as it grows: each finished top-level block is converted
    once, the last (growing) one at every `feed`.

    A block is finished when the next top-level block (markdown-it's block tokens: a paragraph,
    a list, a fence, a table...) starts on a complete line and the line after it is complete
    too (a table's header row is one only when its delimiter row follows; a `#` alone might be
    the start of `#hashtag`). Nothing written after that can change the block: the block rules
    read forward only. Each finished block is converted on its own, so `to_html` of the whole
    text (which is this, fed at once) gives the same HTML as any sequence of feeds.
    """

    def __init__(self, *, live: bool = True, done: int = 0, plain: bool = False) -> None:
        #: Characters of the text in finished blocks.
        self.done = done
        self.live = live
        #: From `done` on, the text is shown as text.
        self.plain = plain

    def feed(self, rest: str) -> tuple[list[str], str]:
        """`rest` is the text from `done` on. The HTML of the blocks that finished with it
        (returned once each), and of the growing rest after them."""
        blocks: list[str] = []
        while rest:
            cuts, markdown = self._cuts(rest)
            if not cuts:
                break
            start = 0
            for cut in cuts:
                piece = rest[start:cut]
                ok = markdown and _parsable(piece)
                blocks.append(_piece_html(piece) if ok else plain_html(piece))
                start = cut
            rest = rest[start:]
            self.done += start
        if self.plain or (self.live and len(rest) > MAX_LIVE_PIECE) or not _parsable(rest):
            return blocks, plain_html(rest)
        return blocks, _piece_html(rest)

    def _cuts(self, rest: str) -> tuple[list[int], bool]:
        """Where the finished blocks at the start of `rest` end, and whether they are Markdown."""
        if self.plain:
            # At a line end past PLAIN_RUN characters, or, in a line that long, after twice that.
            end = rest.find("\n", PLAIN_RUN - 1, 2 * PLAIN_RUN)
            if end >= 0:
                return [end + 1], False
            return ([2 * PLAIN_RUN] if len(rest) > 2 * PLAIN_RUN else []), False
        room = MAX_CHARS - self.done
        window = rest[: min(room, WINDOW)]
        window = window[: window.rfind("\n") + 1]
        cuts = _block_ends(window) if window else []
        if cuts:
            return cuts, True
        if len(rest) > room and room <= WINDOW:  # the Markdown ends here: its last block
            self.plain = True
            return [room], True
        if len(rest) >= WINDOW:  # one block longer than a window: the rest is text
            self.plain = True
            return self._cuts(rest)
        return [], True


def _block_ends(window: str) -> list[int]:
    """The offsets in `window` (whole lines) where its finished top-level blocks end."""
    tokens = _BLOCKS.parse(window)
    lines = [0] + [m.end() for m in _LINE_END.finditer(window)]
    complete = len(lines) - 1
    starts = {t.map[0] for t in tokens if t.level == 0 and t.nesting >= 0 and t.map}
    return [lines[i] for i in sorted(starts) if 0 < lines[i] and i + 1 < complete]


@lru_cache(maxsize=512)
def _piece_html(src: str) -> str:
    tokens = parse(src)
    if tokens is None:
        return plain_html(src)
    return _lean(str(MD.renderer.render(tokens, MD.options, {})))


def _lean(html: str) -> str:
    """markdown-it's HTML without the newlines it puts after block tags, and with the ones
    inside a `<pre>` as `&#10;` (`pre_text`): the same page, fewer lines to save."""
    pieces = _PRE.split(html)  # odd indices: the <pre> elements
    for i, piece in enumerate(pieces):
        if i % 2:
            pieces[i] = piece.replace("\n", "&#10;")
            continue
        piece = _NEWLINE_BLOCK.sub("", _BLOCK_NEWLINE.sub(r"\1", piece))
        pieces[i] = piece[:-1] if i + 1 < len(pieces) and piece.endswith("\n") else piece
    return "".join(pieces)


def pre_text(value: str) -> str:
    """`value` escaped for a `<pre>`, its newlines as `&#10;`: the same text to the browser (the
    parser turns the reference into the line feed it stands for) for 5 B where a literal newline
    costs 13 in a saved notebook, whose format starts a JSON string at every line. A carriage
    return goes first, as the browser's parser would take it: a line feed, one with the line feed
    after it (a CR left before `&#10;` would be a second line end)."""
    if "\r" in value:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    return escape(value, quote=False).replace("\n", "&#10;")


def plain_html(src: str) -> str:
    """Text shown as it is, for what is not parsed as Markdown."""
    if not src.strip():
        return ""
    return f"<pre class=acpnb-out>{pre_text(src.strip(chr(10)))}</pre>"


@lru_cache(maxsize=1024)
def inline(src: str) -> str:
    """A one-line string (a tool title, a plan entry) as inline HTML."""
    line = " ".join(src.split())
    if len(line) > MAX_INLINE:
        return escape(line, quote=False)
    return str(MD.renderInline(line))
