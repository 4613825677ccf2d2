"""Would this display run anything in the page? The one check every hostile-agent test uses.

A browser meets a display the way JupyterLab shows trusted output: `text/html` as it is, and
`text/markdown` rendered by marked (CommonMark plus tables and strikethrough, raw HTML on, every
link target kept, math lifted out first), neither sanitised. Here `text/markdown` is rendered by
markdown-it-py the same way, once more as marked splits table cells where the two differ, and
both are parsed with `html.parser`. A problem is:

- an element outside the project's own vocabulary (a smaller one for Markdown, which makes no
  `<div>`, `<img>` or `<style>`), a processing instruction, a `<style>` other than the project's
  stylesheet;
- an `on*` attribute or one outside an allowlist, a `style` that is not one of the project's
  few declarations, a link to any scheme but http(s) and mailto, an image that is not inline
  PNG/JPEG/GIF/WebP data, a MathJax `\\href` to a script URL;
- in `text/markdown`, a `$`, `@@`, `\\\\` or `\\begin` (JupyterLab lifts math and its `@@n@@`
  placeholders out of the source before marked runs: none may come from the agent);
- in `text/plain`, a control character (a terminal escape sequence);
- a script-capable MIME type (`application/javascript`, `image/svg+xml`).

`bundle_problems` lists them as `mime: problem`, `turn_problems` adds what a turn's display
must also hold, `assert_inert` fails naming the payloads (tests/hostile_payloads.py) that ran.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from markdown_it import MarkdownIt

#: What a Markdown renderer makes of the project's Markdown.
MARKDOWN_ELEMENTS = frozenset(
    """
