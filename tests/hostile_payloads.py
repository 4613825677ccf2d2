"""Hostile strings for agent-controlled fields, and a checker that their rendering is inert.

Every payload, if a browser ran it, sets `window.__acp_pwned` (through `top`, so a script in a
same-origin frame counts too) to the payload's id:
`Reflect.set(top,/__acp_pwned/.source,/tags-01/.source)`. That JavaScript has no quotes, spaces
or `=`, so it is a valid unquoted attribute value (CommonMark's inline HTML allows no `=` there)
and survives most escaping mistakes; whoever finds it knows which payload ran.

Classes (`CLASSES`): raw HTML tags, link schemes, Markdown structure (code spans, tables, fences,
comments, block closers, newlines), and attribute or template contexts. `tests/agents/
hostile_agent.py` puts them in every string it controls.

`assert_inert(bundle)` renders each `text/markdown` with markdown-it-py in html mode with link
validation off (as marked does in JupyterLab, which does not sanitise trusted output), parses the
result and each `text/html` with `html.parser`, and fails on an element outside an allowlist, an
event-handler or unknown attribute, a script-capable URL, or a stylesheet other than the
project's own. The module itself is standard library only at import time: the agent imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

__all__ = [
    "CLASSES",
    "PAYLOADS",
    "Payload",
    "assert_inert",
    "by_class",
    "findings",
    "html_problems",
    "js",
    "markdown_problems",
    "payload_ids",
]


@dataclass(frozen=True)
class Payload:
    id: str
    cls: str
    text: str


def js(pid: str) -> str:
    """The script a payload runs: it names itself in `window.__acp_pwned`."""
    return f"Reflect.set(top,/__acp_pwned/.source,/{pid}/.source)"


# Templates: `{js}` is the payload's script, `{id}` its id. Kept as plain strings so each line
# reads as the attack it is.
_TAGS = [
    "<img src=x onerror={js}>",
    "<IMG SRC=x OnError={js}>",
    "<img/src=x/onerror={js}>",
    "<svg onload={js}>",
    "<svg><script>{js}</script></svg>",
    "<script>{js}</script>",
    '<iframe srcdoc="<img src=x onerror={js}>"></iframe>',
    "<details open ontoggle={js}>x</details>",
    "<video><source onerror={js}></video>",
    "<input autofocus onfocus={js}>",
    "<math><mtext><table><mglyph><style><img src=x onerror={js}>",
    "<object data=javascript:{js}></object>",
    "<embed src=javascript:{js}>",
    "<form><button formaction=javascript:{js}>go</button></form>",
    '<a href="javascript:{js}">click</a>',
    '<meta http-equiv="refresh" content="0;url=javascript:{js}">',
    "<<img src=x onerror={js}>>",
    "<img src=x onerror={js}",
    "<style>@import 'javascript:{js}';</style><img src=x onerror={js}>",
    "<body onload={js}><marquee onstart={js}>",
]
_LINKS = [
    "[click](javascript:{js})",
    "[click](JaVaScRiPt:{js})",
    "[click](&#106;avascript:{js})",
    "[click](&#x6A;&#x61;vascript:{js})",
    "[click](javascript&colon;{js})",
    "[click](javascript\\:{js})",
    "[click](<javascript:{js}>)",
    '[click](javascript:{js} "title")',
    "<javascript:{js}>",
    "<JAVASCRIPT:{js}>",
    "[click][{id}]\n\n[{id}]: javascript:{js}",
    "[{id}]\n\n[{id}]: <javascript:{js}>",
    "![image](javascript:{js})",
    "[click](vbscript:{js})",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==#{js})",
    "*[click](javascript:{js})*",
    "| a |\n|---|\n| [click](javascript:{js}) |",
    "javascript:{js}",
]
_SPANS = [
    "\\`<img src=x onerror={js}>`",
    "\\\\`<img src=x onerror={js}>`",
    "`x\\`<img src=x onerror={js}>`y`",
    "`` ` <img src=x onerror={js}> ``",
    "a\\` <img src=x onerror={js}> \\`b",
    "x \\| <img src=x onerror={js}> \\| y",
    "x | <img src=x onerror={js}> |",
    "```\n<img src=x onerror={js}>",
    "~~~~\n<img src=x onerror={js}>\n~~~",
    "</code></pre><img src=x onerror={js}>",
    "</details></summary><img src=x onerror={js}>",
    "</td></tr></table><img src=x onerror={js}>",
    "<!-- --><img src=x onerror={js}><!-- -->",
    "<!--><img src=x onerror={js}>-->",
    "<![CDATA[><img src=x onerror={js}>]]>",
    "<?x ?><img src=x onerror={js}>",
    "title\n\n<img src=x onerror={js}>",
    "line\r<script>{js}</script>\r",
    "x\u2028<img src=x onerror={js}>",
    "&lt;img src=x onerror={js}&gt;",
    "`x\\|<img src=x onerror={js}>`",
    "`|<img src=x onerror={js}>|`",
]
_ATTRS = [
    '" onmouseover={js} x="',
    "' onmouseover={js} x='",
    '"><img src=x onerror={js}>',
    "'><img src=x onerror={js}>",
    "`><img src=x onerror={js}>",
    '" autofocus onfocus={js} tabindex=0 x="',
    "</textarea><img src=x onerror={js}>",
    "</title><img src=x onerror={js}>",
    "</style><img src=x onerror={js}>",
    "</script><img src=x onerror={js}>",
    "{{{{constructor.constructor(/{js}/.source)()}}}}",
    "${{{js}}}",
    "data:text/html,<script>{js}</script>",
    "\x00<img src=x onerror={js}>",
    '<img src="x\nonerror={js}>',
    "<img src=x onerror&#61;{js}>",
    '<a href="java&#x0A;script:{js}">x</a>',
]

CLASSES: dict[str, list[str]] = {"tags": _TAGS, "links": _LINKS, "spans": _SPANS, "attrs": _ATTRS}


def _build() -> list[Payload]:
    out = []
    for cls, templates in CLASSES.items():
        for n, template in enumerate(templates, 1):
            pid = f"{cls}-{n:02d}"
            out.append(Payload(pid, cls, template.format(js=js(pid), id=pid)))
    return out


PAYLOADS: list[Payload] = _build()


def by_class(cls: str) -> list[Payload]:
    found = [p for p in PAYLOADS if p.cls == cls]
    if not found:
        raise KeyError(f"no payload class {cls!r}; classes: {', '.join(CLASSES)}")
    return found


# -- the checker ------------------------------------------------------------------------------

ALLOWED_ELEMENTS = frozenset(
    """
