"""`acp-notebook run` and the cells an agent inserts (issue 22 item 4), attacked.

The runner saves the cells an agent inserted below its `%%agent` cell when they come as display
messages marked with the run's token (`ACP_NOTEBOOK_RUN_CELLS`). Code the agent runs in the
kernel (`run_code`, `--allow execute`) can read that token there and display cells of its own:
these tests forge them, and check that the runner decides by its own `--allow`, not by the
message (run/execute.py's docstring). And the limits: at most 50 cells a turn, every source
masked as the rest of the record.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tests.agents.script import script
from tests.kernel.test_run_cli import notebook, run_cli
from tests.nb_util import outputs, scripted, transcripts

KEY = "sk-live-Ab3/xY9+zQ7=mN2_pL8-kR4.tW6~vB1c"
MASK = "[redacted]"

#: Displays a cell for the runner from inside the kernel, with the token read there: `when`
#: "now" (during the agent's cell) or "next" (during the cell after it, from a hook).
FORGE = """
from acp_notebook.kernel_tools import notebook_link
from IPython import get_ipython
from IPython.display import display
def forge(*_):
    cell = {{"token": notebook_link.runner_token(), "source": {source!r},
             "cell_type": "code", "run": True, "id": {cell_id!r}}}
    display({{"application/vnd.acp-notebook.cell+json": cell}}, raw=True)
if {when!r} == "now":
    forge()
else:
    get_ipython().events.register("pre_run_cell", forge)
