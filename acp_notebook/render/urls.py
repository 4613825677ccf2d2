"""Which link targets from the agent may become links, and what each is shown with.

http(s) links are read as the browser will (`protocol/weburl.py`): one with user info, or that
browsers and other programs read differently, is no link, and the address written is the
browser's own serialisation of it. mailto links and relative ones (a file of the workspace) stay,
unless a browser would read a relative one as another host (`//evil.example`, `/\\evil.example`).
"""

from __future__ import annotations

import html
import re

from ..protocol.weburl import WebLink, stays_on_page, web_link

_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f\u200b-\u200f\u2028\u2029\ufeff]")
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})


def safe_url(url: str) -> str | None:
    """The address to write for `url`, or None when it may not be a link.

    The scheme is checked as any reader could see it: entities decoded, backslashes (Markdown
    escapes) and whitespace or control characters (which browsers strip from a scheme) removed.
    An http(s) link must then be a `web_link`, and its address is the browser's reading.
    """
    unescaped = html.unescape(url)
    cleaned = _INVISIBLE.sub("", unescaped.replace("\\", ""))
    m = _SCHEME.match(cleaned)
    if m is None:
        if ":" in cleaned.split("/", 1)[0]:
            return None  # a colon before any slash that is not a clean scheme: refuse to guess
        return cleaned if stays_on_page(unescaped) and stays_on_page(cleaned) else None
    scheme = m.group(1).lower()
    if scheme not in SAFE_SCHEMES:
        return None
    if scheme == "mailto":
        return cleaned
    link = web_link(unescaped)
    return link.href if link.ok else None


def link_host(url: str) -> WebLink | None:
    """The browser's reading of an http(s) link (for the host shown beside it), else None."""
    link = web_link(html.unescape(url))
    return link if link.ok else None


def beside(url: str, label: str) -> str:
    """The host to show after a link labelled `label`, or "" when there is none to show: the
    label may name any host (`[accounts.google.com](https://evil.example)`), the host shown
    beside it is the one the browser opens. Nothing when the label is that address or host, unless
    the host is internationalised (shown then in Unicode and in punycode)."""
    link = link_host(url)
    if link is None:
        return ""
    said = label.strip()
    if link.unicode_host:
        return link.shown_host  # a homograph reads the same in its label: punycode tells
    if said == link.host or web_link(said).href == link.href:
        return ""
    return link.shown_host