a abbr b blockquote br caption code col colgroup dd del details div dl dt em h1 h2 h3 h4 h5 h6
hr i img ins kbd li mark ol p pre q s samp small span strong sub summary sup table tbody td tfoot
th thead tr u ul
""".split()
)
# Named here only to say why a finding matters; anything not allowed above is a finding anyway.
FORBIDDEN_ELEMENTS = frozenset(
    """
script iframe frame frameset svg style form object embed meta base link math applet template
input button textarea select video audio source noscript portal
""".split()
)
ALLOWED_ATTRIBUTES = frozenset(
    """
class title alt href src style target rel role start open colspan rowspan align width height
lang dir datetime
""".split()
)
URL_ATTRIBUTES = frozenset(
    {
        "href",
        "src",
        "action",
        "formaction",
        "data",
        "poster",
        "srcset",
        "background",
        "xlink:href",
        "codebase",
        "cite",
    }
)
_SAFE_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp)[;,]", re.I)
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f\u200b-\u200f\u2028\u2029\ufeff]")
_BAD_CSS = re.compile(
    r"url\s*\(|expression\s*\(|@import|javascript:|behavior\s*:|-moz-binding", re.I
)
_PWNED_ID = re.compile(r"/([a-z]+-\d\d)/\.source")
_MATH_HREF = re.compile(r"\$[^$]*\\href\s*\{[^}]*(javascript|vbscript|data):", re.I)


def _project_styles() -> frozenset[str]:
    """The project's own stylesheet(s): the only `<style>` content an output may carry."""
    try:
        from acp_notebook.render.style import STYLE
    except ImportError:
        return frozenset()
    m = re.fullmatch(r"<style>(.*)</style>", STYLE, re.S)
    return frozenset({m.group(1) if m else STYLE})


