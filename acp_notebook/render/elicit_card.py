"""How an elicitation (the agent asking the user for input) is drawn in each view.

The message, field titles and URL are the agent's; the answer is the user's (masked with the
rest of the transcript before it reaches a renderer). A URL is shown as text with its host, never
as a link the record would follow: the user opens it from the live view, after seeing the host.
Both are the browser's reading of it (`weburl`): the address it will open and its host, an
internationalised host in Unicode and in punycode; a refused link is shown as text with why.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..protocol.elicitation import ElicitationPart
from ..protocol.weburl import visible
from . import mdsafe

_OUTCOMES = {"accept": "answered", "decline": "declined", "cancel": "cancelled"}
VALUE_CHARS = 200  # characters of one answered value shown in the record
URL_CHARS = 500  # characters of a link shown in the record (its host is shown whole)
FIELDS_LISTED = 50  # fields of an answered form in the record, each with its answer
NAMES_LISTED = 20  # fields named of a form not answered ("asked for: ...")
NAME_CHARS = 100  # characters of a field's title in the record
NOT_ANSWERED = "—"  # a field left empty in an answered form


def outcome(p: ElicitationPart, live: bool) -> str:
    if p.outcome == "pending":
        return "waiting for your answer…" if live else "never answered"
    word = _OUTCOMES.get(p.outcome, p.outcome)
    by = f" ({p.decided_by})" if p.decided_by and p.decided_by != "user" else ""
    return word + by


def _asked(p: ElicitationPart) -> str:
    """What was asked, said once: the link, or (a form not answered) the fields it asked for.
    An answered form says it in its answers (`_rows`), field by field."""
    if p.mode == "url":
        link = p.link
        if not link.ok:
            return f"link refused ({link.refused}): {visible(p.url, URL_CHARS)}"
        return f"visit {visible(link.href, URL_CHARS)} (host {link.shown_host})"
    if p.outcome == "accept":
        return ""
    names = [_value(f.title or f.name, NAME_CHARS) for f in p.fields]
    listed = ", ".join(names[:NAMES_LISTED]) + (" …" if len(names) > NAMES_LISTED else "")
    return "asked for: " + (listed or "no fields")


def _asked_html(p: ElicitationPart) -> str:
    """`_asked` with the address and the host the browser opens each in an element of its own
    (`acpnb-href`, `acpnb-host`), so the page can check one against the other."""
    link = p.link
    if p.mode != "url" or not link.ok:
        return escape(_asked(p), quote=False)
    idn = f"{escape(link.unicode_host, quote=False)}, punycode " if link.unicode_host else ""
    return (
        f"visit <code class=acpnb-href>{escape(visible(link.href, URL_CHARS), quote=False)}</code>"
        f" (host {idn}<code class=acpnb-host>{escape(link.host, quote=False)}</code>)"
    )


def _rows(p: ElicitationPart) -> list[tuple[str, str | None]]:
    """An answered form, field by field: each field asked with its answer (None: left empty),
    then any answered name the form did not ask for (a saved record is read as it is)."""
    if p.mode != "form" or p.outcome != "accept":
        return []
    content = p.content or {}
    asked = {f.name for f in p.fields}
    rows = [
        (f.title or f.name, _value(content[f.name]) if f.name in content else None)
        for f in p.fields
    ]
    extra = [(k, v) for k, v in list(content.items())[:FIELDS_LISTED] if k not in asked]
    rows += [(k, _value(v)) for k, v in extra]
    return [(_value(k, NAME_CHARS), v) for k, v in rows[:FIELDS_LISTED]]


def _value(v: Any, chars: int = VALUE_CHARS) -> str:
    shown = ", ".join(map(str, v[:FIELDS_LISTED])) if isinstance(v, list) else str(v)
    shown = " ".join(shown.split())
    return shown if len(shown) <= chars else shown[: chars - 1] + "…"


def text_line(p: ElicitationPart, live: bool) -> str:
    message = " ".join(p.message.split())[:300]
    asked = _asked(p)
    answers = "; ".join(f"{k}: {v or NOT_ANSWERED}" for k, v in _rows(p))
    return (
        f"❓ the agent asked: {message or '(no message)'}"
        + (f" [{asked}]" if asked else "")
        + f" → {outcome(p, live)}"
        + (f" ({answers})" if answers else "")
    )


def markdown_line(p: ElicitationPart, live: bool) -> str:
    message = mdsafe.inline(" ".join(p.message.split())[:300]) or "(no message)"
    asked = _asked(p)
    answers = "; ".join(
        f"{mdsafe.inline(k)}: {mdsafe.inline(v or NOT_ANSWERED)}" for k, v in _rows(p)
    )
    return (
        f"- ❓ Asked: {message}"
        + (f" ({mdsafe.inline(asked)})" if asked else "")
        + f" → **{mdsafe.inline(outcome(p, live))}**"
        + (f": {answers}" if answers else "")
    )


def html(out: list[str], p: ElicitationPart, live: bool) -> None:
    waiting = p.outcome == "pending" and live
    out.append(
        f"<div class='acpnb-perm acpnb-elicit'>❓ <strong>The agent asks</strong>: "
        f"{escape(p.message[:2000], quote=False) or '(no message)'}"
    )
    asked = _asked_html(p)
    if asked:
        # A live view draws the form itself in the card: its stylesheet hides this line then
        # (turn_view.css), so the fields are not listed twice; a record or a copy keeps it.
        out.append(f"<div class='acpnb-muted acpnb-elicit-asked'>{asked}</div>")
    rows = _rows(p)
    if rows:
        items = "".join(
            f"<li>{escape(k, quote=False)}: "
            + (
                f"<code>{escape(v, quote=False)}</code>"
                if v is not None
                else f"<span class=acpnb-muted>{NOT_ANSWERED}</span>"
            )
            + "</li>"
            for k, v in rows
        )
        out.append(f"<ul class=acpnb-elicit-answers>{items}</ul>")
    out.append(
        f"<div class=acpnb-elicit-outcome>{'⏳' if waiting else '→'} "
        f"<strong>{escape(outcome(p, live))}</strong></div>"
    )
    out.append("</div>")
