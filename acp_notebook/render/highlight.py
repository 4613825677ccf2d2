"""Code in the agent's answer, highlighted in the kernel by Pygments: a few short classes.

A fenced block with a language Pygments knows is cut into tokens, and each run of a kind worth
colouring becomes `<span class=k>` (keyword), `s` (string), `c` (comment), `m` (number), `f`
(a function's or class's name), `b` (a builtin). Six classes and no more: the record stays small
(a span costs about 20 bytes) and so does the stylesheet (`CSS`), which colours them with
JupyterLab's editor colours (its theme, light or dark, decides) and, outside JupyterLab, with
colours of its own for a light page and for one that prefers a dark scheme; scoped to a
turn's code blocks (`.acpnb-turn pre>code`).

Every byte of the code is escaped; the language is the word markdown-it's `_tidy` left (letters,
digits, `_+-`). Past `MAX_CODE` characters, or in a language Pygments does not know, the code is
escaped text only: a lexer's cost grows with its input, and a long block is read, not scanned.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Keyword, Name, Number, String, _TokenType
from pygments.util import ClassNotFound

#: The longest block highlighted; a longer one is escaped text.
MAX_CODE = 20_000

#: Pygments' token kinds, most specific first, and the class each is drawn with.
_KINDS: tuple[tuple[_TokenType, str], ...] = (
    (Comment, "c"),
    (String, "s"),
    (Number, "m"),
    (Keyword, "k"),
    (Name.Builtin, "b"),
    (Name.Function, "f"),
    (Name.Class, "f"),
    (Name.Decorator, "f"),
)

#: The classes' colours: JupyterLab's editor's (its theme's) where they are defined, else ours.
CSS = (
    ".acpnb-turn pre>code{--acpnb-k:#708;--acpnb-s:#a11;--acpnb-c:#6a737d;--acpnb-m:#164;"
    "--acpnb-f:#00f;--acpnb-b:#05a}@media (prefers-color-scheme:dark){.acpnb-turn pre>code{"
    "--acpnb-k:#c678dd;--acpnb-s:#98c379;--acpnb-c:#8b949e;--acpnb-m:#d19a66;--acpnb-f:#61afef;"
    "--acpnb-b:#56b6c2}}"
    + "".join(
        f".acpnb-turn pre>code .{c}{{color:var(--jp-mirror-editor-{v}-color,var(--acpnb-{c}))}}"
        for c, v in (
            ("k", "keyword"),
            ("s", "string"),
            ("c", "comment"),
            ("m", "number"),
            ("f", "def"),
            ("b", "builtin"),
        )
    )
)


@lru_cache(maxsize=64)
def _lexer(lang: str) -> Lexer | None:
    if not lang:
        return None
    try:
        # stripnl/ensurenl off: the text comes back as it went in, character for character.
        return get_lexer_by_name(lang, stripnl=False, ensurenl=False, stripall=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=32)
def _kind(token: _TokenType) -> str:
    for kind, cls in _KINDS:
        if token in kind:
            return cls
    return ""


def code_html(code: str, lang: str) -> str:
    """`code` as HTML for a `<code>` element: escaped, with spans where `lang` colours it."""
    lexer = _lexer(lang) if len(code) <= MAX_CODE else None
    if lexer is None:
        return escape(code, quote=False)
    out: list[str] = []
    run: list[str] = []
    run_cls = ""
    try:
        tokens = list(lexer.get_tokens(code))
    except Exception:  # a lexer that fails on odd input: the code as text
        return escape(code, quote=False)
    if "".join(v for _, v in tokens) != code:  # a lexer that changed the text: not shown so
        return escape(code, quote=False)
    for token, value in tokens:
        cls = _kind(token) if value.strip() else run_cls  # blanks join the run they are in
        if cls != run_cls:
            _flush(out, run, run_cls)
            run, run_cls = [], cls
        run.append(value)
    _flush(out, run, run_cls)
    return "".join(out)


def _flush(out: list[str], run: list[str], cls: str) -> None:
    if not run:
        return
    text = escape("".join(run), quote=False)
    out.append(f"<span class={cls}>{text}</span>" if cls else text)
