"""The agent writes the notebook, in JupyterLab with acp_notebook's extension (issue 22).

A scripted agent calls the kernel tools `insert_cell` and `notebook_cells`; the extension
(labextension/, installed with the package) applies what the person allowed to the notebook of
the turn's kernel, and reads its live cells.
"""

from __future__ import annotations

from typing import Any

import nbformat
import pytest

from tests.agents.script import script
from tests.browser.test_lab import OBSERVE, open_notebook, output
from tests.browser.test_lab_view import AGENT, done, shoot

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

FIRST = "window.jupyterapp.shell.currentWidget.content.model.cells.get(0)"
CELLS = "() => window.jupyterapp.shell.currentWidget.content.model.cells.length"
#: The value of a name in the kernel, read with a request of the notebook's own connection.
VALUE = """async (name) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const reply = await kernel.requestExecute(
    {code: '', silent: true, user_expressions: {v: name}}).done;
  return reply.content.user_expressions.v;
}"""


def _open(page: Any, lab: Any, name: str, *cells: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, lab[2] / name)
    open_notebook(page, lab, name)
    page.evaluate(OBSERVE)


def _run_all(page: Any) -> None:
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def _answer(page: Any, cell: int = 0) -> str:
    """The tools' answers, as the scripted agent says them ("MCP [...]")."""
    text = output(page, cell).first.text_content() or ""
    assert "MCP [" in text, text[:2000]
    return text[text.index("MCP [") :]


def _allow(page: Any, label: str, cell: int = 0) -> None:
    button = output(page, cell).locator("button.acpnb-permission-option", has_text=label)
    button.first.wait_for(timeout=90_000)
    button.first.click()


def test_insert_and_run_a_cell(page: Any, lab: Any) -> None:
    source = "lab_inserted = 6 * 7\nprint('inserted says', lab_inserted)"
    call = {"name": "insert_cell", "arguments": {"source": source, "run": True}}
    steps = script({"mcp": "kernel", "calls": [call]})
    _open(page, lab, "nb_insert.ipynb", f"%%agent --agent {AGENT} --session ni\n{steps}")
    _run_all(page)
    out = output(page)
    # The card shows the proposed cell in full before anything changes.
    out.locator(".acpnb-perm", has_text="Insert a code cell below the agent's cell").first.wait_for(
        timeout=90_000
    )
    out.get_by_text("print('inserted says', lab_inserted)").first.wait_for(timeout=30_000)
    assert page.evaluate(CELLS) == 1
    shoot(page, "insert-cell-asked")
    _allow(page, "Allow")  # the insert (kind edit)
    run = out.locator(".acpnb-perm", has_text="Run the inserted cell 2")
    run.first.wait_for(timeout=60_000)
    assert page.evaluate(CELLS) == 2  # inserted, below the agent's cell, before the run
    _allow(page, "Allow")  # the run (kind execute)
    done(page)
    answer = _answer(page)
    assert "inserted as cell 2" in answer and "queued to run" in answer
    # It ran as a normal cell once the agent's cell ended: its output and its count.
    page.locator(".jp-Notebook .jp-Cell").nth(1).locator(
        ".jp-OutputArea-output", has_text="inserted says 42"
    ).wait_for(timeout=60_000)
    prompt = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-InputPrompt")
    assert prompt.inner_text().strip() == "[2]:"
    assert page.evaluate(VALUE, "lab_inserted")["data"]["text/plain"] == "42"
    source_now = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1)"
        ".sharedModel.getSource()"
    )
    assert source_now == source
    shoot(page, "insert-cell-ran")
    # One step of the notebook's undo takes the inserted cell away.
    page.evaluate(
        "() => { const nb = window.jupyterapp.shell.currentWidget.content;"
        " nb.model.sharedModel.undoManager.stopCapturing(); nb.model.sharedModel.undo(); }"
    )
    page.wait_for_function(f"() => ({CELLS})() === 1", timeout=10_000)


def test_a_rejected_insert_leaves_the_notebook_as_it_was(page: Any, lab: Any) -> None:
    call = {"name": "insert_cell", "arguments": {"source": "rejected_cell = 1"}}
    steps = script({"mcp": "kernel", "calls": [call]})
    _open(
        page, lab, "nb_reject.ipynb", "before = 1", f"%%agent --agent {AGENT} --session nr\n{steps}"
    )
    _run_all(page)
    before = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.toJSON()")
    button = output(page, 1).locator("button.acpnb-permission-option", has_text="Reject")
    button.first.wait_for(timeout=90_000)
    button.first.click()
    done(page)
    text = output(page, 1).first.text_content() or ""
    assert "not inserted: the user (or the permission policy) did not allow it" in text
    assert page.evaluate(CELLS) == 2
    after = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.toJSON()")
    sources = [c["source"] for c in after["cells"]]
    assert sources == [c["source"] for c in before["cells"]]
    assert page.evaluate(VALUE, "rejected_cell")["status"] == "error"  # nothing ran


