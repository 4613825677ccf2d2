"""Kernel variables as prompt context: `%%agent --with df --with fig`.

A value is described, not pickled: a DataFrame by its shape, dtypes and first rows, a figure as
a PNG attachment, anything else by a bounded repr. Each becomes a `<variable>` context part, so
the agent sees data from the kernel without the cell pasting it (and without `{x}` formatting,
which breaks on the braces in code).
"""

from __future__ import annotations

import base64
import io
from typing import Any

MAX_CHARS = 8000
HEAD_ROWS = 10


def variable_parts(name: str, value: Any) -> list[dict[str, Any]]:
    """Prompt parts for one variable: a context part, plus a PNG file part for a figure."""
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    lines = [f"name: {name}", f"type: {kind}"]
    parts: list[dict[str, Any]] = []
    png = _figure_png(value)
    if png is not None:
        lines.append(f"a figure, attached as {name}.png")
        parts.append(
            {
                "type": "file",
                "filename": f"{name}.png",
                "media_type": "image/png",
                "url": "data:image/png;base64," + base64.b64encode(png).decode(),
            }
        )
    elif _is_frame(value):
        lines += _describe_frame(value)
    else:
        lines.append("value:")
        lines.append(_bounded(repr(value)))
    return [{"type": "context", "tag": "variable", "context": "\n".join(lines)}, *parts]


def _is_frame(value: Any) -> bool:
    return all(hasattr(value, a) for a in ("shape", "dtypes", "head", "to_string"))


def _describe_frame(frame: Any) -> list[str]:
    try:
        dtypes = (
            frame.dtypes.to_string() if hasattr(frame.dtypes, "to_string") else str(frame.dtypes)
        )
        head = frame.head(HEAD_ROWS).to_string()
    except Exception as exc:  # a frame-like object that is not quite one: say so, go on
        return [f"shape: {getattr(frame, 'shape', '?')}", f"(could not describe it: {exc})"]
    return [
        f"shape: {frame.shape}",
        "dtypes:",
        _bounded(dtypes, 2000),
        f"first {HEAD_ROWS} rows:",
        _bounded(head),
    ]


def _figure_png(value: Any) -> bytes | None:
    # Matplotlib figures (and anything with the same savefig signature), without importing it.
    savefig = getattr(value, "savefig", None)
    if not callable(savefig):
        return None
    buffer = io.BytesIO()
    try:
        savefig(buffer, format="png", bbox_inches="tight")
    except Exception:
        return None
    return buffer.getvalue()


def _bounded(text: str, limit: int = MAX_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters)"