"""


def forged(source: str, when: str = "now", cell_id: str = "forged") -> dict[str, object]:
    code = FORGE.format(source=source, when=when, cell_id=cell_id)
    return {"name": "run_code", "arguments": {"code": code}}


def agent_cell(*calls: dict[str, object]) -> str:
    prompt = script({"mcp": "kernel", "calls": list(calls)})
    return f"%%agent --agent {scripted()} --session s\n{prompt}"


@pytest.mark.timeout(240)
def test_code_run_in_the_kernel_cannot_forge_cells_the_run_did_not_grant(tmp_path: Path) -> None:
    """An agent allowed `execute` only reads the token in the kernel and displays a cell to
    run: the runner saves nothing (the run did not grant `edit`). Allowed both, its forged
    `%%agent` cell is saved but not run (turns without end), a cell forged while an ordinary
    cell runs is dropped, and a forged source is masked and cannot take an id the notebook
    holds."""
    agent = agent_cell(forged("forged_ran = 1"))
    last = "print('forged_ran' in globals())"
    notebook(tmp_path / "a.ipynb", "x = 1", agent, last)
    done = run_cli(tmp_path, "a.ipynb", "--allow", "execute")
    assert done.returncode == 0, done.stdout + done.stderr
    saved = nbformat.read(tmp_path / "a.out.ipynb", as_version=4)
    assert [c.source for c in saved.cells] == ["x = 1", agent, last]
    assert outputs(saved.cells[2])[0]["text"] == "False\n"
    assert not any(
        "application/vnd.acp-notebook.cell+json" in o.get("data", {})
        for o in outputs(saved.cells[1])
    )

    first_id = "kept-id"
    agent = agent_cell(
        forged(f"%%agent --agent {scripted()}\nagain", cell_id=first_id),
        forged(f"leaked = {KEY!r}"),
        forged("late_ran = 1", when="next"),
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nb.cells[0].id = first_id
    nb.cells.append(nbformat.v4.new_code_cell(agent))
    nb.cells.append(nbformat.v4.new_code_cell("print('late_ran' in globals())"))
    nb.metadata["kernelspec"] = nbformat.read(tmp_path / "a.ipynb", as_version=4).metadata[
        "kernelspec"
    ]
    nbformat.write(nb, tmp_path / "b.ipynb")
    done = run_cli(tmp_path, "b.ipynb", "--allow", "edit,execute", MY_API_KEY=KEY)
    assert done.returncode == 0, done.stdout + done.stderr
    saved = nbformat.read(tmp_path / "b.out.ipynb", as_version=4)
    got = [(c.source, c.get("execution_count")) for c in saved.cells]
    assert got == [
        ("x = 1", 1),
        (agent, 2),
        (f"%%agent --agent {scripted()}\nagain", None),  # saved, never run
        (f"leaked = {MASK!r}", 3),
        ("print('late_ran' in globals())", 4),
    ], got
    assert outputs(saved.cells[4])[0]["text"] == "False\n"
    ids = [c.id for c in saved.cells]
    assert len(set(ids)) == len(ids) and ids[0] == first_id
    # The agent's own cell holds the key (its prompt): nothing else of the notebook does.
    assert KEY not in json.dumps([saved.cells[1].outputs, saved.cells[2:]])


@pytest.mark.timeout(240)
def test_at_most_50_cells_a_turn_and_each_source_masked(tmp_path: Path) -> None:
    """55 inserts: 50 saved below the agent's cell, the rest refused (the agent is told);
    a secret of the kernel's environment in an inserted source is masked in the saved cell,
    its card and the agent's answer; each saved cell has the id its card names."""
    calls = [{"name": "insert_cell", "arguments": {"source": f"key = {KEY!r}"}}]
    calls += [{"name": "insert_cell", "arguments": {"source": f"n = {i}"}} for i in range(54)]
    agent = agent_cell(*calls)
    notebook(tmp_path / "w.ipynb", agent, "done = 1")
    done = run_cli(tmp_path, "w.ipynb", "--allow", "edit", MY_API_KEY=KEY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "+ 50 cell(s) inserted below" in done.stdout
    saved = nbformat.read(tmp_path / "w.out.ipynb", as_version=4)
    sources = [c.source for c in saved.cells]
    assert sources == [agent, f"key = {MASK!r}", *(f"n = {i}" for i in range(49)), "done = 1"]
    assert KEY not in json.dumps([saved.cells[0].outputs, saved.cells[1:]])
    (record,) = transcripts(saved.cells[0])
    said = "".join(p["text"] for p in record["parts"] if p.get("type") == "message")
    answers = [str(c.get("text", c)) for c in json.loads(said.removeprefix("MCP "))]
    assert all("inserted below your %%agent cell" in a for a in answers[:50]), answers[:50]
    assert all(a.startswith("not inserted: a turn inserts at most 50") for a in answers[50:55])
    # The card and the answer name the saved cell's id.
    for cell, text in zip(saved.cells[1:51], answers[:50], strict=True):
        assert text.endswith(f"as cell id {cell.id}"), (text, cell.id)


@pytest.mark.timeout(240)
def test_headless_edits_runs_and_inserts_after_a_later_cell(tmp_path: Path) -> None:
    """`acp-notebook run --allow edit,execute` (issue 22 item 4): an edit of a cell that ran is
    saved and marked, not run again (test_run_agent_cells); `run_cell` of it runs it again
    after the agent's cell (its new source, the mark then plain "edited"); an insert `after` a
    later cell lands below it and runs in its turn."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in ("x = 1", "", "z = 5")]
    nb.cells[2].id = "later"
    calls = [
        {"name": "edit_cell", "arguments": {"cell": 1, "source": "x = 10"}},
        {"name": "run_cell", "arguments": {"cell": 1}},
        {
            "name": "insert_cell",
            "arguments": {"source": "y = x + z", "after": "later", "run": True},
        },
    ]
    nb.cells[1].source = agent_cell(*calls)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, tmp_path / "e.ipynb")
    done = run_cli(tmp_path, "e.ipynb", "--allow", "edit,execute")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "~ cell 1: edited (it ran before: marked, not run again)" in done.stdout
    assert "~ cell 1: runs again after the agent's cell" in done.stdout
    saved = nbformat.read(tmp_path / "e.out.ipynb", as_version=4)
    got = [(c.source, c.get("execution_count")) for c in saved.cells]
    assert got == [("x = 10", 3), (nb.cells[1].source, 2), ("z = 5", 4), ("y = x + z", 5)]
    # Run again after the edit: its outputs are its new source's, so it is marked edited only.
    assert saved.cells[0].metadata["acp_notebook"] == {"edited": True}
    (record,) = transcripts(saved.cells[1])
    said = "".join(p["text"] for p in record["parts"] if p.get("type") == "message")
    answers = [str(c.get("text", c)) for c in json.loads(said.removeprefix("MCP "))[:3]]
    assert answers[0].startswith("cell 1: edit handed over"), answers
    assert answers[1].startswith("cell 1: run handed over"), answers
    assert answers[2].startswith("inserted below cell later"), answers
