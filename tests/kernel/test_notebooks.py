"""Every notebook in notebooks/ runs headless (nbclient) and saves a record of its turns."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from tests.nb_util import MIME_WIDGET, answer, data, execute, outputs, transcripts
from tests.shared_kernel import SharedKernel

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/ holds no notebook: the test below would run nothing"


def expects_error(cell) -> bool:
    return "raises-exception" in cell.get("metadata", {}).get("tags", [])


# Past the folder's 240 s: each runs a whole notebook of notebooks/, a dozen turns and kernels.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_and_records_every_turn(
    path: Path, tmp_path: Path, kernel: SharedKernel
) -> None:
    shutil.copy(path, tmp_path / path.name)
    nb = nbformat.read(tmp_path / path.name, as_version=4)
    # nbclient stops at the first unexpected error (CellExecutionError); cells tagged
    # raises-exception are the notebook's deliberate failures.
    saved = execute(nb, tmp_path, timeout=120, kernel=kernel)

    agent_cells = [
        c for c in saved.cells if c.cell_type == "code" and c.source.lstrip().startswith("%%agent")
    ]
    assert agent_cells, f"{path.name} has no %%agent cell"
    for cell in saved.cells:
        if cell.cell_type != "code":
            continue
        errs = [o for o in outputs(cell) if o["output_type"] == "error"]
        if expects_error(cell):
            assert errs, f"cell tagged raises-exception did not raise:\n{cell.source}"
        else:
            assert not errs, f"{cell.source}\n{errs}"
        assert not outputs(cell, MIME_WIDGET), f"widget-only output left:\n{cell.source}"

    for cell in agent_cells:
        records = transcripts(cell)
        first_line = cell.source.splitlines()[0]
        if "--background" in first_line or "--bg" in first_line.split():
            # The cell's value is the handle; the turn ends after the cell did, and nbclient
            # keeps only the output of the cell that is running (a later cell awaits it).
            assert any("TurnHandle" in t for t in data(cell, "text/plain")), cell.source
            continue
        assert len(records) == 1, f"expected one turn record:\n{cell.source}\n{cell.outputs}"
        record = records[0]
        if expects_error(cell):
            assert record["success"] is False, cell.source
        else:
            assert record["success"] is True, f"{cell.source}\n{record.get('error')}"
            assert answer(record), cell.source
