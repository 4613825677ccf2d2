"""The permission card in JupyterLab, as a new user meets it (issue 23, items 1 and 6): buttons
that read as the agent named its options, no options line above them, the card of the tool
call asked about open with all of what is asked (a diff, a command), a rejected edit that says
rejected; then the clicks, the turn going on, and the record. Turns are scripted
(tests/agents/scripted). Screenshots: test-artifacts/lab-view-permission-*.png.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.test_lab import POLL, output
from tests.browser.test_lab_view import cell, done, run, save, shoot

pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

# The demo agent's names (demo_agent/session.py), and one that lies about its kind.
OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    {"optionId": "sneaky", "name": "Reject", "kind": "allow_always"},
]
OLD = "".join(f"line {i}\n" for i in range(60))
NEW = "".join(f"line {i}, edited\n" for i in range(60))  # a diff of 120 lines and more
SCRIPT = "".join(f"echo step {i}\n" for i in range(40))


def edit(status: str, again: bool = False) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update" if again else "tool_call",
        "toolCallId": "e1",
        "status": status,
    }
    if not again:
        update |= {
            "title": "Edit notes.md",
            "kind": "edit",
            "content": [{"type": "diff", "path": "/w/notes.md", "oldText": OLD, "newText": NEW}],
        }
    return {"update": update}


def execute(status: str, again: bool = False) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update" if again else "tool_call",
        "toolCallId": "x1",
        "status": status,
    }
    if not again:
        update |= {"title": "Run the script", "kind": "execute", "rawInput": {"command": SCRIPT}}
    return {"update": update}


def wait_whole(page: Any, title: str) -> None:
    """Waits until the card titled `title` is open and drawn whole: the page opens it when the
    request about it arrives, in the same message as its buttons."""
    page.wait_for_function(
        polling=POLL,
        arg=title,
        expression="""(title) => [...document.querySelectorAll(
          '.acpnb-tv-asked details.acpnb-tool')].some((d) => d.open
          && d.querySelector('summary').textContent.includes(title))""",
        timeout=60_000,
    )


def test_the_permission_card_shows_what_is_asked_and_says_what_was_decided(page, lab) -> None:
    steps = [
        {"say": "I will edit the notes, then run the script."},
        edit("pending"),
        {
            "permission": {"toolCallId": "e1", "title": "Edit notes.md", "kind": "edit"},
            "options": OPTIONS,
        },
        edit("failed", again=True),
        execute("pending"),
        {
            "permission": {"toolCallId": "x1", "title": "Run the script", "kind": "execute"},
            "options": OPTIONS,
        },
        execute("completed", again=True),
        {"say": "All done."},
    ]
    run(page, lab, "perm-card.ipynb", cell(*steps))
    out = output(page)
    card = out.locator(".acpnb-perm", has_text="Edit notes.md")
    buttons = card.locator("button.acpnb-permission-option")
    buttons.first.wait_for()
    # The agent's names; the lying one with our words for its kind; the kind in the tooltip.
    assert buttons.all_inner_texts() == [
        "Allow",
        "Always allow",
        "Reject",
        "Reject (allows always)",
    ]
    assert "allow_always" in (buttons.nth(3).get_attribute("title") or "")
    # No line repeating the options above them.
    assert "options:" not in card.inner_text()
    # The edit's card is open, its diff whole in a box that scrolls (past ~30 lines), in view.
    wait_whole(page, "Edit notes.md")
    diff = out.locator(".acpnb-tv-asked pre.acpnb-diff")
    assert diff.count() == 1 and "acpnb-tv-short" not in (diff.get_attribute("class") or "")
    assert out.locator(".acpnb-tv-asked button.acpnb-tv-more").count() == 0
    diff.scroll_into_view_if_needed()
    box = diff.bounding_box()
    height, scrolls = diff.evaluate("p => [p.clientHeight, p.scrollHeight > p.clientHeight]")
    line = diff.evaluate("p => parseFloat(getComputedStyle(p).lineHeight)")
    assert box is not None and box["height"] > 0 and diff.is_visible()
    assert 27 * line < height < 33 * line + 20 and scrolls, (height, line)
    view = page.viewport_size
    assert view is not None and box["y"] >= 0 and box["y"] + 20 * line < view["height"]
    shoot(page, "permission-edit")
    buttons.nth(2).click()  # Reject

    # The turn goes on: the command's card is open with the command, its Input shown.
    run_card = out.locator(".acpnb-perm", has_text="Run the script")
    run_card.locator("button.acpnb-permission-option").first.wait_for()
    wait_whole(page, "Run the script")
    command = out.locator(".acpnb-tv-asked details.acpnb-tool pre.acpnb-term")
    assert command.inner_text().splitlines() == ["$ echo step 0", *SCRIPT.splitlines()[1:]]
    assert command.is_visible() and "acpnb-tv-short" not in (command.get_attribute("class") or "")
    # Its raw input too, opened.
    assert (
        out.locator(".acpnb-tv-asked details:not(.acpnb-tool)[open]", has_text="Input").count() == 1
    )
    assert "options:" not in run_card.inner_text()
    # The rejected edit says so, not "failed".
    edited = out.locator("details.acpnb-tool", has_text="Edit notes.md").locator("summary")
    assert "⊘ rejected" in edited.inner_text() and "failed" not in edited.inner_text()
    shoot(page, "permission-execute")
    run_card.get_by_role("button", name="Allow", exact=True).click()

    done(page)
    # The record: the options, the chosen one marked; the edit rejected; the command ran.
    record = output(page)
    assert record.locator(".acpnb-answer", has_text="All done.").count() == 1
    edit_perm = record.locator(".acpnb-perm", has_text="Edit notes.md")
    # The options as their buttons read: the lying one with our words for its kind.
    assert "options: Allow · Always allow · ✓ Reject · Reject (allows always)" in (
        edit_perm.inner_text()
    )
    assert edit_perm.locator(".acpnb-chosen").inner_text() == "✓ Reject"
    assert "rejected by the user" in edit_perm.inner_text()
    summaries = record.locator("details.acpnb-tool > summary").all_inner_texts()
    assert any("Edit notes.md" in s and "⊘ rejected" in s for s in summaries), summaries
    assert any("Run the script" in s and "✓ completed" in s for s in summaries), summaries
    nb = save(page, lab, "perm-card.ipynb")
    saved = "".join(
        "".join(o.get("data", {}).get("text/plain", "")) for o in nb["cells"][0]["outputs"]
    )
    assert "⊘ edit: Edit notes.md — rejected" in saved
    assert "Run the script → allowed once by the user" in saved
