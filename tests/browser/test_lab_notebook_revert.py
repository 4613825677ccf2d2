"""The record of what the agent did to the notebook and `%agent revert` of a turn's cells, in
JupyterLab with acp_notebook's extension (issue 22). The answer's "insert below" buttons:
test_lab_insert.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents.script import script
from tests.browser.test_lab import POLL, output
from tests.browser.test_lab_chat import run_cell
from tests.browser.test_lab_notebook_edit import _open
from tests.browser.test_lab_view import AGENT, shoot

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

NB = "window.jupyterapp.shell.currentWidget.content"
SOURCES = (
    f"() => Array.from({{length: {NB}.model.cells.length}},"
    f" (_, i) => {NB}.model.cells.get(i).sharedModel.getSource())"
)


def _run_cell(page: Any, index: int) -> None:
    run_cell(page, index)  # not awaited: the turn waits for the page's clicks


def _ended(page: Any, index: int) -> None:
    """The turn of cell `index` ended: its record drawn, the live view gone, the cell done."""
    page.wait_for_function(
        polling=POLL,
        timeout=90_000,
        expression=f"""() => {{
          const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[{index}];
          return cell && cell.querySelector('.acpnb-turn') && !cell.querySelector('.acpnb-tv')
            && !cell.querySelector('.jp-InputPrompt').textContent.includes('*');
        }}""",
    )


def _sources(page: Any) -> list[str]:
    result: list[str] = page.evaluate(SOURCES)
    return result


def test_the_record_links_the_cells_and_revert_undoes_them(page: Any, lab: Any) -> None:
    """Two inserts and an edit, allowed: each card links its cell (a click selects it);
    the person changes one inserted cell; `%agent revert` removes the other, restores the
    edited one, and refuses the changed one, naming it."""
    calls = [
        {"name": "insert_cell", "arguments": {"source": "first_inserted = 1"}},
        {"name": "insert_cell", "arguments": {"source": "second_inserted = 2"}},
        {"name": "edit_cell", "arguments": {"cell": 1, "source": "edit_me = 2"}},
    ]
    agent = f"%%agent --agent {AGENT} --session rv\n{script({'mcp': 'kernel', 'calls': calls})}"
    _open(page, lab, "nb_revert.ipynb", "edit_me = 1", agent, "%agent revert -s rv")
    _run_cell(page, 1)
    for asked in ("first_inserted = 1", "second_inserted = 2", "Edit cell 1"):
        card = output(page, 1).locator(".acpnb-perm", has_text=asked)
        card.locator("button.acpnb-permission-option", has_text="Allow").first.click(timeout=60_000)
    _ended(page, 1)
    assert _sources(page) == [
        "edit_me = 2",
        agent,
        "first_inserted = 1",
        "second_inserted = 2",
        "%agent revert -s rv",
    ]
    ids = page.evaluate(f"() => [0, 2, 3].map(i => {NB}.model.cells.get(i).id)")
    links = output(page, 1).locator("a.acpnb-cell")
    assert links.count() == 3
    assert [links.nth(i).get_attribute("data-cell") for i in range(3)] == [ids[1], ids[2], ids[0]]
    assert f"(id {ids[1]})" in (links.nth(0).text_content() or "")
    shoot(page, "notebook-record-links")
    page.evaluate(f"() => {{ {NB}.activeCellIndex = 4; }}")
    links.nth(1).click()
    page.wait_for_function(f"() => {NB}.activeCellIndex === 3", polling=POLL, timeout=10_000)
    # The person changes the second inserted cell; the revert leaves it, and says so.
    page.evaluate(f"() => {NB}.model.cells.get(3).sharedModel.setSource('second_inserted = 3')")
    _run_cell(page, 4)
    out = output(page, 3)
    out.get_by_text("Revert of the notebook cells of turn").first.wait_for(timeout=60_000)
    text = out.first.text_content() or ""
    assert f"cell {ids[2]}: refused (it was changed since the agent inserted it)" in text, text
    assert f"cell {ids[1]}: removed" in text and f"cell {ids[0]}: restored" in text, text
    assert _sources(page) == ["edit_me = 1", agent, "second_inserted = 3", "%agent revert -s rv"]
