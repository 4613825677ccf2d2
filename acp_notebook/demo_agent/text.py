"""Text the demo agent streams: content blocks, token-sized chunks, excerpts, a code sample."""

from __future__ import annotations

import re

from .wire import JSON

CODE_SAMPLE = """```python
# What a real agent might run next to check its edit
from pathlib import Path

notes = Path("demo_notes.md").read_text()
print(notes.count("\\n## "), "demo sections so far")
```
"""


def text_block(text: str) -> JSON:
    return {"type": "text", "text": text}


def text_content(text: str) -> JSON:
    return {"type": "content", "content": text_block(text)}


def chunks(text: str, words: int = 3) -> list[str]:
    """Splits text into small pieces that join back exactly, like a token stream."""
    pieces = re.findall(r"\S+\s*|\s+", text)
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)]


def excerpt(text: str, limit: int = 60) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def attachment_names(blocks: list[JSON]) -> list[str]:
    """Names of the non-text prompt blocks, so the answer can mention what was attached."""
    names: list[str] = []
    for block in blocks:
        kind, uri = block.get("type"), ""
        if kind == "resource_link":
            uri = str(block.get("name") or block.get("uri") or "")
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            uri = str(block["resource"].get("uri") or "")
        elif kind in ("image", "audio"):
            uri = str(block.get("uri") or f"{kind} ({block.get('mimeType', '?')})")
        if uri:
            names.append(uri.rstrip("/").rsplit("/", 1)[-1] or uri)
    return names
