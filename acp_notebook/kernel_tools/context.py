"""The kernel as prompt context: `%%agent --with df --with fig`, `--error`, `--cells N`.

A value is described, not pickled: a DataFrame by its shape, dtypes and first rows, a figure as
a PNG attachment, an exception by its traceback, anything else by a bounded repr. Each becomes a
`<variable>` context part, so the agent sees data from the kernel without the cell pasting it
(and without `{x}` formatting, which breaks on the braces in code).

`--error` adds the last exception as an `<error>` part, `--cells N` the N cells above as one
`<cells>` part and the notebook file, when the kernel knows it, as a resource link; what they
hold is read, masked and bounded by `cells`. A variable's description is masked too
(the kernel's redactor, as the kernel tools' answers are).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from .cells import cells_text, exception_snapshot, last_error, notebook_path, recent_cells
from .snapshots import redactor
from .variables import bounded_repr, describe_frame, figure_png, is_frame

MAX_CHARS = 8000


def variable_parts(name: str, value: Any, shell: Any = None) -> list[dict[str, Any]]:
    """Prompt parts for one variable: a context part, plus a PNG file part for a figure.
    `shell` (IPython's) names the cells in an exception's traceback."""
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    lines = [f"name: {name}", f"type: {kind}"]
    parts: list[dict[str, Any]] = []
    png = figure_png(value)
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
    elif isinstance(value, BaseException):
        lines.append("an exception:")
        lines.append(exception_snapshot(value, shell).to_text())
    elif is_frame(value):
        lines += [f"shape: {value.shape}", *describe_frame(value, summary=False)]
    else:
        # Not repr(): a list of 10^8 items was formatted whole (minutes, gigabytes) before
        # it was cut, and a repr that raised failed the cell with a traceback.
        lines += ["value:", bounded_repr(value, MAX_CHARS)]
    # Masked as the kernel tools' answers are: a variable that holds a key does not hand it over.
    context = redactor().text("\n".join(lines))
    return [{"type": "context", "tag": "variable", "context": context}, *parts]


def error_parts(shell: Any) -> list[dict[str, Any]] | None:
    """`--error`: the last exception a cell raised as an `<error>` part; None if there is none."""
    error = last_error(shell)
    if error is None:
        return None
    return [{"type": "context", "tag": "error", "context": error.to_text()}]


def cells_parts(shell: Any, n: int) -> list[dict[str, Any]]:
    """`--cells N`: the N cells above as one `<cells>` part, and a link to the notebook file
    when the kernel knows which it is (the agent may read the rest there)."""
    cells = recent_cells(shell, n)
    path = notebook_path(shell)
    where = f"the notebook {Path(path).name}" if path else "this kernel's history"
    head = f"The {len(cells)} cells above the prompt's cell, from {where}, oldest first:\n"
    body = head + cells_text(cells) if cells else "There are no cells above this one."
    parts: list[dict[str, Any]] = [{"type": "context", "tag": "cells", "context": body}]
    if path is not None:
        parts.append(
            {
                "type": "resource_link",
                "uri": Path(path).as_uri(),
                "name": Path(path).name,
                "mimeType": "application/x-ipynb+json",
            }
        )
    return parts
