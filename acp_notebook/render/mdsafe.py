"""Agent text made safe to place in `text/markdown`, by construction, for any renderer.

Jupyter renders Markdown output with raw HTML on (and runs the script of trusted output), and
JupyterLab first lifts `$...$`, `\\(...\\)` and `@@n@@` out of the source as math. So nothing
here guesses what a renderer will make of the agent's text; every character that could mean
something is neutralised:

- `<`, `>`, `&`, `\\`, `$`, `@` become character references: no tag, entity or math delimiter
  can form, even where a renderer would read the text as raw HTML;
- every other ASCII punctuation character is backslash-escaped: it stands for itself and opens
  no emphasis, link, code span, list, heading, table cell or block quote.

What is left (letters, digits, spaces, non-ASCII) means nothing to a Markdown renderer. Only
the structure written by our own code (list markers, `**`, `<pre><code>` around escaped text,
links to checked destinations) is markup.
"""

from __future__ import annotations

import re
import string

from ..protocol.weburl import safe_url

_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;", "\\": "&#92;", "$": "&#36;", "@": "&#64;"}
_TEXT = str.maketrans({c: _ENTITIES.get(c, "\\" + c) for c in string.punctuation})
_BACKSLASHED = [c for c in string.punctuation if c not in _ENTITIES]
#: `&` first: the references put in afterwards are not escaped again.
_ENTITY_ORDER = [
    ("&", "&amp;"),
    *((c, r) for c, r in _ENTITIES.items() if c not in "&\\"),
    ("\x00", "&#92;"),
]
#: Inside <code> and <pre>: references only, read the same as raw HTML and as Markdown text.
_CODE = str.maketrans({c: _ENTITIES.get(c, f"&#{ord(c)};") for c in string.punctuation})
#: What a link destination keeps as it is; everything else is percent-encoded.
_LANG_UNSAFE = re.compile(r"[^A-Za-z0-9_+-]")
_URL_KEEP = frozenset(string.ascii_letters + string.digits + "-._~:/?#=%+,;!*")


def text(s: str) -> str:
    """`s` as literal Markdown text (newlines kept: the caller decides what they mean)."""
    if len(s) < 2000:
        return s.replace("\x00", "").translate(_TEXT)
    # The same, faster on long text: one C-level pass per character instead of a lookup per
    # character. A backslash is parked as NUL (dropped from the input) while others are added.
    s = s.replace("\x00", "").replace("\\", "\x00")
    for c in _BACKSLASHED:
        if c in s:
            s = s.replace(c, "\\" + c)
    for c, ref in _ENTITY_ORDER:
        if c in s:
            s = s.replace(c, ref)
    return s


def inline(s: str) -> str:
    """One line of text for the record (a title, a plan entry): whitespace collapsed, escaped."""
    return text(" ".join(s.split()))


def code(s: str) -> str:
    """An inline code span: `<code>` around references (no backtick pairing to guess)."""
    return "<code>" + " ".join(s.split("\n")).translate(_CODE) + "</code>"


def pre(body: str, lang: str = "") -> list[str]:
    """A block of preformatted text as lines: an HTML block that ends only at our `</pre>`,
    since the body holds no `<`. Misread as Markdown it is still inert text."""
    lang = _LANG_UNSAFE.sub("", lang)[:30]
    lines = body.translate(_CODE).split("\n")
    cls = f' class="language-{lang}"' if lang else ""
    lines[0] = f"<pre><code{cls}>" + lines[0]
    lines[-1] += "</code></pre>"
    return lines


def destination(url: str) -> str | None:
    """A link destination for `[text](...)`, or None when its scheme is not safe.

    Percent-encoded down to characters that mean nothing in Markdown or math, `&` as `&amp;`.
    """
    cleaned = safe_url(url)
    if not cleaned:
        return None
    out = []
    for ch in cleaned:
        if ch in _URL_KEEP:
            out.append(ch)
        elif ch == "&":
            out.append("&amp;")
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)
