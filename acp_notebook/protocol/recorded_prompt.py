"""The prompt as a transcript keeps it: what the user gave, without a second copy of every byte
and without the machine's paths. Pure.

What is sent to the agent is unchanged; the turn record (and so the transcript, the saved
notebook and `result.prompt`) keeps:
- a context part as itself, `{"type": "context", "tag", "context"}`, not the `<tag>…</tag>` text
  it was sent as (the text block carries its tag in `_meta`, which agents ignore);
- an image, audio or embedded binary without its base64 payload (the file, or the attachment a
  data URL was stored as, holds it): `{"…", "size": bytes, "omitted": "data"}`;
- a `file://` URI inside the workspace as a path relative to it, one outside as its file name.
"""

from __future__ import annotations

import html
import urllib.parse
from pathlib import Path, PurePosixPath
from typing import Any

#: The `_meta` key of a text block that was a context part: its tag.
CONTEXT_META = "acp_notebook/context"


def recorded(blocks: list[dict[str, Any]], root: str) -> list[dict[str, Any]]:
    return [_block(b, root) for b in blocks]


def _block(block: dict[str, Any], root: str) -> dict[str, Any]:
    kind = block.get("type")
    meta = block.get("_meta")
    tag = meta.get(CONTEXT_META) if isinstance(meta, dict) else None
    if kind == "text" and isinstance(tag, str):
        body = str(block.get("text", ""))
        inner = body.removeprefix(f"<{tag}>").removesuffix(f"</{tag}>")
        return {"type": "context", "tag": tag, "context": html.unescape(inner)}
    out = dict(block)
    if kind in ("image", "audio") and isinstance(out.get("data"), str):
        out["size"] = _decoded_size(out.pop("data"))
        out["omitted"] = "data"
    if kind == "resource" and isinstance(out.get("resource"), dict):
        resource = dict(out["resource"])
        if isinstance(resource.get("blob"), str):
            resource["size"] = _decoded_size(resource.pop("blob"))
            resource["omitted"] = "blob"
        if isinstance(resource.get("uri"), str):
            resource["uri"] = _uri(resource["uri"], root)
        out["resource"] = resource
    if isinstance(out.get("uri"), str):
        out["uri"] = _uri(out["uri"], root)
    return out


def _decoded_size(b64: str) -> int:
    return len(b64) * 3 // 4 - b64[-2:].count("=")


def _uri(uri: str, root: str) -> str:
    if not uri.startswith("file://"):
        return uri
    path = Path(urllib.parse.unquote(urllib.parse.urlsplit(uri).path))
    try:
        return PurePosixPath(path.relative_to(Path(root).resolve())).as_posix()
    except ValueError:
        return path.name
