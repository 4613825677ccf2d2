"""`acp-notebook run` applying what an agent did to the notebook (run/agent_cells.py).

The operations are the agent's (forgeable by code it ran in the kernel): each is checked by
the run's own grants, bounded and masked, and applied only below the agent's cell, where
nbclient's walk has not been yet.
"""

from __future__ import annotations

from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from acp_notebook.protocol.limits import MAX_RUNNER_CELLS
from acp_notebook.run.agent_cells import AgentCells


def nb(*sources: str) -> Any:
    cells = [new_code_cell(s) for s in sources]
    for i, cell in enumerate(cells):
        cell.id = f"c{i}"
    return new_notebook(cells=cells)


def agent(book: Any, takes: bool = True, runs: bool = True) -> AgentCells:
    return AgentCells(book, lambda s: s.replace("SECRET", "[redacted]"), takes, runs)


def insert(source: str, after: Any = None, run: bool = False, cell_id: str = "") -> dict[str, Any]:
    sent = {"op": "insert", "source": source, "cell_type": "code", "run": run, "after": after}
    return {**sent, "id": cell_id} if cell_id else sent


def sources(book: Any) -> list[str]:
    return [c.source for c in book.cells]


def test_inserts_go_below_the_agents_cell_or_a_cell_below_it_in_order() -> None:
    book = nb("a = 1", "%%agent\ngo", "b = 2", "c = 3")
    cells = agent(book)
    cells.take(insert("one"))
    cells.take(insert("below b", after="c2", cell_id="n1"))
    cells.take(insert("below n1", after="n1"))
    cells.take(insert("two", after=2))  # the agent's cell, by its index
    cells.take(insert("above", after="c0"))  # ran already: refused
    cells.take(insert("nowhere", after="x y"))  # not a cell's name: dropped
    again, lines = cells.place(1)
    assert sources(book) == [
        "a = 1",
        "%%agent\ngo",
        "one",
        "two",
        "b = 2",
        "below b",
        "below n1",
        "c = 3",
    ]
    assert again == [] and lines == [
        "an inserted cell was not saved below cell c0: it is above the agent's cell"
    ]
    assert book.cells[5].id == "n1"
    nbformat.validate(book)


def test_an_edit_of_a_cell_that_ran_marks_it_and_a_run_runs_it_again() -> None:
    book = nb("a = 1", "%%agent\ngo", "b = 2")
    book.cells.append(new_markdown_cell("# notes"))
    cells = agent(book)
    cells.take({"op": "edit", "cell": 1, "source": "a = SECRET"})
    cells.take({"op": "run", "cell": "c0"})
    cells.take({"op": "edit", "cell": "c2", "source": "b = 3"})
    cells.take({"op": "run", "cell": 4})  # markdown
    cells.take({"op": "edit", "cell": "c1", "source": "x"})  # the agent's own cell
    cells.take({"op": "edit", "cell": "c2", "source": "%%agent\nagain"})  # would become one
    again, lines = cells.place(1)
    assert sources(book) == ["a = [redacted]", "%%agent\ngo", "b = 3", "# notes"]
    assert book.cells[0].metadata["acp_notebook"] == {
        "edited_after_run": True,
        "ran_source": "a = 1",
    }
    assert book.cells[2].metadata["acp_notebook"] == {"edited": True}
    assert len(again) == 1 and again[0][0] == 0 and again[0][1] is book.cells[0]
    assert lines == [
        "cell 1: edited (it ran before: marked, not run again)",
        "cell c0: runs again after the agent's cell",
        "cell c2: edited",
        "cell 4: not run: not a code cell",
        "cell c1: not edited: an %%agent cell",
        "cell c2: not edited: it would become an %%agent cell",
    ]
    nbformat.validate(book)


def test_a_cell_to_run_again_is_the_one_named_not_the_first_equal_to_it() -> None:
    """Two identical cells (nbformat 4.4 has no ids; same source, no outputs): the second is
    run again at its own index, with the cell inserted below the agent's cell placed before.
    nbclient stores the cell it runs at the index it is given, so the first equal cell's index
    would have put this cell in the first one's place."""
    book = nb("print(1)", "print(1)", "%%agent\ngo")
    for cell in book.cells:
        del cell["id"]
    book.nbformat_minor = 4
    assert book.cells[0] == book.cells[1]
    cells = agent(book)
    cells.take({"op": "run", "cell": 2})
    cells.take(insert("below"))
    again, lines = cells.place(2)
    assert [(index, cell is book.cells[1]) for index, cell in again] == [(1, True)]
    assert sources(book) == ["print(1)", "print(1)", "%%agent\ngo", "below"]
    assert lines == ["cell 2: runs again after the agent's cell"]


def test_nothing_the_run_did_not_grant() -> None:
    book = nb("%%agent\ngo", "b = 2")
    cells = agent(book, takes=False, runs=False)
    cells.take(insert("one", run=True))
    cells.take({"op": "edit", "cell": 2, "source": "b = 3"})
    cells.take({"op": "run", "cell": 2})
    assert cells.place(0) == ([], [])
    assert sources(book) == ["%%agent\ngo", "b = 2"]
    # edit without execute: saved, not run; never an inserted %%agent cell run.
    cells = agent(book, runs=False)
    cells.take(insert("one", run=True))
    cells.take({"op": "run", "cell": 1})
    cells.place(0)
    assert sources(book) == ["%%agent\ngo", "one", "b = 2"] and cells.skips(book.cells[1])
    cells = agent(book)
    cells.take(insert("%%agent\nmore", run=True))
    cells.place(0)
    assert cells.skips(book.cells[1])


def test_bounded() -> None:
    book = nb("%%agent\ngo")
    cells = agent(book)
    for i in range(MAX_RUNNER_CELLS + 5):
        cells.take(insert(f"n = {i}"))
    cells.take(insert("x" * 200_000))
    cells.place(0)
    assert len(book.cells) == 1 + MAX_RUNNER_CELLS


def test_edits_and_runs_bounded_apart_from_inserts() -> None:
    """As many edits and runs as the kernel's tools hand over (`MAX_RUNNER_CELLS`), counted
    apart from the inserted cells: the runner keeps no more than the tools would send."""
    book = nb("%%agent\ngo", "b = 2")
    cells = agent(book)
    for i in range(MAX_RUNNER_CELLS + 5):
        cells.take({"op": "edit", "cell": 2, "source": f"b = {i}"})
    cells.take(insert("still inserted"))
    cells.place(0)
    assert sources(book) == ["%%agent\ngo", "still inserted", f"b = {MAX_RUNNER_CELLS - 1}"]
