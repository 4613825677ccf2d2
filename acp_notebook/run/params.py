"""`-p NAME=VALUE`: parameters injected as papermill does.

The values go into a new code cell tagged `injected-parameters`, placed after the cell tagged
`parameters` (or first, when no cell has that tag), and kept in the saved notebook: it says
with which values the notebook ran. A value is read as a Python literal (`3`, `0.5`, `True`,
`"x"`, `[1, 2]`), anything else is the string as written.
"""

from __future__ import annotations

import ast
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import new_code_cell

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"


def parse(items: list[str]) -> dict[str, Any]:
    """`["n=3", "name=Ada"]` → `{"n": 3, "name": "Ada"}`; raises ValueError on a bad item."""
    values: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise ValueError(f"-p {item!r}: expected NAME=VALUE with NAME a Python identifier")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            value = raw
        if not _writable(value):  # `1e999` was injected as `x = inf`: a NameError in the kernel
            raise ValueError(
                f"-p {item!r}: the value is not finite (no Python literal writes it); "
                "pass a finite number, or quote it to pass a string"
            )
        values[name] = value
    return values


def _writable(value: Any) -> bool:
    """Whether `repr(value)`, the injected source, reads back as a literal."""
    try:
        ast.literal_eval(repr(value))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def inject(nb: NotebookNode, values: dict[str, Any]) -> None:
    """Add the parameters cell to `nb`, replacing one injected by an earlier run."""
    if not values:
        return
    nb.cells = [c for c in nb.cells if INJECTED_TAG not in _tags(c)]
    source = "# Parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in values.items())
    cell = new_code_cell(source, metadata={"tags": [INJECTED_TAG]})
    if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) < (4, 5):
        cell.pop("id", None)  # cell ids came with nbformat 4.5
    after = next((i for i, c in enumerate(nb.cells) if PARAMETERS_TAG in _tags(c)), -1)
    nb.cells.insert(after + 1, cell)


def _tags(cell: NotebookNode) -> list[str]:
    tags = cell.get("metadata", {}).get("tags", [])
    return tags if isinstance(tags, list) else []
