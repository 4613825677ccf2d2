"""What `%agent` commands and the widgets show: HTML built here, plus a plain-text twin.

Nothing the agent chose (titles, names, ids, modes, currencies, dates, paths) goes into Markdown:
JupyterLab renders Markdown with raw HTML on, and trusted HTML without a sanitiser, so escaping
for Markdown depends on guessing the renderer. Here every piece of text, ours or the agent's, is
passed through `html.escape` as the HTML is written, so no value can become markup. The container
carries `mathjax_ignore`, so a `$` in a value stays a `$` (JupyterLab typesets math in HTML).

Every value is formatted by a total function: any JSON value (or anything else) gives a bounded,
one-line text without control characters, and numbers (huge ints, NaN, infinities, bools,
strings in their place) never raise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from ..protocol.limits import BoundedRepr

LIMIT = 200  # characters of one value shown (a title, a path, an id)
_UNSAFE_CHARS = re.compile(
    # C0/C1 controls (ANSI escapes), bidi overrides (text that reads backwards) and lone
    # surrogates (the kernel cannot encode them to send the display).
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_SPACE = re.compile(r"\s+")
_BIG = 10**15


# -- values ------------------------------------------------------------------------------


def text(value: Any, limit: int = LIMIT) -> str:
    """Any value as one line of at most `limit` characters: None is "", numbers as `number`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number(value)
    if not isinstance(value, str):
        value = _short_repr(value)
    return _one_line(value, limit)


def lines(value: str, limit: int = 4000) -> str:
    """Several lines of text (an error message): control characters out, newlines kept."""
    value = value[:limit].replace("\t", "    ")
    return "\n".join(_UNSAFE_CHARS.sub("\ufffd", line) for line in value.split("\n"))


def _one_line(value: str, limit: int) -> str:
    head = value[: limit * 4 + 16]  # bound the work before collapsing spaces
    cleaned = _UNSAFE_CHARS.sub("\ufffd", _SPACE.sub(" ", head)).strip()
    if len(cleaned) > limit or len(value) > len(head):
        return cleaned[: limit - 1].rstrip() + "…"
    return cleaned


def _words(piece: str) -> str:
    """A bare string piece of a line: spaces kept as they are at its ends, bounded."""
    if len(piece) > 4 * LIMIT:
        piece = piece[: 4 * LIMIT] + "…"
    return _UNSAFE_CHARS.sub("\ufffd", _SPACE.sub(" ", piece))


# Ints and floats as counts (`number`, below): they never raise.
_REPR = BoundedRepr(60, number=lambda x: number(x))


def _short_repr(value: Any) -> str:
    try:
        return _REPR.repr(value)
    except Exception:  # an object whose repr fails: its type is still something to show
        return f"({type(value).__name__})"


def is_real(value: Any) -> bool:
    """An int or a finite float, not a bool."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def number(value: Any) -> str:
    """A count for display: 12,345; 1.23e+20 when huge; "invalid (not a number)" for NaN,
    "invalid (infinite)" for infinities; anything else as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return "invalid (not a number)" if math.isnan(value) else "invalid (infinite)"
    if not is_real(value):
        return text(value) or "?"
    if abs(value) < _BIG:
        return f"{int(value):,}" if float(value).is_integer() else f"{value:,.6g}"
    try:
        return f"{float(value):.3g}"
    except OverflowError:  # an int past float range: its order of magnitude is enough
        return f"about 10^{int(math.log10(abs(value)))}"


def percent(used: Any, size: Any) -> str:
    """`used` as a share of `size` ("45%"), or "" when that is not a sensible number."""
    if not (is_real(used) and is_real(size)) or size <= 0 or used < 0:
        return ""
    try:
        fraction = used / size
    except (OverflowError, ZeroDivisionError):
        return ""
    if not math.isfinite(fraction):
        return ""
    return f"{fraction:.0%}" if fraction < 100 else "over 10,000%"


def money(amount: Any, currency: Any) -> str:
    """ "0.0123 USD"; an amount that is not a finite number is said to be invalid."""
    cur = text(currency, 16)
    if is_real(amount) and abs(amount) < 1e9:
        value = f"{amount:,.4f}"
    else:
        value = number(amount)
    return f"{value} {cur}".strip()


# -- documents ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Code:
    """An id or a name, shown as code."""

    value: Any