class _Inspector(HTMLParser):
    def __init__(self, source: str, styles: frozenset[str]) -> None:
        super().__init__(convert_charrefs=True)
        self._lines = source.split("\n")  # as HTMLParser counts lines (not at U+2028)
        self.problems: list[str] = []
        self._styles = styles
        self._stack: list[str] = []
        self._style_text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._element(tag, attrs, self.get_starttag_text() or tag)
        if tag not in ("br", "hr", "img", "col"):
            self._stack.append(tag)
        if tag == "style":
            self._style_text = []

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._element(tag, attrs, self.get_starttag_text() or tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style" and self._style_text is not None:
            css = "".join(self._style_text)
            if css not in self._styles:
                self.problems.append(f"a <style> that is not the project's: {css[:200]!r}")
            self._style_text = None
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if self._style_text is not None:
            self._style_text.append(data)
        elif "code" not in self._stack and "pre" not in self._stack:
            # JupyterLab typesets $…$ in Markdown with MathJax, whose \href takes a URL.
            if _MATH_HREF.search(data):
                self.problems.append(f"a MathJax \\href to a script URL: {data[:200]!r}")

    def handle_comment(self, data: str) -> None:
        pass  # a comment is inert once parsed as one

    def _context(self) -> str:
        """The source from the current tag on: a finding names what follows (a script body)."""
        line, col = self.getpos()
        return ("\n".join(self._lines[line - 1 : line + 3])[col:])[:300]

    def _element(self, tag: str, attrs: list[tuple[str, str | None]], raw: str) -> None:
        raw = self._context() or raw
        if tag == "style":
            return  # judged by its content, at its end tag
        if tag not in ALLOWED_ELEMENTS:
            self.problems.append(f"element <{tag}>: {raw!r}")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.problems.append(f"event handler {name}= on <{tag}>: {raw!r}")
            elif name in URL_ATTRIBUTES:
                if not _url_ok(tag, name, value):
                    self.problems.append(f"script URL in <{tag} {name}>: {raw!r}")
            elif name == "style":
                if _BAD_CSS.search(value):
                    self.problems.append(f"active CSS in <{tag} style>: {raw!r}")
            elif name not in ALLOWED_ATTRIBUTES and not name.startswith(("data-", "aria-")):
                self.problems.append(f"attribute {name}= on <{tag}>: {raw!r}")


def _url_ok(tag: str, name: str, value: str) -> bool:
    cleaned = _INVISIBLE.sub("", value).lower()  # browsers ignore these in a scheme
    if cleaned.startswith(("javascript:", "vbscript:")):
        return False
    if cleaned.startswith("data:"):
        return tag == "img" and name == "src" and bool(_SAFE_DATA_IMAGE.match(cleaned))
    # A scheme-less colon before any slash (e.g. "java\tscript:") was handled above; other
    # schemes (http, mailto, relative) cannot run script.
    return True


def _markdown_renderer() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: True  # marked does not filter link schemes; neither do we
    return md


def html_problems(html: str) -> list[str]:
    inspector = _Inspector(html, _project_styles())
    inspector.feed(html)
    inspector.close()
    return inspector.problems


# In a table row marked splits cells at a pipe after an even number of backslashes (`\\|` is an
# escaped backslash, then a separator), where markdown-it-py sees an escaped pipe.
_EVEN_SLASHES_PIPE = re.compile(r"(?<!\\)((?:\\\\)+)\|")


def _as_marked_splits_cells(markdown: str) -> str:
    return "\n".join(
        _EVEN_SLASHES_PIPE.sub(r"\1 |", line) if line.lstrip().startswith("|") else line
        for line in markdown.split("\n")
    )


def markdown_problems(markdown: str) -> list[str]:
    renderer = _markdown_renderer()
    problems = html_problems(renderer.render(markdown))
    marked = _as_marked_splits_cells(markdown)
    if marked != markdown:
        problems += [p for p in html_problems(renderer.render(marked)) if p not in problems]
    return problems


def findings(bundle: dict[str, Any]) -> list[str]:
    """Every unsafe thing in a mimebundle, as `mime: problem` lines."""
    out: list[str] = []
    for mime, value in bundle.items():
        text = "".join(value) if isinstance(value, list) else value
        if mime in ("application/javascript", "text/javascript", "image/svg+xml"):
            out.append(f"{mime}: a script-capable MIME type is displayed")
        elif not isinstance(text, str):
            continue
        elif mime == "text/markdown":
            out += [f"{mime}: {p}" for p in markdown_problems(text)]
        elif mime == "text/html":
            out += [f"{mime}: {p}" for p in html_problems(text)]
    return out


def payload_ids(problems: list[str]) -> list[str]:
    """The ids of the payloads named in these problems (where the payload's script survived)."""
    # The first id after the offending tag is its payload's; later ones are the text around it.
    return sorted({m.group(1) for p in problems if (m := _PWNED_ID.search(p)) is not None})


def assert_inert(bundle: dict[str, Any], where: str = "") -> None:
    """Fails, naming the payloads, if any rendering in `bundle` could run script."""
    problems = findings(bundle)
    if problems:
        ids = payload_ids(problems)
        shown = "\n  ".join(problems[:20])
        more = f"\n  … and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise AssertionError(f"{where or 'output'} is not inert (payloads {ids}):\n  {shown}{more}")
