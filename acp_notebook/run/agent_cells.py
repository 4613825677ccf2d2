"""What the agent of a `%%agent` cell did to the notebook `acp-notebook run` executes (issue 22).

The kernel's cell tools hand their operations to the runner as display messages of the running
`%%agent` cell (`execute.RunClient` takes them out of the outputs): cells inserted (below the
agent's cell, or below `after`), sources edited, cells run. They are collected while the cell
runs and applied to the notebook when it ends (`place`), so nbclient's walk over the cells,
which is at that cell, goes on over a notebook that only changed below it:

- inserted cells go right below the agent's cell, or below `after` when that is the agent's
  cell, a cell below it or a cell the turn inserted; after the cells inserted there before, in
  order; `after` above the agent's cell is refused (those cells ran already);
- an edit replaces a cell's source; a cell that ran already keeps its outputs and is marked
  (`metadata.acp_notebook.edited_after_run`, with the source that ran), not run again; a cell
  below runs with its new source in its turn;
- a run executes a cell that ran already once more, right after the agent's cell; a cell below
  runs in its turn anyway (an inserted cell the agent did not run, too, then).

The messages are the agent's (code it ran in the kernel can forge them: see execute.py), so
each is checked here by the run's own `--allow` (`takes`: edit, `runs`: execute), bounded, and
masked; an `%%agent` cell is never run, edited, nor made by an edit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import nbformat
from nbformat import NotebookNode

from ..protocol import limits
from ..protocol.agent_cell import is_agent_source

#: A cell id nbformat allows (4.5: 1 to 64 of these characters).
CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")

Ref = int | str


def is_agent_cell(cell: NotebookNode) -> bool:
    source = cell.source if cell.cell_type == "code" else ""
    return isinstance(source, str) and is_agent_source(source)


def _ref(value: Any) -> Ref | None:
    """A cell named as the tools name it: an id, or a 1-based index; None if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, str) and CELL_ID.fullmatch(value)):
        return value
    return None