@dataclass(frozen=True)
class Strong:
    value: Any


@dataclass(frozen=True)
class Value:
    """A value in running text (a title, a name): one bounded line."""

    value: Any


Piece = str | Code | Strong | Value  # a bare str is our own words (still escaped)
Line = Sequence[Piece | Any]


@dataclass
class Doc:
    """A display of paragraphs, bullet lists, tables and preformatted text.

    `mask` is applied to every piece of text before it is escaped (the kernel's secrets).
    """

    mask: Callable[[str], str] = str
    _html: list[str] = field(default_factory=list, init=False, repr=False)
    _plain: list[str] = field(default_factory=list, init=False, repr=False)
    _items: list[str] = field(default_factory=list, init=False, repr=False)  # an open list

    def para(self, *pieces: Piece | Any) -> Doc:
        self._end_list()
        self._html.append(f"<p>{self._inline_html(pieces)}</p>")
        self._plain.append(self._inline_plain(pieces))
        return self

    def item(self, *pieces: Piece | Any) -> Doc:
        self._items.append(f"<li>{self._inline_html(pieces)}</li>")
        self._plain.append("- " + self._inline_plain(pieces))
        return self

    def table(self, header: Sequence[str], rows: Iterable[Line]) -> Doc:
        self._end_list()
        head = "".join(f"<th>{self._esc(h)}</th>" for h in header)
        body = []
        plain = [" | ".join(header)]
        for row in rows:
            cells = [c if isinstance(c, tuple) else (c,) for c in row]  # a tuple: several pieces
            body.append(
                "<tr>" + "".join(f"<td>{self._inline_html(c)}</td>" for c in cells) + "</tr>"
            )
            plain.append(" | ".join(self._inline_plain(c) for c in cells))
        self._html.append(
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )
        self._plain.append("\n".join(plain))
        return self

    def pre(self, body: str) -> Doc:
        self._end_list()
        masked = lines(self.mask(body), 100_000)
        self._html.append(f"<pre>{escape(masked, quote=False)}</pre>")
        self._plain.append(masked)
        return self

    def bundle(self) -> dict[str, str]:
        self._end_list()
        html = "".join(self._html)
        return {
            "text/html": f'<div class="acpnb-command mathjax_ignore">{html}</div>',
            "text/plain": "\n".join(self._plain),
        }

    def _end_list(self) -> None:
        if self._items:
            self._html.append("<ul>" + "".join(self._items) + "</ul>")
            self._items = []

    def _esc(self, value: Any) -> str:
        return escape(_masked(value, self.mask), quote=True)

    def _inline_html(self, pieces: Iterable[Any]) -> str:
        return inline_html(pieces, self.mask)

    def _inline_plain(self, pieces: Iterable[Any]) -> str:
        return "".join(_piece(p, self.mask)[1] for p in pieces)


def _masked(value: Any, mask: Callable[[str], str]) -> str:
    """One value as bounded text, masked before it is cut (a cut secret would not be found)."""
    return _one_line(mask(text(value, 100_000)), LIMIT)


def _piece(piece: Any, mask: Callable[[str], str]) -> tuple[str, str]:
    """(HTML tag or "", plain text) of one piece of a line."""
    if isinstance(piece, Code):
        return "code", _masked(piece.value, mask)
    if isinstance(piece, Strong):
        return "b", _masked(piece.value, mask)
    if isinstance(piece, Value):
        return "", _masked(piece.value, mask)
    if isinstance(piece, str):
        return "", _words(mask(piece))
    return "", _masked(piece, mask)


def inline_html(pieces: Iterable[Any], mask: Callable[[str], str] = str) -> str:
    out = []
    for piece in pieces:
        tag, value = _piece(piece, mask)
        body = escape(value, quote=True)
        out.append(f"<{tag}>{body}</{tag}>" if tag else body)
    return "".join(out)


def message(*pieces: Piece | Any, mask: Callable[[str], str] = str) -> dict[str, str]:
    """A one-paragraph display."""
    return Doc(mask).para(*pieces).bundle()


def html_span(*pieces: Piece | Any, mask: Callable[[str], str] = str) -> str:
    """Inline HTML for a widget's value (innerHTML), with math typesetting off."""
    return f'<span class="mathjax_ignore">{inline_html(pieces, mask)}</span>'
