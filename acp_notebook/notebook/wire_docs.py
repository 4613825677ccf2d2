"""`%agent log`: the last JSON-RPC messages with an agent, as the wire carried them.

Every value is the agent's (or ours, quoting the agent's files): masked, long strings clipped,
lists and nesting cut, each message drawn as escaped preformatted text (`views.Doc.pre`).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

from ..display.views import Code, Doc
from ..protocol.wirelog import WireEntry

STRING_CLIP = 200  # characters shown of one string value
ITEMS_CLIP = 20  # items shown of one list or object
DEPTH_CLIP = 8  # nesting shown
RAW_CLIP = 4000  # characters shown of one raw line


def log_doc(
    agent: str, entries: list[WireEntry], n: int, raw: bool, mask: Callable[[str], str]
) -> Doc:
    doc = Doc(mask)
    if not entries:
        return doc.para("No JSON-RPC messages with agent ", Code(agent), " in this kernel yet.")
    doc.para(
        f"The last {n} JSON-RPC messages each way with agent ",
        Code(agent),
        ": ← from the agent, → to it; secrets masked, long values clipped"
        + (", each line as sent" if raw else "")
        + ".",
    )
    for entry in entries:
        doc.pre(f"{_head(entry)}\n{_body(entry, raw)}")
    return doc


def _head(entry: WireEntry) -> str:
    at = datetime.datetime.fromtimestamp(entry.at).strftime("%H:%M:%S.%f")[:-3]
    cut = f" ({entry.size:,} characters, clipped)" if entry.size > RAW_CLIP else ""
    return f"{at} {entry.summary()}{cut}"


def _body(entry: WireEntry, raw: bool) -> str:
    if raw:
        return entry.text[:RAW_CLIP] + ("…" if len(entry.text) > RAW_CLIP else "")
    message = entry.message()
    if isinstance(message, str):  # not JSON (or cut by the log's own clip)
        return message[:RAW_CLIP] + ("…" if len(message) > RAW_CLIP else "")
    return json.dumps(_clip(message), indent=1, ensure_ascii=False)


def _clip(value: Any, depth: int = 0) -> Any:
    """A copy of a JSON value small enough to read: strings, lists, objects and depth cut."""
    if isinstance(value, str):
        return value if len(value) <= STRING_CLIP else f"{value[:STRING_CLIP]}… ({len(value):,})"
    if depth >= DEPTH_CLIP and isinstance(value, dict | list):
        return "…"
    if isinstance(value, list):
        kept = [_clip(v, depth + 1) for v in value[:ITEMS_CLIP]]
        return kept + ([f"… {len(value) - ITEMS_CLIP} more"] if len(value) > ITEMS_CLIP else [])
    if isinstance(value, dict):
        items = list(value.items())
        out = {str(k)[:STRING_CLIP]: _clip(v, depth + 1) for k, v in items[:ITEMS_CLIP]}
        if len(items) > ITEMS_CLIP:
            out["…"] = f"{len(items) - ITEMS_CLIP} more"
        return out
    return value