a blockquote br code del div em h1 h2 h3 h4 h5 h6 hr li ol p pre s strong table tbody td th
thead tr ul
""".split()
)
#: The project's HTML adds these (`<style>` is judged by its content).
HTML_ELEMENTS = MARKDOWN_ELEMENTS | {
    "b",
    "i",
    "div",
    "footer",
    "meter",
    "span",
    "details",
    "summary",
    "small",
    "img",
    "style",
}
ALLOWED_ATTRIBUTES = frozenset(
    (
        "href class style title target rel start alt src open role align data-turn-id value high"
        " data-part"  # a subagent card's part, by id (the live view puts its buttons there)
    ).split()
)
_STYLE_ATTRIBUTE = re.compile(r"text-align:\w+|max-width:100%")
#: A meter's value and mark: a number from 0 to 1.
_METER_NUMBER = re.compile(r"0|1|0?\.\d{1,3}")
_SAFE_SCHEME = re.compile(r"(https?|mailto):")
_ANY_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:")
_SAFE_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp)[;,]")
# Browsers ignore these in a URL's scheme (and leading spaces).
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f\u200b-\u200f\u2028\u2029\ufeff]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MATH_HREF = re.compile(r"\$[^$]*\\href\s*\{[^}]*(javascript|vbscript|data):", re.I)
_MATH_IN_MARKDOWN = ("$", "@@", "\\\\", "\\begin")
_SCRIPT_MIMES = ("application/javascript", "text/javascript", "image/svg+xml")
_PWNED_ID = re.compile(r"/([a-z]+-\d\d)/\.source")

MARKED_LIKE = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# marked keeps any link target; markdown-it-py would drop javascript: ones and hide the hole.
MARKED_LIKE.validateLink = lambda url: True  # type: ignore[method-assign]


def _project_styles() -> frozenset[str]:
    """The project's own stylesheets, the only `<style>` content an output may carry: a turn's
    (the live view's, a record's), and a chat record's (the rule that hides a chat that cannot
    be drawn)."""
    from acp_notebook.chat.record import DEAD_CHAT
    from acp_notebook.render.style import CSS, RECORD_CSS

    return frozenset({CSS + "\n", RECORD_CSS, DEAD_CHAT + RECORD_CSS})


class _Inspector(HTMLParser):
    def __init__(self, source: str, *, markdown: bool) -> None:
        super().__init__(convert_charrefs=True)
        self._lines = source.split("\n")  # as HTMLParser counts lines (not at U+2028)
        self._allowed = MARKDOWN_ELEMENTS if markdown else HTML_ELEMENTS
        self._images = not markdown
        self.problems: list[str] = []
        self.styles = 0
        self._stack: list[tuple[str, bool]] = []  # open elements, each: inside mathjax_ignore?
        self._style_text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._element(tag, attrs)
        if tag not in ("br", "hr", "img", "col"):
            classes = (dict(attrs).get("class") or "").split()
            ignored = bool({"mathjax_ignore", "tex2jax_ignore"} & set(classes))
            self._stack.append((tag, ignored or self._math_ignored()))
        if tag == "style":
            self.styles += 1
            self._style_text = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._element(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style" and self._style_text is not None:
            css = "".join(self._style_text)
            if css not in _project_styles():
                self.problems.append(f"a <style> that is not the project's: {css[:200]!r}")
            self._style_text = None
        if tag in (t for t, _ in self._stack):
            while self._stack and self._stack.pop()[0] != tag:
                pass

    def _math_ignored(self) -> bool:
        return bool(self._stack) and self._stack[-1][1]

    def _in_code(self) -> bool:
        return any(t in ("code", "pre") for t, _ in self._stack)

    def handle_data(self, data: str) -> None:
        if self._style_text is not None:
            self._style_text.append(data)
        elif not (self._in_code() or self._math_ignored()) and _MATH_HREF.search(data):
            # JupyterLab typesets $…$ with MathJax (unless told not to), whose \href takes a URL.
            self.problems.append(f"a MathJax \\href to a script URL: {data[:200]!r}")

    def handle_comment(self, data: str) -> None:
        pass  # a comment is inert once parsed as one

    def handle_pi(self, data: str) -> None:
        self.problems.append(f"processing instruction <?{data[:200]}>")

    def _context(self) -> str:
        """The source from the current tag on: a finding names what follows (a script body)."""
        line, col = self.getpos()
        lines = self._lines[line - 1 : line + 3]
        if not lines:
            return ""
        # The first line cut before joining: the lean record HTML is one line of megabytes, and
        # copying it at every tag made one check take a minute.
        return "\n".join([lines[0][col : col + 300], *lines[1:]])[:300]

    def _element(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self._context() or self.get_starttag_text() or tag
        if tag not in self._allowed:
            self.problems.append(f"element <{tag}>: {raw!r}")
        for name, value in attrs:
            problem = _attribute_problem(tag, name, value or "", images=self._images)
            if problem:
                self.problems.append(f"{problem}: {raw!r}")


def _attribute_problem(tag: str, name: str, value: str, *, images: bool) -> str | None:
    if name.startswith("on"):
        return f"event handler {name}= on <{tag}>"
    if name not in ALLOWED_ATTRIBUTES:
        return f"attribute {name}= on <{tag}>"
    url = _INVISIBLE.sub("", value).lower()
    if name == "href" and _ANY_SCHEME.match(url) and not _SAFE_SCHEME.match(url):
        return f"script-capable URL in <{tag} href>"
    if name == "src" and not (images and tag == "img" and _SAFE_DATA_IMAGE.match(url)):
        return f"a source other than inline image data in <{tag} src>"
    if name in ("value", "high") and not (tag == "meter" and _METER_NUMBER.fullmatch(value)):
        return f"attribute {name}= on <{tag}> that is not a meter's number"
    if name == "style" and not _STYLE_ATTRIBUTE.fullmatch(value):
        return f"a style that is not the project's in <{tag}>"
    return None


def _inspect(html: str, *, markdown: bool) -> _Inspector:
    inspector = _Inspector(html, markdown=markdown)
    inspector.feed(html)
    inspector.close()
    return inspector


def html_problems(html: str, *, markdown: bool = False) -> list[str]:
    """Problems of HTML as the browser gets it (`markdown`: HTML that marked made)."""
    return _inspect(html, markdown=markdown).problems


# marked splits a table row at a `|` after an even number of backslashes (they escape each
# other); markdown-it-py only looks at the one before it. Render that reading too.
_MARKED_PIPE = re.compile(r"(?<!\\)((?:\\\\)+)\|")


def markdown_problems(markdown: str) -> list[str]:
    """Problems of Markdown as JupyterLab shows it (its math lifted, then rendered by marked)."""
    problems = [f"{m!r} in Markdown (math)" for m in _MATH_IN_MARKDOWN if m in markdown]
    problems += html_problems(MARKED_LIKE.render(markdown), markdown=True)
    marked_cells = _MARKED_PIPE.sub(r"\1 |", markdown)
    if marked_cells != markdown:
        more = html_problems(MARKED_LIKE.render(marked_cells), markdown=True)
        problems += [p for p in more if p not in problems]
    return problems


def bundle_problems(bundle: dict[str, Any], *, plain_controls: bool = False) -> list[str]:
    """Every unsafe thing in a display's data, as `mime: problem` lines.

    `plain_controls`: control characters are allowed in `text/plain` (a turn's text, as the
    agent wrote it; a command's values are one line of text and may hold none)."""
    out: list[str] = []
    for mime, value in bundle.items():
        text = "".join(value) if isinstance(value, list) else value
        if mime in _SCRIPT_MIMES:
            out.append(f"{mime}: a script-capable MIME type is displayed")
        elif not isinstance(text, str):
            continue
        elif mime == "text/markdown":
            out += [f"{mime}: {p}" for p in markdown_problems(text)]
        elif mime == "text/html":
            out += [f"{mime}: {p}" for p in html_problems(text)]
        elif mime == "text/plain" and not plain_controls and _CONTROL.search(text):
            out.append(f"{mime}: control character in {text[:80]!r}")
    return out


def turn_problems(bundle: dict[str, Any]) -> list[str]:
    """A turn's display: safe, the record's stylesheet at most once (`bundle_problems` checks
    it is the project's), and no renderer guard was needed."""
    out = bundle_problems(bundle, plain_controls=True)
    styles = _inspect(bundle["text/html"], markdown=False).styles
    if styles > 1:
        out.append(f"text/html: {styles} <style> elements")
    out += [
        f"{m}: a guard fired"
        for m in ("text/html", "text/markdown")
        if "could not render" in bundle[m]
    ]
    return out


def payload_ids(problems: list[str]) -> list[str]:
    """The ids of the payloads named in these problems (where the payload's script survived)."""
    # The first id after the offending tag is its payload's; later ones are the text around it.
    return sorted({m.group(1) for p in problems if (m := _PWNED_ID.search(p)) is not None})


def assert_inert(bundle: dict[str, Any], where: str = "") -> None:
    """Fails, naming the payloads, if any rendering in `bundle` could run script."""
    problems = bundle_problems(bundle)
    if problems:
        ids = payload_ids(problems)
        shown = "\n  ".join(problems[:20])
        more = f"\n  … and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise AssertionError(f"{where or 'output'} is not inert (payloads {ids}):\n  {shown}{more}")


def self_test() -> None:
    """The checker finds what it must find (run by the tests, so a broken checker fails)."""
    assert markdown_problems("\\`<img src=x onerror=alert(1)>`")
    assert markdown_problems("[x](&#106;avascript:alert(1))")
    assert markdown_problems("| a |\n|---|\n| x \\\\| <img src=x onerror=alert(1)> |")
    assert markdown_problems("| a | b |\n|---|---|\n| `x \\\\| <img src=x onerror=alert(1)> |")
    assert markdown_problems("a $x$ b") and markdown_problems("<span>x</span>")
    assert html_problems('<a href="&#x6A;avascript:alert(1)">x</a>')
    assert html_problems('<a href="java&#x0A;script:x">x</a>')
    assert html_problems("<svg><b>x</b></svg>") and html_problems("<?x ?>")
    assert html_problems("<style>*{display:none}</style>")
    assert html_problems('<img src="data:image/svg+xml,x">')
    assert html_problems('<span style="background:url(x)">x</span>')
    assert bundle_problems({"text/plain": "\x1b[31m"})
    assert bundle_problems({"image/svg+xml": "<svg/>"})
    assert not html_problems("<p><code>&lt;script&gt;</code></p>")
    assert not markdown_problems("a `<b>` [x](https://a.b)")
    assert html_problems("<p>&#36;\\href{javascript:x}{y}&#36;</p>")
    assert not html_problems('<div class="mathjax_ignore"><p>$\\href{javascript:x}{y}$</p></div>')
