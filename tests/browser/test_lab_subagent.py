"""A subagent in JupyterLab: its sub-turn card inside the turn (title, state, its own answer
and tool calls), and its permission request answered by a click on a button inside that card.
Turns are scripted (tests/agents/scripted, `subagent` step). Screenshot:
test-artifacts/lab-view-subagent.png.
"""

from __future__ import annotations

import pytest

from tests.browser.test_lab import output
from tests.browser.test_lab_view import cell, done, run, save, shoot

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


def test_a_subagents_card_and_its_permission_answered_by_a_click(page, lab) -> None:
    child = {
        "id": "child-1",
        "title": "Explore the notes",
        "description": "reads what is there",
        "steps": [
            {"say": "The child looks."},
            {
                "update": {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "k1",
                    "title": "Edit notes.md",
                    "kind": "edit",
                    "name": "edit_file",
                    "status": "pending",
                }
            },
            {
                "permission": {"toolCallId": "k1", "title": "Edit notes.md", "kind": "edit"},
                "options": OPTIONS,
            },
            {"say": "The child is done."},
        ],
    }
    run(page, lab, "subagent.ipynb", cell({"say": "Delegating."}, {"subagent": child}))
    out = output(page)
    card = out.locator("details.acpnb-subagent")
    buttons = card.locator("button.acpnb-permission-option")
    buttons.first.wait_for()
    # The request is inside the child's card, which is open, and the card names the child.
    assert card.get_attribute("open") is not None
    assert "Explore the notes" in card.locator(":scope > summary").inner_text()
    assert buttons.all_inner_texts() == ["Allow", "Reject"]
    shoot(page, "subagent")
    buttons.first.click()
    done(page)
    record = output(page).locator(".acpnb-subagent")
    assert "done" in record.locator(":scope > summary").inner_text()
    text = record.inner_text()
    assert "The child is done." in text and "allowed" in text.lower()
    saved = save(page, lab, "subagent.ipynb")
    plain = "".join(saved["cells"][0]["outputs"][-1]["data"]["text/plain"])
    assert "🤖 subagent Explore the notes: done" in plain
