"""What the kernel knows about its notebook, read for an agent: the file, recent cells, errors.

- `notebook_path`: the notebook this kernel runs, when something says which (jupyter-server's
  `JPY_SESSION_NAME`, VS Code's `__vsc_ipynb_file__`, papermill's `PAPERMILL_INPUT_PATH`).
- `recent_cells`: the cells above the running one, from that file when the running cell is found
  in it (its saved sources and outputs), else from the kernel's input history (`In`, `Out`).
- `last_error`: the last exception a cell raised; `exception_snapshot`: any exception object
  (`--with err`), with its traceback formatted as Python prints it, cells named `In[5]`.

Everything read here is the user's data on its way to an agent: each field is masked by the
kernel's redactor (as every output is, see `publish.REDACTOR`) and bounded, and `to_text()`
bounds the whole again. Reading never raises for a bad notebook file or a strange value: a
snapshot says what it could not read.

Used by `%%agent --error / --cells` (`kernel_tools/context.py`) and by the kernel's MCP tools.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..client.serving.regular_file import read_within
from ..client.serving.safe_fs import Root
from ..errors import RpcError
from ..protocol.limits import BoundedRepr
from . import cell_errors
from .snapshots import (
    MAX_CELLS,
    MESSAGE_CHARS,
    OUTPUT_CHARS,
    OUTPUTS_PER_CELL,
    SOURCE_CHARS,
    CellSnapshot,
    ErrorSnapshot,
    cells_text,
    safe,
)
from .tracebacks import cell_numbers, format_traceback, raising_cell

__all__ = [
    "CellSnapshot",
    "ErrorSnapshot",
    "cells_text",
    "exception_snapshot",
    "format_traceback",
    "last_error",
    "notebook_path",
    "recent_cells",
]

MAX_NOTEBOOK_BYTES = 20_000_000  # a larger file is not parsed: the history is used instead


# -- the notebook file ---------------------------------------------------------------------


def notebook_path(shell: Any) -> str | None:
    """The notebook file this kernel runs, when something says which and it exists; else None.

    jupyter-server gives `JPY_SESSION_NAME` (absolute, or relative to its root with the kernel
    started in the notebook's directory: both readings are tried), VS Code `__vsc_ipynb_file__`,
    papermill's `--inject-paths` `PAPERMILL_INPUT_PATH` (a variable, or the environment).
    nbclient and `jupyter execute` say nothing: None."""
    ns = _namespace(shell)
    for value in (
        os.environ.get("JPY_SESSION_NAME"),
        ns.get("__session__"),
        ns.get("__vsc_ipynb_file__"),
        ns.get("PAPERMILL_INPUT_PATH"),
        os.environ.get("PAPERMILL_INPUT_PATH"),
    ):
        if not isinstance(value, str) or not value.endswith(".ipynb") or len(value) > 4096:
            continue
        readings = [value] if os.path.isabs(value) else [value, os.path.basename(value)]
        for reading in readings:
            path = os.path.abspath(reading)
            if os.path.isfile(path):
                return path
    return None


def _namespace(shell: Any) -> Mapping[str, Any]:
    ns = getattr(shell, "user_ns", None)
    return ns if isinstance(ns, Mapping) else {}


def recent_cells(shell: Any, n: int | None) -> list[CellSnapshot]:
    """The `n` cells above the running one (at most `MAX_CELLS`; None: as many), oldest first.

    From the notebook file when it is known and the running cell's source is found in it (the
    saved sources and outputs, markdown cells included); else from the kernel's history, code
    only: each input and its `Out[n]`. The running cell is the last input of the history."""
    count = MAX_CELLS if n is None else max(0, min(n, MAX_CELLS))
    if count == 0:
        return []
    inputs = _raw_inputs(shell)
    running = inputs[-1] if inputs else None
    path = notebook_path(shell)
    if path is not None and running is not None:
        cells = _cells_from_file(path, running, count)
        if cells is not None:
            return cells
    return _cells_from_history(shell, inputs[:-1], count)


def _raw_inputs(shell: Any) -> list[str]:
    """The cells as typed (`%%agent` and all), index = execution count (0 is empty)."""
    raw = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if not isinstance(raw, list):
        raw = _namespace(shell).get("In")
    return [s if isinstance(s, str) else "" for s in raw] if isinstance(raw, list) else []


def _cells_from_file(path: str, running: str, count: int) -> list[CellSnapshot] | None:
    """The `count` cells above the last one whose source is `running`, or None when the file
    cannot be read or does not hold it (not saved since the cell was typed)."""
    # JSON, not nbformat.read: nbformat validated every cell, 13 s for 200,000 small ones and
    # 114 s when one lacked a field (the kernel blocked, for each read of the cells); only the
    # cells above the running one are used, each read leniently (`file_cell`).
    # Walked from its folder without following a link out of it: the notebook sits where the
    # agent's shell writes, and a link put in its place had the kernel read (and show the
    # agent) another notebook, from anywhere.
    folder = os.path.dirname(os.path.abspath(path))
    try:
        _, raw = read_within([Root.of(folder)], os.path.abspath(path), MAX_NOTEBOOK_BYTES)
        notebook = json.loads(raw)
    except (OSError, RpcError, ValueError, RecursionError):  # unreadable, too big, not JSON:
        return None  # the history
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):  # not a notebook of format 4
        return None
    cells = [c for c in cells if isinstance(c, Mapping)]
    wanted = running.strip()
    at = next(
        (i for i in range(len(cells) - 1, -1, -1) if _source(cells[i]).strip() == wanted), None
    )
    if at is None:
        return None
    return [file_cell(cells[i], i + 1) for i in range(max(0, at - count), at)]


def _source(cell: Any) -> str:
    source = cell.get("source", "") if isinstance(cell, Mapping) else ""
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def file_cell(cell: Mapping[str, Any], index: int) -> CellSnapshot:
    """One cell in nbformat's JSON shape (a saved one, or the live one the front-end sends),
    masked and bounded, `index` its 1-based position."""
    count = cell.get("execution_count")
    outputs = cell.get("outputs")
    outputs = outputs if isinstance(outputs, list) else []
    summaries = [_output_summary(o) for o in outputs[: OUTPUTS_PER_CELL + 1]]
    summaries += ["…"] * (len(outputs) - len(summaries))
    return CellSnapshot(
        source=safe(_source(cell), SOURCE_CHARS),
        cell_type=str(cell.get("cell_type", "code"))[:20],
        execution_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        index=index,
        outputs=tuple(summaries),
    )


def _output_summary(output: Any) -> str:
    """One saved output in a few lines: a stream's text, a result's text/plain (other types
    named), an error's `Name: message`."""
    if not isinstance(output, Mapping):
        return "(an unreadable output)"
    kind = output.get("output_type")
    if kind == "stream":
        return safe(f"{output.get('name', 'stream')}: {_text(output.get('text'))}", OUTPUT_CHARS)
    if kind == "error":
        return safe(f"{output.get('ename')}: {_text(output.get('evalue'))}", OUTPUT_CHARS)
    data = output.get("data")
    if kind in ("execute_result", "display_data") and isinstance(data, Mapping):
        others = [str(m)[:60] for m in data if m != "text/plain"]
        text = _text(data.get("text/plain"))
        shown = f"{text}\n[also as {', '.join(others[:5])}]" if others else text
        return safe(shown, OUTPUT_CHARS)
    return f"({str(kind)[:40]} output)"


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(v for v in value[:10_000] if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _cells_from_history(shell: Any, inputs: Sequence[str], count: int) -> list[CellSnapshot]:
    out_map = _namespace(shell).get("Out")
    outs = out_map if isinstance(out_map, Mapping) else {}
    numbered = [(i, s) for i, s in enumerate(inputs) if i > 0 and s.strip()]
    cells = []
    for number, source in numbered[-count:]:
        outputs = (_value_summary(outs[number]),) if number in outs else ()
        cells.append(
            CellSnapshot(safe(source, SOURCE_CHARS), execution_count=number, outputs=outputs)
        )
    return cells


_REPR = BoundedRepr(OUTPUT_CHARS)


def _value_summary(value: Any) -> str:
    """A cell's value (`Out[n]`) as a bounded repr."""
    try:
        text = _REPR.repr(value)
    except Exception as exc:  # a __repr__ that raises is the user's bug, not ours
        text = f"(its repr raised {type(exc).__name__})"
    return safe(text, OUTPUT_CHARS)


# -- errors ---------------------------------------------------------------------------------


def last_error(shell: Any) -> ErrorSnapshot | None:
    """The last exception a cell raised, or None (see `cell_errors.last_exception`)."""
    exc = cell_errors.last_exception()
    return None if exc is None else exception_snapshot(exc, shell)


def exception_snapshot(exc: BaseException, shell: Any = None) -> ErrorSnapshot:
    """Any exception object: its type, message, traceback and the cell it was raised in."""
    cells = cell_numbers(shell, exc)
    number = raising_cell(exc, cells)
    inputs = _raw_inputs(shell)
    source = inputs[number] if number is not None and 0 < number < len(inputs) else None
    try:
        message = str(exc)
    except Exception:  # a __str__ that raises
        message = "(its message could not be read)"
    return ErrorSnapshot(
        type=_type_name(type(exc)),
        message=safe(message, MESSAGE_CHARS),
        traceback=format_traceback(exc, shell, cells),
        cell_source=safe(source, SOURCE_CHARS) if source is not None else None,
        execution_count=number,
    )


def _type_name(kind: type) -> str:
    module = getattr(kind, "__module__", "")
    name = getattr(kind, "__qualname__", kind.__name__)
    return name if module in ("builtins", "__main__", None, "") else f"{module}.{name}"
