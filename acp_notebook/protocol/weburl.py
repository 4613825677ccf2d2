"""A web link from the agent, read as the browser will read it. Pure.

Python's `urlsplit` reads a URL by RFC 3986; a browser by the WHATWG URL Standard, and the two
disagree on exactly the strings an attacker writes: `https://evil.example\\@accounts.google.com`
is `accounts.google.com` to `urlsplit` and `evil.example` to the browser (a backslash is a slash
in http(s)); `http://0x7f.1` is `127.0.0.1` to the browser, `%65vil.com` is `evil.com`, tabs and
newlines anywhere are dropped. So the host we show the user must be the browser's, computed by a
WHATWG-conformant parser (ada, through the `ada-url` package), and a link is refused outright when
it carries user info (`user@host` is how a link looks like one host and opens another) or when
the two parsers read its scheme, host or port differently: some program on the way (a proxy, a
log reader, another client) would then open another host than the one we showed.

Only absolute http and https URLs are links here; everything else is refused with a reason the
card can show.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

import ada_url

#: Characters of a URL read at all: longer ones are refused, not parsed (a link is a few hundred).
MAX_URL = 8192
_DEFAULT_PORTS = {"http": 80, "https": 443}
_C0_OR_SPACE = "".join(map(chr, range(0x21)))


@dataclass(frozen=True, slots=True)
class WebLink:
    """What a browser makes of one URL, or why it is not a link."""

    #: The URL as the browser will open it (WHATWG serialisation, ASCII); "" when refused.
    href: str = ""
    #: The host (and a port other than the scheme's) the browser opens, as `new URL(href).host`
    #: gives it: an internationalised name in punycode.
    host: str = ""
    #: The same host in Unicode, as an address bar may show it; "" when it is the same as `host`.
    unicode_host: str = ""
    #: Why the URL is not a link; "" when it is.
    refused: str = ""

    @property
    def ok(self) -> bool:
        return not self.refused

    @property
    def shown_host(self) -> str:
        """The host for the user to read: both forms of an internationalised name (a homograph
        such as `аpple.com`, Cyrillic а, is `xn--pple-43d.com`)."""
        if self.unicode_host:
            return f"{self.unicode_host}, punycode {self.host}"
        return self.host


#: What a reader cannot see in a URL shown as text (controls, zero-width and bidi characters).
_HIDDEN = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069\ufeff]"
)


def visible(url: str, limit: int = 300) -> str:
    """`url` as text to show the user: each character they could not see written as `\\uXXXX`
    (a bidi override can make `moc.live` read `evil.com`), clipped to `limit` characters."""
    shown = _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", url)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _refuse(why: str) -> WebLink:
    return WebLink(refused=why)


def web_link(url: str) -> WebLink:
    """`url` read as the browser will, or refused with the reason (see the module's doc)."""
    if len(url) > MAX_URL:  # before the cache, which would keep the long string
        return _refuse(f"the link is longer than {MAX_URL} characters")
    return _read(url)


@lru_cache(maxsize=1024)
def _read(url: str) -> WebLink:
    if "\x00" in url:  # ada reads a C string: it would see the link cut at the NUL
        return _refuse("a browser cannot read this link as a web address")
    try:
        parsed = ada_url.URL(url)
    except ValueError:
        return _refuse("a browser cannot read this link as a web address")
    scheme = parsed.protocol.removesuffix(":")
    if scheme not in _DEFAULT_PORTS:
        return _refuse(f"only http and https links are opened, not {scheme[:20]}:")
    if parsed.username or parsed.password or _has_userinfo(url):
        return _refuse(
            "it has a user name before its host (user@host), which makes a link look like one host "
            "and open another"
        )
    return _agreed(url, parsed, scheme)


def _has_userinfo(url: str) -> bool:
    """An `@` in the authority by either reading: `https://@host` has empty user info, which
    ada drops and `urlsplit` keeps; either way the link was written to mislead."""
    try:
        return "@" in urlsplit(url.strip(_C0_OR_SPACE)).netloc
    except ValueError:
        return False


def _agreed(url: str, parsed: ada_url.URL, scheme: str) -> WebLink:
    """The link, when `urlsplit` reads the same scheme, host and port as the browser."""
    host, port = parsed.hostname, parsed.port
    try:
        theirs = urlsplit(url.strip(_C0_OR_SPACE))  # as the browser does, before it reads
        their_port = theirs.port
    except ValueError:
        their_port, theirs = -1, None
    their_host = _ascii_host(theirs.hostname or "") if theirs is not None else ""
    if their_port == _DEFAULT_PORTS[scheme]:
        their_port = None
    if (
        theirs is None
        or theirs.scheme != scheme
        or their_host != host
        or (str(their_port) if their_port is not None else "") != port
    ):
        other = their_host or (theirs.hostname if theirs is not None else None) or "nothing"
        return _refuse(
            f"browsers read its host as {visible(parsed.host, 100)} and other programs as "
            f"{visible(other, 100)}"
        )
    unicode_host = ada_url.idna_to_unicode(host)
    shown = unicode_host + (f":{port}" if port else "") if unicode_host != host else ""
    return WebLink(parsed.href, parsed.host, shown)


#: A base no link can name: a relative link resolved against it must stay on its host.
_BASE = "https://base.acpnb.invalid/dir/page"
_BASE_HOST = "base.acpnb.invalid"


def stays_on_page(relative: str) -> bool:
    """Whether a browser resolves the relative link on the page's own host and scheme, as a
    path: not `//evil.example`, `\\\\evil.example` or `/\\evil.example` (another host)."""
    if len(relative) > MAX_URL:
        return False
    try:
        joined = ada_url.URL(relative, base=_BASE)
    except ValueError:
        return False
    return joined.protocol == "https:" and joined.host == _BASE_HOST


def _ascii_host(hostname: str) -> str:
    """`urlsplit`'s host in the browser's spelling (punycode, IPv6 in brackets), without
    reading it again as a browser would: `0x7f.1` and `%65vil.com` stay what they are."""
    if ":" in hostname:
        return f"[{hostname}]"
    if hostname.isascii():
        return hostname
    ascii_host = ada_url.idna_to_ascii(hostname)
    return ascii_host.decode("ascii", "replace") if isinstance(ascii_host, bytes) else hostname


# -- which link targets from the agent may become links, and what each is shown with ------------
#
# Which link targets from the agent may become links, and what each is shown with.
#
# http(s) links are read as the browser will (`protocol/weburl.py`): one with user info, or that
# browsers and other programs read differently, is no link, and the address written is the
# browser's own serialisation of it. mailto links and relative ones (a file of the workspace) stay,
# unless a browser would read a relative one as another host (`//evil.example`, `/\\evil.example`).

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
