"""Cells a turn's view puts into the notebook when the person clicks, in JupyterLab with
acp_notebook's extension: an answer's code block ("insert below", in a cell's record and in the
chat) and a prompt suggestion (a new `%%agent` cell). Each goes below the turn's cell, after the
cells its buttons inserted there before: in click order, and never past a cell the person put
or moved there (labextension/src/index.ts; widgets/static/turn_view.js without the extension).
Nothing inserted is run; the code block's button says "✓ inserted" for a moment.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents.script import script
from tests.browser.test_lab import POLL, output
from tests.browser.test_lab_chat import idle, open_nb, run_cell, started_chat
from tests.browser.test_lab_notebook_edit import _open
from tests.browser.test_lab_notebook_revert import NB, _ended, _sources
from tests.browser.test_lab_view import AGENT, shoot

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

#: An answer with two code blocks, each with its "insert below" button.
TWO_BLOCKS = "Try:\n\n```python\nfrom_block = 1\n```\n\nthen\n\n```python\nsecond_block = 2\n```\n"


def _cells(page: Any, count: int) -> None:
    page.wait_for_function(
        polling=POLL, expression=f"() => {NB}.model.cells.length === {count}", timeout=30_000
    )


def _insert(button: Any) -> str:
    """Clicks a code block's "insert below" in the page and returns what the button says at
    once: its word after the click, which goes back to "insert below" 2 s later. A button the
    view drew again between the locator's lookup and the click (detached: no person could
    click it; seen once as a chat's turn ended under CI's load) is looked up again."""
    for _ in range(50):
        said: str | None = button.evaluate("b => b.isConnected ? (b.click(), b.textContent) : null")
        if said is not None:
            return said
    raise AssertionError("the button was drawn again at each of 50 lookups")


def test_insert_below_puts_an_answers_code_block_below_the_agents_cell(page: Any, lab: Any) -> None:
    """Each code block of the answer has "insert below" beside "copy": a click inserts it as
    a new cell below the agent's cell (no card), the next one below that, nothing run.
    (Moved here from test_lab_notebook_revert.py, with the button's word.)"""
    agent = f"%%agent --agent {AGENT} --session ib\n{script({'say': TWO_BLOCKS})}"
    _open(page, lab, "nb_insert_below.ipynb", "x = 1", agent, "last = 3")
    run_cell(page, 1)
    _ended(page, 1)
    buttons = output(page, 1).locator("button.acpnb-tv-codeinsert")
    buttons.first.wait_for(timeout=90_000)
    assert output(page, 1).locator("button.acpnb-tv-codecopy").count() == 2
    assert _insert(buttons.nth(0)) == "✓ inserted"
    assert _insert(buttons.nth(1)) == "✓ inserted"
    _cells(page, 5)
    assert _sources(page) == ["x = 1", agent, "from_block = 1", "second_block = 2", "last = 3"]
    counts = page.evaluate(f"() => [2, 3].map(i => {NB}.model.cells.get(i).executionCount)")
    assert counts == [None, None]
    shoot(page, "notebook-insert-below")
    # The word was for a moment: the button says what it does again.
    buttons.nth(0).filter(has_text="insert below").wait_for(timeout=10_000)


def test_suggestions_and_a_code_block_land_in_click_order(page: Any, lab: Any) -> None:
    """A suggestion, a code block, another suggestion, clicked one after the other: three new
    cells below the turn's, in that order (each was put directly below the turn's cell, so
    they came out in reverse order), above the cell that was below the turn's."""
    steps = ({"say": TWO_BLOCKS}, {"suggest": ["First idea", "Second idea"]})
    agent = f"%%agent --agent {AGENT} --session io\n{script(*steps)}"
    _open(page, lab, "nb_insert_order.ipynb", agent, "below = 1")
    run_cell(page, 0)
    _ended(page, 0)
    suggestions = output(page, 0).locator(".acpnb-suggestion")
    suggestions.first.wait_for(timeout=60_000)
    suggestions.nth(0).click()
    _cells(page, 3)
    assert _insert(output(page, 0).locator("button.acpnb-tv-codeinsert").nth(1)) == "✓ inserted"
    suggestions.nth(1).click()
    _cells(page, 5)
    header = f"%%agent --agent {AGENT} --session io"
    assert _sources(page) == [
        agent,
        f"{header}\nFirst idea",
        "second_block = 2",
        f"{header}\nSecond idea",
        "below = 1",
    ]
    assert [suggestions.nth(i).get_attribute("data-used") for i in (0, 1)] == ["cell", "cell"]


@pytest.mark.parametrize("by", ["extension", "page"])
def test_suggestions_land_in_click_order_short_of_the_persons_cells(
    page: Any, lab: Any, by: str
) -> None:
    """In click order, after the run of cells inserted directly below the turn's: a cell the
    person moved away leaves that run, and the run ends at the person's cell, which the new one
    never goes past. By the extension, and by the turn view itself where the extension does not
    insert (`data-acpnb-notebook` off): the same rule."""
    agent = f"%%agent --agent {AGENT} --session iw\n{script({'suggest': ['A', 'B', 'C']})}"
    _open(page, lab, f"nb_insert_{by}.ipynb", agent, "mine = 1")
    run_cell(page, 0)
    _ended(page, 0)
    suggestions = output(page, 0).locator(".acpnb-suggestion")
    suggestions.first.wait_for(timeout=60_000)
    header = f"%%agent --agent {AGENT} --session iw"
    if by == "page":
        page.evaluate("() => { delete document.body.dataset.acpnbNotebook; }")
    try:
        suggestions.nth(0).click()
        _cells(page, 3)
        suggestions.nth(1).click()
        _cells(page, 4)
        assert _sources(page) == [agent, f"{header}\nA", f"{header}\nB", "mine = 1"]
        # The person moves B to the end: below the turn's cell, A then the person's cell.
        page.evaluate(f"() => {NB}.model.sharedModel.moveCell(2, 3)")
        assert _sources(page) == [agent, f"{header}\nA", "mine = 1", f"{header}\nB"]
        suggestions.nth(2).click()
        _cells(page, 5)
    finally:
        page.evaluate("() => { document.body.dataset.acpnbNotebook = '1'; }")
    assert _sources(page) == [
        agent,
        f"{header}\nA",
        f"{header}\nC",
        "mine = 1",
        f"{header}\nB",
    ]


def test_a_code_block_in_the_chat_goes_below_the_chats_cell(page: Any, lab: Any) -> None:
    """In the chat, an answer's code blocks have "insert below" too: each goes below the chat's
    cell, in click order, and its button says so."""
    open_nb(page, lab, "nb_insert_chat.ipynb", f"%agent chat -s ic -a {AGENT}", "after = 1")
    chat, box, turns = started_chat(page)
    box.fill(script({"say": TWO_BLOCKS}))
    box.press("Enter")
    buttons = turns.nth(0).locator("button.acpnb-tv-codeinsert")
    buttons.nth(1).wait_for(timeout=60_000)
    idle(page)
    assert _insert(buttons.nth(0)) == "✓ inserted"
    assert _insert(buttons.nth(1)) == "✓ inserted"
    _cells(page, 4)
    assert _sources(page)[1:] == ["from_block = 1", "second_block = 2", "after = 1"]
    assert _sources(page)[0].startswith("%agent chat")
    assert chat.locator("textarea.acpnb-chat-text").input_value() == ""  # not the input box
    buttons.nth(1).filter(has_text="insert below").wait_for(timeout=10_000)
