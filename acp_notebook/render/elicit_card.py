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


def outcome(p: ElicitationPart, live: bool) -> str:
    if p.outcome == "pending":
        return "waiting for your answer…" if live else "never answered"
    word = _OUTCOMES.get(p.outcome, p.outcome)
    by = f" ({p.decided_by})" if p.decided_by and p.decided_by != "user" else ""
    return word + by


def _asked(p: ElicitationPart) -> str:
    if p.mode == "url":
        link = p.link
        if not link.ok:
            return f"link refused ({link.refused}): {visible(p.url, URL_CHARS)}"
        return f"visit {visible(link.href, URL_CHARS)} (host {link.shown_host})"
    names = [f.title or f.name for f in p.fields]
    return "fields: " + (", ".join(names[:20]) + (" …" if len(names) > 20 else "") or "none")


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


def _answers(p: ElicitationPart) -> list[tuple[str, str]]:
    if not p.content:
        return []
    titles = {f.name: f.title or f.name for f in p.fields}
    return [(titles.get(k, k), _value(v)) for k, v in list(p.content.items())[:50]]


def _value(v: Any) -> str:
    shown = ", ".join(map(str, v)) if isinstance(v, list) else str(v)
    shown = " ".join(shown.split())
    return shown if len(shown) <= VALUE_CHARS else shown[: VALUE_CHARS - 1] + "…"


def text_line(p: ElicitationPart, live: bool) -> str:
    message = " ".join(p.message.split())[:300]
    answers = "; ".join(f"{k}: {v}" for k, v in _answers(p))
    return f"❓ the agent asked: {message or '(no message)'} [{_asked(p)}] → {outcome(p, live)}" + (
        f" ({answers})" if answers else ""
    )


def markdown_line(p: ElicitationPart, live: bool) -> str:
    message = mdsafe.inline(" ".join(p.message.split())[:300]) or "(no message)"
    answers = "; ".join(f"{mdsafe.inline(k)}: {mdsafe.inline(v)}" for k, v in _answers(p))
    return (
        f"- ❓ Asked: {message} ({mdsafe.inline(_asked(p))}) → "
        f"**{mdsafe.inline(outcome(p, live))}**" + (f": {answers}" if answers else "")
    )


def html(out: list[str], p: ElicitationPart, live: bool) -> None:
    waiting = p.outcome == "pending" and live
    out.append(
        f"<div class='acpnb-perm acpnb-elicit'>❓ <strong>The agent asks</strong>: "
        f"{escape(p.message[:2000], quote=False) or '(no message)'}"
        f"<div class=acpnb-muted>{_asked_html(p)}</div>"
    )
    answers = _answers(p)
    if answers:
        rows = "".join(
            f"<li>{escape(k, quote=False)}: <code>{escape(v, quote=False)}</code></li>"
            for k, v in answers
        )
        out.append(f"<ul>{rows}</ul>")
    out.append(f"<div>{'⏳' if waiting else '→'} <strong>{escape(outcome(p, live))}</strong></div>")
    out.append("</div>")
