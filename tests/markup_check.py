"""Would this display run anything in the page? The check the hostile-agent tests share.

`text/markdown` is rendered the way JupyterLab's marked does (CommonMark plus tables, raw HTML
on, every link target kept) by markdown-it-py; that HTML and any `text/html` are parsed with
`html.parser`. An element outside a small allowlist, an `on*` or other unexpected attribute, or
a link to a `javascript:`/`data:` URL is a problem. `text/plain` may not hold control characters
(escape sequences). Each problem is a short string; an empty list means safe.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from markdown_it import MarkdownIt

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<IMG SRC=x OnError=alert(1)>",
    "<svg onload=alert(1)>",
    "<svg><script>alert(1)</script></svg>",
    "<iframe src=javascript:alert(1)></iframe>",
    "<details open ontoggle=alert(1)>",
    '"><img src=x onerror=alert(1)>',
    "'><svg/onload=alert(1)>",
    "\\`<img src=x onerror=alert(1)>`",
    "``<img src=x onerror=alert(1)>`",
    "`a` \\` <img src=x onerror=alert(1)> `",
    "a \\| <img src=x onerror=alert(1)> \\|",
    "`a \\| <img src=x onerror=alert(1)> \\|`",
    "`x | <img src=x onerror=alert(1)> |`",
    "a ` b",
    "x | <img src=x onerror=alert(1)> |",
    "[x](javascript:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](&#x6A;&#x61;vascript:alert(1))",
    '<a href="&#x6A;avascript:alert(1)">x</a>',
    "<a href=data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==>x</a>",
    "[x]: javascript:alert(1)\n\n[x]",
    "title\n\n<script>alert(1)</script>",
    "title\n<img src=x onerror=alert(1)>",
    "line\r\n<svg onload=alert(1)>",
    "<style>*{display:none}</style>",
    "<form action=javascript:alert(1)><button>go</button></form>",
    "<object data=javascript:alert(1)></object>",
    "<meta http-equiv=refresh content='0;url=javascript:alert(1)'>",
    "<scr<script>ipt>alert(1)</script>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "<!-- <img src=x onerror=alert(1)> -->",
    "$\\href{javascript:alert(1)}{x}$",
    "\x1b[31mred\x1b[0m \x1b]8;;javascript:alert(1)\x07link\x1b]8;;\x07",
    "\u202egnp.exe",
    "\ud800 lone surrogate",
    "`" * 300 + "<img src=x onerror=alert(1)>",
    "|" * 40,
    "<" * 50 + "script>alert(1)",
]

_ALLOWED = {
    "p",
    "ul",
    "ol",
    "li",
    "code",
    "pre",
    "b",
    "strong",
    "em",
    "i",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "div",
    "span",
    "br",
    "small",
    "hr",
    "blockquote",
    "a",
    "del",
    "s",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "details",
    "summary",
}
_ATTRIBUTES = {"class", "title", "href", "align", "start", "rel", "target", "style"}
_BAD_URL = re.compile(r"^(javascript|data|vbscript):", re.I)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MD = MarkdownIt("commonmark", {"html": True}).enable("table")
# marked keeps any link target; markdown-it-py would drop javascript: ones and hide the hole.
_MD.validateLink = lambda url: True


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED:
            self.problems.append(f"element <{tag}>")
        for name, value in attrs:
            if name.startswith("on") or name not in _ATTRIBUTES:
                self.problems.append(f"attribute {name}= on <{tag}>")
            # Browsers drop tabs and newlines inside a URL and ignore leading spaces.
            url = re.sub(r"[\s\x00-\x1f]", "", value or "")
            if name in {"href", "src", "action", "data"} and _BAD_URL.match(url):
                self.problems.append(f"{name}={value!r} on <{tag}>")


def html_problems(html: str) -> list[str]:
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return collector.problems


# marked splits a table row at a `|` after an even number of backslashes (they escape each
# other); markdown-it-py only looks at the one before it. Render that reading too.
_MARKED_PIPE = re.compile(r"(?<!\\)((?:\\\\)+)\|")


def markdown_problems(md: str) -> list[str]:
    problems = html_problems(_MD.render(md))
    marked_rows = _MARKED_PIPE.sub(r"\1 |", md)
    if marked_rows != md:
        problems += html_problems(_MD.render(marked_rows))
    return problems


def bundle_problems(bundle: dict[str, Any]) -> list[str]:
    """Problems of every format in one display's data."""
    problems = []
    if isinstance(bundle.get("text/markdown"), str):
        problems += [f"markdown: {p}" for p in markdown_problems(bundle["text/markdown"])]
    if isinstance(bundle.get("text/html"), str):
        problems += [f"html: {p}" for p in html_problems(bundle["text/html"])]
    plain = bundle.get("text/plain")
    if isinstance(plain, str) and _CONTROL.search(plain):
        problems.append(f"plain: control character in {plain[:80]!r}")
    return problems


def self_test() -> None:
    """The checker finds what it must find (run by the tests, so a broken checker fails)."""
    assert markdown_problems("\\`<img src=x onerror=alert(1)>`")
    assert markdown_problems("[x](&#106;avascript:alert(1))")
    assert markdown_problems("| a |\n|---|\n| x \\\\| <img src=x onerror=alert(1)> |")
    assert markdown_problems("| a | b |\n|---|---|\n| `x \\\\| <img src=x onerror=alert(1)> |")
    assert html_problems('<a href="&#x6A;avascript:alert(1)">x</a>')
    assert html_problems("<svg><b>x</b></svg>")
    assert not html_problems("<p><code>&lt;script&gt;</code></p>")
