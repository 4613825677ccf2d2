"""Small pieces of HTML the turn view is made of: notes, collapsed JSON, content blocks.

Everything from the agent is escaped here: text with `html.escape`, Markdown by `agentmd`, and
only http(s) links (read as the browser will: `protocol/weburl.py`) and base64 raster images
become attributes.

The markup is lean because a record is saved as it is, once per turn (issue 12): attribute
values of our own that are one safe word go unquoted, the others (several words, or anything
escaped from the agent: `attr`) in single quotes, which JSON does not escape as it does `"`
(`html.escape` escapes both quotes, so no value can end its attribute early); no newline between
tags; newlines inside a `<pre>` are character references (`agentmd.pre_text`). nbformat saves
every line of an HTML output as a JSON string of its own (13 B a newline), and a reader
sees none of these bytes.
"""

from __future__ import annotations

import re
from functools import lru_cache
from html import escape
from typing import Any

from ..protocol import limits
from ..protocol.coerce import mapping, text
from ..protocol.weburl import beside, link_host, visible
from . import clip
from .agentmd import pre_text, to_html
from .clip import dump

_CLASS_SAFE = re.compile(r"[^a-z0-9_]")
_ATTR_SAFE = re.compile(r"[A-Za-z0-9_.-]{1,80}")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*\Z")
_INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def attr(value: str) -> str:
    """An attribute value from the agent, for `name=…`: bare when it is one safe word (a tool
    kind, a turn id), else escaped in single quotes."""
    return value if _ATTR_SAFE.fullmatch(value) else f"'{escape(value)}'"


def css_class(value: str) -> str:
    """`value` reduced to a safe class-name suffix."""
    return _CLASS_SAFE.sub("", value.lower())[:40] or "other"


def note(message: str) -> str:
    """A small muted line ("… 12 more lines"); nothing for an empty message."""
    return f"<div class=acpnb-note>{escape(message, quote=False)}</div>" if message else ""


def json_details(label: str, value: Any) -> str:
    """`value` as JSON in a collapsed section."""
    clipped = dump(value)
    return (
        f"<details><summary class=acpnb-muted>{escape(label)}</summary>"
        f"<pre class=acpnb-out>{pre_text(clipped.text)}</pre>"
        f"{note(clipped.note)}</details>"
    )


def block(b: dict[Any, Any]) -> str:
    """A non-text ACP content block (image, audio, resource link, embedded resource)."""
    kind = text(b.get("type"))
    mime = text(b.get("mimeType"))
    if kind == "text":
        return f"<div>{to_html(text(b.get('text')))}</div>"
    if kind == "image":
        data = b.get("data")
        return _image(mime, data if isinstance(data, str) else "")
    if kind == "audio":
        return f"<div class=acpnb-note>🔊 audio {escape(mime)}</div>"
    if kind == "resource_link":
        uri = text(b.get("uri"))
        name = text(b.get("name")) or text(b.get("title")) or uri
        return f"<div>🔗 {_link(uri, name)} <code>{escape(visible(uri, 500))}</code></div>"
    if kind == "resource":
        res = mapping(b.get("resource"))
        uri = text(res.get("uri"))
        body = res.get("text")
        if isinstance(body, str):
            clipped = clip.head(body, limits.TEXT_LINES)
            return (
                f"<details><summary>📎 <code>{escape(uri)}</code></summary>"
                f"<pre>{pre_text(clipped.text)}</pre>{note(clipped.note)}"
                f"</details>"
            )
        return f"<div class=acpnb-note>📎 <code>{escape(uri)}</code> {escape(mime)}</div>"
    return json_details(f"content block {kind or '?'}", b)


@lru_cache(maxsize=32)
def _image(mime: str, data: str) -> str:
    """An image the agent sent, inline when it is a plain raster image in valid base64."""
    if mime in _INLINE_IMAGES and 0 < len(data) < 8_000_000 and _BASE64.match(data):
        return (
            f"<div><img alt='image from the agent' style=max-width:100% "
            f"src='data:{mime};base64,{''.join(data.split())}'></div>"
        )
    return f"<div class=acpnb-note>🖼 image {escape(mime)}</div>"


def _link(url: str, label: str) -> str:
    """A link to a web address the browser reads as we do (`weburl.link_host`), with the host it
    opens beside it; anything else is its label as text."""
    link = link_host(url)
    if link is None:
        return escape(label, quote=False)
    host = beside(link.href, label)
    return (
        f"<a href='{escape(link.href)}' target=_blank rel='noopener noreferrer nofollow'>"
        f"{escape(label, quote=False)}</a>"
        + (f"<span class=acpnb-muted> ({escape(host, quote=False)})</span>" if host else "")
    )
