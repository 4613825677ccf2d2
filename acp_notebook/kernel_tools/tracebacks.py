"""An exception's traceback as Python prints it, for an agent: cells named `In[n]`, IPython's own
frames before the first cell left out, masked, its middle elided when long."""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any

from ..render.clip import terminal_text
from .snapshots import SLACK, TRACEBACK_HEAD, TRACEBACK_TAIL, elide_middle, redactor


def format_traceback(
    exc: BaseException, shell: Any = None, cells: Mapping[str, int] | None = None
) -> str:
    """The exception as Python prints it (chained causes included), masked and with its middle
    elided when long; frames of IPython's own machinery before the first cell are left out, and
    a cell's file is named `In[n]` (its number in the kernel's history)."""
    if cells is None:
        cells = cell_numbers(shell, exc)
    tb = exc.__traceback__
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename not in cells:
        first = first.tb_next
    try:
        formatted = traceback.TracebackException(
            type(exc), exc, first if first is not None else tb, compact=True
        )
        for stack in _stacks(formatted):
            for frame in stack:
                if frame.filename in cells:
                    frame.filename = f"In[{cells[frame.filename]}]"
        text = "".join(formatted.format())
    except Exception as error:  # a __str__ that raises, a broken frame: say so
        text = f"(the traceback could not be formatted: {type(error).__name__})"
    return _masked_ends(text)


def _masked_ends(text: str) -> str:
    """The traceback's start and end, masked (each masked with some text around what is kept,
    so a key cut where the text is cut is still masked whole), its middle elided."""

    def mask(part: str) -> str:
        return redactor().text(terminal_text(part))

    head, tail = TRACEBACK_HEAD, TRACEBACK_TAIL
    if len(text) <= (head + tail) * SLACK:
        return elide_middle(mask(text), head, tail)
    start, end = mask(text[: head * SLACK])[:head], mask(text[-tail * SLACK :])[-tail:]
    left_out = len(text) - head - tail
    return f"{start}\n… ({left_out:,} characters of the traceback left out) …\n{end}"


def _stacks(formatted: traceback.TracebackException) -> Iterator[traceback.StackSummary]:
    seen: set[int] = set()
    todo = [formatted]
    while todo:
        te = todo.pop()
        if id(te) in seen or len(seen) > 100:
            continue
        seen.add(id(te))
        yield te.stack
        todo += [t for t in (te.__cause__, te.__context__) if t is not None]
        todo += list(getattr(te, "exceptions", None) or [])


def cell_numbers(shell: Any, exc: BaseException) -> dict[str, int]:
    """The file names of cells in `exc`'s tracebacks (its chain's too) -> their numbers, as the
    shell's compiler names them (`format_code_name` gives ("Cell", "In[5]"))."""
    namer = getattr(getattr(shell, "compile", None), "format_code_name", None)
    if not callable(namer):
        return {}
    found: dict[str, int] = {}
    for tb in _tracebacks(exc):
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if name not in found:
                try:
                    named = namer(name)
                except Exception:
                    named = None
                match = re.fullmatch(r"In\[(\d+)\]", named[1]) if named else None
                if match:
                    found[name] = int(match[1])
            tb = tb.tb_next
    return found


def _tracebacks(exc: BaseException) -> Iterator[TracebackType | None]:
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 100:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current.__traceback__
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]


def raising_cell(exc: BaseException, cells: Mapping[str, int]) -> int | None:
    """The number of the first cell in the exception's own traceback: the cell that was run
    when it was raised (a function defined in cell 3 and called from cell 5 fails cell 5; the
    traceback shows cell 3's line)."""
    tb = exc.__traceback__
    while tb is not None:
        number = cells.get(tb.tb_frame.f_code.co_filename)
        if number is not None:
            return number
        tb = tb.tb_next
    return None
