"""Prompt input: user parts in, ACP content blocks out. Pure; file bytes are handed in.

Input parts follow the turn-handle API's snake_case shapes:
- `{"type": "text", "text": ...}`
- `{"type": "context", "tag": "reference", "context": ...}`: sent as `<tag>escaped body</tag>`;
- `{"type": "file", "url": path-or-data-URL, "media_type"?: ..., "filename"?: ...}`.
ACP content blocks (`image`, `audio`, `resource`, `resource_link`) pass through unchanged.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from ..errors import PromptError
from .recorded_prompt import CONTEXT_META

TAG_RE = re.compile(r"[a-z][a-z0-9_-]*\Z")
_PASSTHROUGH = frozenset({"image", "audio", "resource", "resource_link"})


@dataclass(frozen=True, slots=True)
class PromptCaps:
    image: bool = False
    audio: bool = False
    embedded_context: bool = False

    @classmethod
    def from_wire(cls, caps: Any) -> PromptCaps:
        caps = caps if isinstance(caps, dict) else {}
        return cls(
            bool(caps.get("image")), bool(caps.get("audio")), bool(caps.get("embeddedContext"))
        )


@dataclass(frozen=True, slots=True)
class FilePart:
    url: str
    media_type: str | None = None
    filename: str | None = None

    @property
    def is_data_url(self) -> bool:
        return self.url.startswith("data:")

    @property
    def is_remote(self) -> bool:
        return urllib.parse.urlsplit(self.url).scheme in {"http", "https"}


Part = dict[str, Any] | FilePart


def normalize(query: str | list[Any] | tuple[Any, ...]) -> list[Part]:
    """Validate the input of one `prompt()` call; text and context become text blocks here."""
    if isinstance(query, str):
        if not query.strip():
            raise PromptError("the prompt is empty")
        return [{"type": "text", "text": query}]
    if not isinstance(query, list | tuple):
        raise PromptError(f"a prompt is a string or a list of parts, not {type(query).__name__}")
    parts: list[Part] = []
    for i, item in enumerate(query):
        if isinstance(item, str):
            item = {"type": "text", "text": item}
        if not isinstance(item, dict):
            raise PromptError(f"part {i} is not a dict: {item!r}")
        kind = item.get("type")
        if kind == "text":
            text = item.get("text")
            if not isinstance(text, str):
                raise PromptError(f"part {i}: text must be a string")
            if text:
                parts.append({"type": "text", "text": text})
        elif kind == "context":
            text = context_text(item.get("tag"), item.get("context"), i)
            # The tag rides along so the transcript can keep the part as a context part.
            parts.append({"type": "text", "text": text, "_meta": {CONTEXT_META: item["tag"]}})
        elif kind == "file":
            url = item.get("url") or item.get("path")
            if not isinstance(url, str) or not url:
                raise PromptError(f"part {i}: a file part needs a url (a path or a data URL)")
            parts.append(FilePart(url, item.get("media_type"), item.get("filename")))
        elif kind in _PASSTHROUGH:
            parts.append(_checked_block(item, i))
        else:
            raise PromptError(
                f"part {i}: unknown part type {kind!r} "
                "(text, context, file, or an ACP content block)"
            )
    if not any(
        isinstance(p, FilePart) or p.get("type") != "text" or p["text"].strip() for p in parts
    ):
        raise PromptError("the prompt is empty: give at least one non-empty part")
    return parts


_BLOCK_MODELS = {
    "image": "ImageContentBlock",
    "audio": "AudioContentBlock",
    "resource": "EmbeddedResourceContentBlock",
    "resource_link": "ResourceContentBlock",
}


def _checked_block(item: dict[str, Any], index: int) -> dict[str, Any]:
    """An ACP content block given as input, validated and in its wire form (JSON-safe), so a
    malformed one is a clear error here rather than a failure while sending the turn."""
    from . import schema

    model = getattr(schema.models(), _BLOCK_MODELS[item["type"]])
    try:
        return schema.dump(model.model_validate(item))
    except schema.ValidationError as exc:
        raise PromptError(f"part {index}: {schema.describe(exc)}") from None


def context_text(tag: Any, body: Any, index: int = 0) -> str:
    if not isinstance(tag, str) or not TAG_RE.match(tag):
        raise PromptError(
            f"part {index}: context tag {tag!r} must start with a lowercase letter and hold only "
            "lowercase letters, digits, '_' and '-'"
        )
    if not isinstance(body, str):
        raise PromptError(f"part {index}: context must be a string")
    return f"<{tag}>{escape(body)}</{tag}>"


def decode_data_url(url: str) -> tuple[bytes, str]:
    """`data:[<mime>][;base64],<data>` to (bytes, mime)."""
    head, sep, data = url.partition(",")
    if not sep:
        raise PromptError("malformed data URL: no ',' separator")
    meta = head[len("data:") :].split(";")
    mime = meta[0] or "text/plain"
    try:
        if "base64" in meta[1:]:
            return base64.b64decode(data, validate=True), mime
        return urllib.parse.unquote_to_bytes(data), mime
    except (binascii.Error, ValueError) as exc:
        raise PromptError(f"malformed data URL: {exc}") from None


def guess_type(name: str, declared: str | None = None) -> str:
    return declared or mimetypes.guess_type(name)[0] or "application/octet-stream"


def file_block(
    path: Path, data: bytes, mime: str, caps: PromptCaps, name: str | None = None
) -> dict[str, Any]:
    """The best block the agent accepts for a local file (the client MUST filter by capability)."""
    uri = path.as_uri()
    name = name or path.name
    if mime.startswith("image/") and caps.image:
        return {
            "type": "image",
            "data": base64.b64encode(data).decode(),
            "mimeType": mime,
            "uri": uri,
        }
    if mime.startswith("audio/") and caps.audio:
        return {"type": "audio", "data": base64.b64encode(data).decode(), "mimeType": mime}
    if caps.embedded_context:
        text = _as_text(data, mime)
        resource: dict[str, Any] = {"uri": uri, "mimeType": mime}
        if text is not None:
            resource["text"] = text
        else:
            resource["blob"] = base64.b64encode(data).decode()
        return {"type": "resource", "resource": resource}
    return {"type": "resource_link", "uri": uri, "name": name, "mimeType": mime, "size": len(data)}


def link_block(url: str, media_type: str | None, filename: str | None) -> dict[str, Any]:
    name = filename or Path(urllib.parse.urlsplit(url).path).name or url
    block: dict[str, Any] = {"type": "resource_link", "uri": url, "name": name}
    if media_type:
        block["mimeType"] = media_type
    return block


def filter_blocks(blocks: list[dict[str, Any]], caps: PromptCaps) -> list[dict[str, Any]]:
    """Drop passthrough blocks the agent cannot take, downgrading to a link where one exists."""
    out = []
    for block in blocks:
        kind = block.get("type")
        if (kind == "image" and not caps.image) or (kind == "audio" and not caps.audio):
            if block.get("uri"):
                out.append(
                    {
                        "type": "resource_link",
                        "uri": block["uri"],
                        "name": Path(block["uri"]).name,
                        "mimeType": block.get("mimeType"),
                    }
                )
                continue
            raise PromptError(f"the agent does not accept {kind} content")
        if kind == "resource" and not caps.embedded_context:
            res = block.get("resource") or {}
            uri = res.get("uri", "")
            out.append({"type": "resource_link", "uri": uri, "name": Path(uri).name or uri})
            continue
        out.append(block)
    return out


def _as_text(data: bytes, mime: str) -> str | None:
    textual = mime.startswith("text/") or mime in {
        "application/json",
        "application/xml",
        "application/x-python",
        "application/toml",
    }
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if textual or "\x00" not in text else None
