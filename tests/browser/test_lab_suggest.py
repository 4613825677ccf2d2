"""Prompt suggestions in JupyterLab: a click on one under a cell's answer puts its prompt into a
new `%%agent` cell below (the turn's agent and session, none of its other options), also when
the agent sends them after its turn ended (the record is drawn again with them), and in the
chat into the input box. Turns are scripted (tests/agents/scripted, `suggest` step).
Screenshot: test-artifacts/lab-view-suggestions.png.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.agents.script import script
from tests.blocking import open_fifo_ends, raised_within
from tests.browser.test_lab import POLL, output
from tests.browser.test_lab_chat import open_nb, started_chat
from tests.browser.test_lab_view import AGENT, cell, done, run, shoot

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

SUGGESTED = ["Plot the <b>result</b> & save it", "Run the tests"]

CELLS = "() => window.jupyterapp.shell.currentWidget.content.model.cells.length"
SOURCE = """(i) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i)
  .sharedModel.getSource()"""


def test_a_suggestion_clicked_under_the_answer_fills_a_new_cell(page: Any, lab: Any) -> None:
    run(page, lab, "suggest.ipynb", cell({"say": "Done."}, {"suggest": SUGGESTED}, session="g"))
    done(page)
    buttons = output(page).locator(".acpnb-suggestion")
    assert buttons.all_inner_texts() == SUGGESTED  # escaped: the agent's text, not markup
    assert buttons.locator("b").count() == 0
    shoot(page, "suggestions")
    assert page.evaluate(CELLS) == 1
    buttons.first.click()
    page.wait_for_function(polling=POLL, expression=f"() => ({CELLS})() === 2", timeout=30_000)
    header = f"%%agent --agent {AGENT} --session g"
    assert page.evaluate(SOURCE, 1) == f"{header}\n{SUGGESTED[0]}"
    assert page.evaluate(SOURCE, 0).startswith(header)  # the turn's own cell is unchanged
    assert buttons.first.get_attribute("data-used") == "cell"


def test_suggestions_sent_after_the_turn_join_the_record(page: Any, lab: Any) -> None:
    fifo = lab[2] / "late-suggest.fifo"
    if fifo.exists():
        fifo.unlink()
    os.mkfifo(fifo)
    later = [{"wait_fifo": str(fifo)}, {"suggest": ["Explain the result"]}]
    run(page, lab, "late.ipynb", cell({"say": "Done."}, {"after_turn": later}, session="late"))
    done(page)
    suggestion = output(page).locator(".acpnb-suggestion")
    assert suggestion.count() == 0
    assert raised_within(lambda: fifo.write_text("now"), open_fifo_ends(fifo), 30) is None
    suggestion.wait_for(timeout=30_000)
    assert output(page).locator(".acpnb-turn", has_text="Done.").count() == 1  # one record
    suggestion.click()
    page.wait_for_function(polling=POLL, expression=f"() => ({CELLS})() === 2", timeout=30_000)
    header = f"%%agent --agent {AGENT} --session late"
    assert page.evaluate(SOURCE, 1) == f"{header}\nExplain the result"


def test_a_suggestion_clicked_in_the_chat_fills_its_input(page: Any, lab: Any) -> None:
    open_nb(page, lab, "suggest-chat.ipynb", f"%agent chat -s gc -a {AGENT}")
    _chat, box, turns = started_chat(page)
    box.fill(script({"say": "Done."}, {"suggest": SUGGESTED}))
    box.press("Enter")
    button = turns.nth(0).locator(".acpnb-suggestion", has_text="Run the tests")
    button.wait_for(timeout=60_000)
    page.wait_for_function(
        polling=POLL,
        expression="() => !document.querySelector('.acpnb-chat .acpnb-running')",
        timeout=60_000,
    )
    assert box.input_value() == ""
    button.click()
    page.wait_for_function(
        polling=POLL,
        expression="() => document.querySelector('textarea.acpnb-chat-text').value"
        " === 'Run the tests'",
        timeout=30_000,
    )
    assert page.evaluate(CELLS) == 1  # no cell: the chat's own box
