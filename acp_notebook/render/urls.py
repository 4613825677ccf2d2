"""Which link targets from the agent may become links: http(s), mailto, and relative ones."""

from __future__ import annotations

import html
import re

_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f\u200b-\u200f\u2028\u2029\ufeff]")
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})


def safe_url(url: str) -> str | None:
    """`url` cleaned of characters browsers ignore, or None when its scheme is not safe.

    Checked as a browser would read it: entities decoded, backslashes (Markdown escapes) and
    whitespace or control characters (which browsers strip from a scheme) removed.
    """
    cleaned = _INVISIBLE.sub("", html.unescape(url).replace("\\", ""))
    m = _SCHEME.match(cleaned)
    if m is not None and m.group(1).lower() not in SAFE_SCHEMES:
        return None
    if ":" in cleaned.split("/", 1)[0] and m is None:
        return None  # a colon before any slash that is not a clean scheme: refuse to guess
    return cleaned