def test_notebook_cells_reads_the_live_notebook(page: Any, lab: Any) -> None:
    call = {"name": "notebook_cells", "arguments": {"count": 5}}
    steps = script({"mcp": "kernel", "calls": [call]})
    _open(
        page,
        lab,
        "nb_live.ipynb",
        "saved_source = 1",
        f"%%agent --agent {AGENT} --session nc\n{steps}",
    )
    # An edit the file does not have: typed, not saved.
    page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.model.cells.get(0)"
        ".sharedModel.setSource('edited_not_saved = 2')"
    )
    first_id = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.model.cells.get(0).id"
    )
    _run_all(page)
    done(page)
    text = _answer(page, 1)
    assert "The live notebook (2 cells" in text, text[:2000]
    assert "edited_not_saved = 2" in text and "saved_source" not in text
    assert f"id {first_id}" in text
    assert "In [1]" in text  # the edited cell ran first: its count is live too


def test_a_background_turn_runs_the_inserted_cell_and_reads_its_output(page: Any, lab: Any) -> None:
    """No cell runs while a --background turn goes on: the inserted cell runs at once, and the
    agent gets its output and count; notebook_cells then lists it, below the agent's cell."""
    source = "bg_inserted = 5 * 5\nprint('background says', bg_inserted)"
    calls = [
        {"name": "insert_cell", "arguments": {"source": source, "run": True}},
        {"name": "notebook_cells", "arguments": {"count": 2}},
    ]
    steps = script({"mcp": "kernel", "calls": calls})
    cell = f"%%agent --agent {AGENT} --session nb --background\n{steps}"
    _open(page, lab, "nb_background.ipynb", cell)
    _run_all(page)
    _allow(page, "Allow")
    output(page).locator(".acpnb-perm", has_text="Run the inserted cell 2").first.wait_for(
        timeout=60_000
    )
    _allow(page, "Allow")
    output(page).get_by_text("MCP [").first.wait_for(timeout=90_000)
    answer = _answer(page)
    assert "inserted as cell 2" in answer and "ran:" in answer, answer[:2000]
    assert "background says 25" in answer and "In [2]" in answer
    # notebook_cells: the agent's cell and the one it inserted, live, with their ids.
    assert "The live notebook (2 cells" in answer
    assert answer.count("--- ") >= 2 and "%%agent" in answer
    inserted = page.locator(".jp-Notebook .jp-Cell").nth(1)
    # The agent has the run's output from the kernel; the page draws it on its own time.
    inserted.locator(".jp-OutputArea-output", has_text="background says 25").wait_for(
        timeout=30_000
    )


def test_edit_a_cell_with_a_diff_then_run_it(page: Any, lab: Any) -> None:
    calls = [
        {
            "name": "edit_cell",
            "arguments": {"cell": 1, "source": "edited = 'yes'\nprint('edited says', edited)"},
        },
        {"name": "run_cell", "arguments": {"cell": 1}},
        {"name": "run_cell", "arguments": {"cell": 2}},  # its own cell: refused, nothing asked
    ]
    steps = script({"mcp": "kernel", "calls": calls})
    _open(
        page,
        lab,
        "nb_edit.ipynb",
        "edited = 'no'",
        f"%%agent --agent {AGENT} --session ne\n{steps}",
    )
    _run_all(page)
    out = output(page, 1)
    asked = out.locator(".acpnb-perm", has_text="Edit cell 1 (id ")
    asked.first.wait_for(timeout=90_000)
    # The diff, before anything changes: the line that goes and the lines that come.
    diff = out.locator("pre.acpnb-diff").first.inner_text()
    assert "-edited = 'no'" in diff and "+edited = 'yes'" in diff, diff
    source = f"() => {FIRST}.sharedModel.getSource()"
    assert page.evaluate(source) == "edited = 'no'"
    shoot(page, "edit-cell-asked")
    _allow(page, "Allow", 1)
    out.locator(".acpnb-perm", has_text="Run cell 1 (id ").first.wait_for(timeout=60_000)
    assert page.evaluate(source) == "edited = 'yes'\nprint('edited says', edited)"
    _allow(page, "Allow", 1)
    done(page)
    answer = _answer(page, 1)
    assert "edited cell 1 (id " in answer
    assert "queued to run" in answer
    assert "not run: the cell is running" in answer  # its own %%agent cell
    # The run happened once the agent's cell ended, as a cell of the user's.
    first = page.locator(".jp-Notebook .jp-Cell").nth(0)
    first.locator(".jp-OutputArea-output", has_text="edited says yes").wait_for(timeout=60_000)
    assert first.locator(".jp-InputPrompt").inner_text().strip() == "[3]:"
    # The edit is one step of the cell's undo.
    page.evaluate(f"() => {FIRST}.sharedModel.undo()")
    assert page.evaluate(source) == "edited = 'no'"
