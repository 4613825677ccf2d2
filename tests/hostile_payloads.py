"""The hostile-agent payload corpus: strings an agent may put in any field it controls.

Two kinds, both used wherever agent text is shown (tests/markup_check.py checks the result):

- `PAYLOADS` (`CLASSES`): templates in four classes, raw HTML tags, link schemes, Markdown
  structure (code spans, tables, fences, comments, block closers, newlines), and attribute or
  template contexts. Each, if a browser ran it, sets `window.__acp_pwned` (through `top`, so a
  script in a same-origin frame counts too) to the payload's id:
  `Reflect.set(top,/__acp_pwned/.source,/tags-01/.source)`. That JavaScript has no quotes, spaces
  or `=`, so it is a valid unquoted attribute value (CommonMark's inline HTML allows no `=` there)
  and survives most escaping mistakes; whoever finds it knows which payload ran.
  `tests/agents/hostile_agent.py` puts one class in every string it controls.
- `ALERTS`: literal strings that call `alert(1)` (a dialog is what the browser tests watch for),
  written against the turn's renderer, `%agent status` and `%agent sessions`.

`TEXTS` is every payload's text. Standard library only: the agent imports this module by path.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ALERTS", "CLASSES", "PAYLOADS", "TEXTS", "Payload", "by_class", "encodable", "js"]


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


# Payloads that call `alert` (a dialog in the browser) instead of naming themselves, kept as they
# were written against the turn's renderer and then against `%agent status` and `sessions`.
ALERTS: list[str] = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<IMG SRC=x OnError=alert(1)>",
    "<svg onload=alert(1)>",
    "<svg><script>alert(1)</script></svg>",
    "<iframe srcdoc='<script>alert(1)</script>'></iframe>",
    "<a href='javascript:alert(1)'>x</a>",
    "<details open ontoggle=alert(1)>",
    "<style>@import 'javascript:alert(1)'</style>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<form action=javascript:alert(1)><button>x</button></form>",
    "<object data=javascript:alert(1)></object><embed src=javascript:alert(1)>",
    "<meta http-equiv=refresh content='0;url=javascript:alert(1)'><base href=javascript:/>",
    "<link rel=import href=data:text/html,x>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x]( javascript:alert(1) )",
    "[x](<javascript:alert(1)>)",
    "[x](java\nscript:alert(1))",
    "[x](java&#09;script:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](&#x6A;avascript:alert(1))",
    "[x](javascript&colon;alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![x](javascript:alert(1))",
    '![x](x "onerror=alert(1)")',
    '[x](https://a.b/" onmouseover="alert(1))',
    '[x](https://a.b/ "t" onmouseover=alert(1))',
    "<javascript:alert(1)>",
    "<JAVASCRIPT:alert(1)>",
    "<vbscript:alert(1)>",
    "[x][r]\n\n[r]: javascript:alert(1)",
    '[x][r]\n\n[r]: <javascript:alert(1)> "title"',
    "[x]\n\n[x]: &#106;avascript:alert(1)",
    "see \\`<img src=x onerror=alert(1)>`",
    "see \\\\`<img src=x onerror=alert(1)>`",
    "`a\\`<img src=x onerror=alert(1)>`",
    "see `a\n\n<img src=x onerror=alert(1)>\n\nb`",
    "``a`<img src=x onerror=alert(1)>``",
    # A backtick the Markdown parser does not read as a code span (in a link destination or
    # title, across a table cell, a list item or a heading) must not hide the HTML after it.
    "[x](https://a`b) <img src=x onerror=alert(1)> `",
    '[x](https://a "`") <img src=x onerror=alert(1)> `',
    "![a](https://a`b) <img src=x onerror=alert(1)> `",
    "| `a | <img src=x onerror=alert(1)> ` |\n|---|---|",
    "- `a\n- <img src=x onerror=alert(1)> `",
    "# `a\n<img src=x onerror=alert(1)> `",
    "x <https://a`b> <img src=x onerror=alert(1)> `",
    "```\n<script>alert(1)</script>",
    "~~~\n<img src=x onerror=alert(1)>\n```",
    "    <img src=x onerror=alert(1)>",
    "<!-- <img src=x onerror=alert(1)> -->",
    "<!-- --!><img src=x onerror=alert(1)> -->",
    "<!--><img src=x onerror=alert(1)>-->",
    "<![CDATA[<img src=x onerror=alert(1)>]]>",
    "<?php <img src=x onerror=alert(1)> ?>",
    "<!DOCTYPE x><img src=x onerror=alert(1)>",
    "| a | b |\n|---|---|\n| `x\\|<img src=x onerror=alert(1)>` | y |",
    "| a \\| <img src=x onerror=alert(1)> |\n|---|",
    "| a |\n|---|\n| \\\\| <img src=x onerror=alert(1)> |",
    "[[[x](javascript:alert(1))](javascript:alert(2))](javascript:alert(3))",
    "[a [b](javascript:alert(1)) c](https://ok)",
    '[x](https://ok "a\nb" onmouseover=alert(1))',
    "[x](https://ok 'a\n\nb')<img src=x onerror=alert(1)>",
    "&lt;img src=x onerror=alert(1)&gt;",
    "&amp;lt;script&amp;gt;alert(1)&amp;lt;/script&amp;gt;",
    "&#60;script&#62;alert(1)&#60;/script&#62;",
    "\\<script>alert(1)\\</script>",
    "$<img src=x onerror=alert(1)>$",
    "$$\n<img src=x onerror=alert(1)>\n$$",
    "\\(<img src=x onerror=alert(1)>\\)",
    "`$` x <img src=x onerror=alert(1)> `$`",
    '[a](https://x/$) " onmouseover=alert(1) " [b](https://y/$)',
    '@@0@@ " onmouseover=alert(1)',
    "> <img src=x onerror=alert(1)>\n>> <script>alert(1)</script>",
    "- <img src=x onerror=alert(1)>\n  - `x` <svg onload=alert(1)>",
    "# <img src=x onerror=alert(1)>\nx\n===",
    "<div>\n\n*x*\n\n</div><img src=x onerror=alert(1)>",
    "<pre>\n</pre><img src=x onerror=alert(1)>",
    "</code></pre><img src=x onerror=alert(1)>",
    "```<img src=x onerror=alert(1)>\nx\n```",
    '```js" onmouseover="alert(1)\nx\n```',
    "**<img src=x onerror=alert(1)>**_<svg/onload=alert(1)>_",
    "x<span style=x onmouseover=alert(1)>y</span>",
    '<a href="https://ok" onclick="alert(1)">x</a>',
    "[x](https://ok)<img src=x onerror=alert(1)>",
    "[x](mailto:a@b.c?body=<img src=x onerror=alert(1)>)",
    "www.evil.com/<img src=x onerror=alert(1)>",
    'https://evil.com/"><img src=x onerror=alert(1)>',
    # Values in command displays: quotes, escapes, control characters, long runs.
    "<iframe src=javascript:alert(1)></iframe>",
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
    "$\\href{javascript:alert(1)}{x}$",
    "\x1b[31mred\x1b[0m \x1b]8;;javascript:alert(1)\x07link\x1b]8;;\x07",
    "\u202egnp.exe",
    "\ud800 lone surrogate",
    "`" * 300 + "<img src=x onerror=alert(1)>",
    "|" * 40,
    "<" * 50 + "script>alert(1)",
]

#: Every payload's text, templated ones first.
TEXTS: list[str] = [p.text for p in PAYLOADS] + ALERTS


def encodable(texts: list[str]) -> list[str]:
    """Those that survive UTF-8 (no lone surrogate): a display holding one fails as a whole."""
    out = []
    for t in texts:
        try:
            t.encode()
        except UnicodeEncodeError:
            continue
        out.append(t)
    return out