class AgentCells:
    """The operations of the running `%%agent` cell, checked, until it ends."""

    def __init__(
        self, nb: NotebookNode, mask: Callable[[str], str], takes: bool, runs: bool
    ) -> None:
        self.nb = nb
        self.mask = mask
        self.takes = takes  # the run's --allow grants edit: cells inserted, sources edited
        self.runs = runs  # and execute: cells run
        self.pending: list[tuple[NotebookNode, Ref | None]] = []  # inserted, and their `after`
        self.ops: list[dict[str, Any]] = []  # edits and runs, in order
        self.not_run: set[int] = set()  # ids of inserted code cells not to run

    def skips(self, cell: NotebookNode) -> bool:
        """Whether nbclient's walk passes `cell` by (inserted, not run)."""
        return id(cell) in self.not_run

    def take(self, sent: dict[str, Any]) -> None:
        """One operation of the running `%%agent` cell, kept if the run grants it."""
        op = sent.get("op", "insert")
        if op == "insert":
            after = sent.get("after")
            node = self._inserted(sent) if after is None or _ref(after) is not None else None
            if node is not None and len(self.pending) < limits.MAX_RUNNER_CELLS:
                self.pending.append((node, _ref(after)))
            return
        cell = _ref(sent.get("cell"))
        source = sent.get("source")
        if cell is None or len(self.ops) >= limits.MAX_RUNNER_CELLS:
            return
        if op == "edit" and self.takes and isinstance(source, str):
            if len(source) <= limits.MAX_CHARS:
                self.ops.append({"op": "edit", "cell": cell, "source": self.mask(source)})
        elif op == "run" and self.runs:
            self.ops.append({"op": "run", "cell": cell})

    def _inserted(self, sent: dict[str, Any]) -> NotebookNode | None:
        source = sent.get("source")
        if not self.takes or not isinstance(source, str) or len(source) > limits.MAX_CHARS:
            return None
        source = self.mask(source)
        node: NotebookNode
        if sent.get("cell_type") == "markdown":
            node = nbformat.v4.new_markdown_cell(source)
        elif sent.get("cell_type") == "code":
            node = nbformat.v4.new_code_cell(source)
            if sent.get("run") is not True or not self.runs or is_agent_cell(node):
                self.not_run.add(id(node))
        else:
            return None
        wanted = sent.get("id")
        taken = {c.get("id") for c in self.nb.cells} | {n.get("id") for n, _ in self.pending}
        if isinstance(wanted, str) and CELL_ID.fullmatch(wanted) and wanted not in taken:
            node.id = wanted  # the id the agent was told (`insert_cell`'s answer and card)
        return node

    def place(self, at: int) -> tuple[list[tuple[int, NotebookNode]], list[str]]:
        """Apply what the `%%agent` cell at index `at` handed over, now that it ended: the
        cells that ran already to run again, with their indexes (above `at`, which the cells
        inserted below it leave as they were; a cell's own, not that of the first cell equal
        to it), and a line for the terminal about each."""
        pending, self.pending = self.pending, []
        ops, self.ops = self.ops, []
        lines: list[str] = []
        again: list[tuple[int, NotebookNode]] = []
        for op in ops:  # against the notebook as the turn saw it (its inserts not placed yet)
            lines.append(self._apply(op, at, [n for n, _ in pending], again))
        groups: dict[int, list[NotebookNode]] = {}
        for node, after in pending:
            lines.extend(self._group(node, after, at, groups))
        for index in sorted(groups, reverse=True):  # from the bottom: indexes above hold
            self.nb.cells[index + 1 : index + 1] = groups[index]
        return again, [line for line in lines if line]

    def _find(self, ref: Ref) -> int | None:
        cells = self.nb.cells
        if isinstance(ref, int):
            return ref - 1 if 1 <= ref <= len(cells) else None
        return next((i for i, c in enumerate(cells) if c.get("id") == ref), None)

    def _apply(
        self,
        op: dict[str, Any],
        at: int,
        new: list[NotebookNode],
        again: list[tuple[int, NotebookNode]],
    ) -> str:
        ref, word = op["cell"], "edited" if op["op"] == "edit" else "run"
        index = self._find(ref)
        cell = self.nb.cells[index] if index is not None else None
        if cell is None:  # a cell the turn inserted (by its id)?
            cell = next((n for n in new if n.get("id") == ref), None)
        if cell is None:
            return f"cell {ref}: not {word}: no such cell"
        if index == at or is_agent_cell(cell):
            return f"cell {ref}: not {word}: an %%agent cell"
        if op["op"] == "edit":
            return self._edit(cell, ref, op["source"], ran=index is not None and index < at)
        if cell.cell_type != "code":
            return f"cell {ref}: not run: not a code cell"
        if index is not None and index < at:
            again.append((index, cell))
            return f"cell {ref}: runs again after the agent's cell"
        self.not_run.discard(id(cell))  # below: it runs in its turn
        return ""

    def _edit(self, cell: NotebookNode, ref: Ref, source: str, ran: bool) -> str:
        if cell.cell_type == "code" and is_agent_source(source):
            return f"cell {ref}: not edited: it would become an %%agent cell"
        marks = cell.setdefault("metadata", {}).setdefault("acp_notebook", {})
        if ran and cell.cell_type == "code":
            # Its outputs are those of the source that ran: said, with that source.
            marks.setdefault("edited_after_run", True)
            marks.setdefault("ran_source", cell.source)
        else:
            marks["edited"] = True
        cell.source = source
        return f"cell {ref}: edited" + (" (it ran before: marked, not run again)" if ran else "")

    def _group(
        self, node: NotebookNode, after: Ref | None, at: int, groups: dict[int, list[NotebookNode]]
    ) -> list[str]:
        """Put `node` in the group of the cell it goes below; a line if it cannot go there."""
        for members in groups.values():  # below a cell the turn inserted
            spot = next((i for i, n in enumerate(members) if n.get("id") == after), None)
            if spot is not None:
                members.insert(spot + 1, node)
                return []
        index = at if after is None else self._find(after)
        if index is None or index < at:
            self.not_run.discard(id(node))
            why = "no such cell" if index is None else "it is above the agent's cell"
            return [f"an inserted cell was not saved below cell {after}: {why}"]
        groups.setdefault(index, []).append(node)
        return []
