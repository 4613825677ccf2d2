"""Cells and errors as an agent is shown them: masked, each field clipped, the whole bounded.

The values `cells` reads (and the kernel's MCP tools return) are made of these. Every
field is masked by the kernel's redactor (`publish.REDACTOR`, as every output is) before it is
clipped, and `to_text()` bounds the whole again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..protocol.limits import clip_text
from ..protocol.redact import Redactor
from ..render.clip import terminal_text

SOURCE_CHARS = 3000  # one cell's source
OUTPUT_CHARS = 600  # one output's summary
OUTPUTS_PER_CELL = 5
MESSAGE_CHARS = 2000  # an exception's message
TRACEBACK_HEAD, TRACEBACK_TAIL = 2000, 4000  # its traceback: the start and the (telling) end
CELL_TEXT_CHARS = 6000  # CellSnapshot.to_text()
ERROR_TEXT_CHARS = 12_000  # ErrorSnapshot.to_text()
MAX_CELLS = 50  # recent_cells(shell, n) reads at most this many
SLACK = 4  # a field is masked at this many times its limit, then clipped (see safe)


def redactor() -> Redactor:
    from ..display.publish import (
        REDACTOR,  # the kernel's one redactor: its env and its agents' secrets
    )

    return REDACTOR


def safe(text: str, limit: int) -> str:
    """`text` masked, plain (no terminal escapes) and at most about `limit` characters.

    Masked before it is clipped (a key cut by the clip would be a prefix too short to mask),
    but only the part that can be kept, so a 50 MB value costs no more than a short one."""
    text = terminal_text(text[: limit * SLACK])
    text = redactor().text(text)
    return clip_text(text, limit)


def elide_middle(text: str, head: int, tail: int) -> str:
    """The start and the end of `text`, the middle replaced by a note (a traceback's end says
    what went wrong, its start where)."""
    if len(text) <= head + tail:
        return text
    cut = len(text) - head - tail
    return f"{text[:head]}\n… ({cut:,} characters of the traceback left out) …\n{text[-tail:]}"


@dataclass(frozen=True, slots=True)
class CellSnapshot:
    """One cell as an agent is shown it: masked and bounded.

    `index` is its position in the notebook file (1-based) when read from it; `execution_count`
    its `In [n]`; `outputs` one short summary per output (or per `Out[n]` from the history)."""

    source: str
    cell_type: str = "code"
    execution_count: int | None = None
    index: int | None = None
    outputs: tuple[str, ...] = ()
    cell_id: str | None = None  # the live notebook's id for it (notebook_edit), when known

    def label(self) -> str:
        where = [f"In [{self.execution_count}]"] if self.execution_count is not None else []
        if self.index is not None:
            where.append(f"cell {self.index}")
        if self.cell_id is not None:
            where.append(f"id {self.cell_id}")
        if self.cell_type != "code":
            where.append(self.cell_type)
        return ", ".join(where) or "cell"

    def to_text(self) -> str:
        lines = [f"--- {self.label()} ---", clip_text(self.source, SOURCE_CHARS)]
        for output in self.outputs[:OUTPUTS_PER_CELL]:
            lines += ["--- output ---", clip_text(output, OUTPUT_CHARS)]
        if len(self.outputs) > OUTPUTS_PER_CELL:
            lines.append(f"… ({len(self.outputs) - OUTPUTS_PER_CELL} more outputs)")
        return clip_text("\n".join(lines), CELL_TEXT_CHARS)


@dataclass(frozen=True, slots=True)
class ErrorSnapshot:
    """An exception as an agent is shown it: masked and bounded. `cell_source` and
    `execution_count` are those of the cell that raised it, when the traceback passes one."""

    type: str
    message: str
    traceback: str
    cell_source: str | None = None
    execution_count: int | None = None

    def to_text(self) -> str:
        lines = [f"{self.type}: {clip_text(self.message, MESSAGE_CHARS)}"]
        if self.cell_source is not None:
            where = f"In [{self.execution_count}]" if self.execution_count is not None else "a cell"
            lines += [f"--- raised in {where} ---", clip_text(self.cell_source, SOURCE_CHARS)]
        tb = elide_middle(self.traceback, TRACEBACK_HEAD, TRACEBACK_TAIL)
        lines += ["--- traceback ---", tb]
        return clip_text("\n".join(lines), ERROR_TEXT_CHARS)


def cells_text(cells: Sequence[CellSnapshot], limit: int = 24_000) -> str:
    """Several cells as one text, oldest first, at most `limit` characters: when they do not
    fit, the oldest are left out (the cells just above matter most)."""
    texts = [c.to_text() for c in cells]
    kept: list[str] = []
    used = 0
    for text in reversed(texts):
        if used + len(text) > limit and kept:
            break
        kept.append(text[:limit])
        used += len(text) + 1
    note = (
        [f"… ({len(texts) - len(kept)} earlier cells left out)"] if len(kept) < len(texts) else []
    )
    return "\n".join(note + kept[::-1])
