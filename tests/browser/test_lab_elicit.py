"""The agent's questions (elicitation/create) in the live turn view, in JupyterLab: a form
answered by typing and clicking (a wrong answer is said by its field and nothing typed is lost),
and a link declined (issue 11); a form answered from the keyboard, laid out in a grid, in the
dark theme too, and its record (issue 23, item 11). Screenshots: test-artifacts/lab-elicit-*.png.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.blocking import open_fifo_ends, raised_within
from tests.browser.test_lab import POLL, READY, command, output
from tests.browser.test_lab_view import ARTIFACTS, cell, done, run, save
from tests.browser.test_lab_view_more import COLOURS, contrast
from tests.client_helpers import reports
from tests.nb_util import answer

# What these tests check is in the notebook each opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

FORM = {
    "message": "Who <b>are</b> you?",
    "mode": "form",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name"},
            "age": {"type": "integer", "minimum": 0},
            "colour": {"type": "string", "enum": ["red", "green"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        },
        "required": ["name"],
    },
}
LINK = {
    "message": "Sign in",
    "mode": "url",
    "url": "https://login.example.com/device?code=42",
    "elicitationId": "el-1",
}


def ask(params: dict[str, Any]) -> dict[str, Any]:
    return {"request": "elicitation/create", "params": params}


DEPLOY = {
    "message": "Where shall I deploy it?",
    "mode": "form",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Service", "description": "lower case, no spaces"},
            "replicas": {"type": "integer", "title": "How many replicas to run", "minimum": 1},
            "region": {"type": "string", "title": "Region", "enum": ["eu", "us"]},
            "public": {"type": "boolean", "title": "Public"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "notes": {"type": "string", "title": "Notes", "maxLength": 2000},
        },
        "required": ["name", "replicas"],
    },
}
#: The name of the field that has the keyboard ("" when none has).
FOCUSED = "() => document.activeElement?.closest('.acpnb-tv-field')?.dataset.name || ''"
#: Each field's label and input boxes, left to right: [label left, label right, input left,
#: input top, input bottom], and its description's left and top ([] when it has none).
BOXES = """(form) => [...form.querySelectorAll('.acpnb-tv-field')].map((row) => {
  const box = (sel) => row.querySelector(sel)?.getBoundingClientRect();
  const [t, i] = [box('.acpnb-tv-field-title'), box('.acpnb-tv-input')];
  const d = box('.acpnb-tv-field-desc');
  return {name: row.dataset.name, label: [t.left, t.right], input: [i.left, i.top, i.bottom],
          desc: d ? [d.left, d.top] : []};
})"""


def focused_on(page: Any, name: str) -> None:
    page.wait_for_function(
        polling=POLL, expression=f"() => ({FOCUSED})() === {name!r}", timeout=30_000
    )


def answers(page: Any, lab: Any, name: str) -> list[Any]:
    saved = save(page, lab, name)
    texts = [
        answer(o["data"]["application/vnd.acp-notebook.turn+json"])
        for o in saved["cells"][0]["outputs"]
        if "application/vnd.acp-notebook.turn+json" in o.get("data", {})
    ]
    return [r.get("result") for t in texts for r in reports(t, "RESPONSE ")]


def test_a_form_is_answered_by_typing_and_clicking(page, lab) -> None:
    run(page, lab, "elicit.ipynb", cell(ask(FORM), {"say": "thanks"}))
    out = output(page)
    form = out.locator(".acpnb-elicit .acpnb-tv-form")
    form.wait_for()
    assert out.locator(".acpnb-running", has_text="waiting for you").count() == 1
    assert out.locator(".acpnb-elicit", has_text="Who <b>are</b> you?").count() == 1  # as text
    # Submitting without the required name: said under the form, the rest stays as typed.
    form.locator("[data-name=age] input").fill("36")
    form.locator("button", has_text="Submit").click()
    error = form.locator("[data-name=name] .acpnb-tv-field-error")
    error.filter(has_text="Your name is required").wait_for()
    assert form.locator("[data-name=age] input").input_value() == "36"
    form.locator("[data-name=name] input").fill("Ada")
    form.locator("[data-name=colour] select").select_option("green")
    form.locator("[data-name=tags] input[value=b]").check()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "lab-elicit-form.png"), full_page=True)
    form.locator("button", has_text="Submit").click()
    done(page)
    assert answers(page, lab, "elicit.ipynb") == [
        {
            "action": "accept",
            "content": {"name": "Ada", "age": 36, "colour": "green", "tags": ["b"]},
        }
    ]
    assert out.locator(".acpnb-elicit", has_text="answered").count() == 1
    assert out.locator("button:not(.acpnb-tv-copy)").count() == 0


def test_a_link_shows_its_host_and_can_be_declined(page, lab) -> None:
    run(page, lab, "link.ipynb", cell(ask(LINK), {"say": "ok"}))
    out = output(page)
    form = out.locator(".acpnb-elicit .acpnb-tv-form")
    form.wait_for()
    assert "Opens login.example.com" in form.inner_text()
    link = form.locator("a")
    assert link.get_attribute("href") == LINK["url"]
    assert link.get_attribute("rel") == "noopener noreferrer"
    form.locator("button", has_text="Decline").click()
    done(page)
    assert answers(page, lab, "link.ipynb") == [{"action": "decline"}]
    assert out.locator(".acpnb-elicit", has_text="declined").count() == 1
    # The record shows the link as text with its host, never as a link to follow.
    assert out.locator(".acpnb-elicit", has_text="host login.example.com").count() == 1
    assert out.locator("a[href*='login.example.com']").count() == 0


def test_a_form_is_answered_from_the_keyboard(page, lab) -> None:
    """Issue 23, item 11: the form takes the keyboard on its first field, with a ring that shows
    it; Escape does nothing; Enter submits, a mistake is said by its field (which gets the
    keyboard) and nothing typed is lost; a long text field keeps its new lines; the agent gets
    the answer; the record lists each field with its answer, live and reopened."""
    run(page, lab, "keys.ipynb", cell(ask(DEPLOY), {"say": "deployed"}))
    out = output(page)
    form = out.locator(".acpnb-elicit .acpnb-tv-form")
    form.wait_for()
    focused_on(page, "name")
    style = "() => { const s = getComputedStyle(document.activeElement);"
    ring = page.evaluate(style + " return [s.outlineStyle, parseFloat(s.outlineWidth)]; }")
    assert ring[0] != "none" and ring[1] >= 2, ring
    page.keyboard.type("web")
    page.keyboard.press("Escape")  # nothing: the form stays, as typed
    page.keyboard.press("Shift+Enter")  # not JupyterLab's run-cell: the form's own Enter
    error = form.locator("[data-name=replicas] .acpnb-tv-field-error")
    error.filter(has_text="How many replicas to run is required").wait_for()
    focused_on(page, "replicas")  # where the mistake is
    assert form.locator("[data-name=name] input").input_value() == "web"
    assert page.locator(".jp-Notebook .jp-Cell").count() == 1  # the cell did not run again
    page.keyboard.type("3")
    notes = form.locator("[data-name=notes] textarea")
    notes.click()
    page.keyboard.type("first")
    page.keyboard.press("Enter")  # a new line in a text area
    page.keyboard.type("second")
    form.locator("[data-name=region] select").select_option("us")
    form.locator("[data-name=replicas] input").press("Enter")
    done(page)
    assert answers(page, lab, "keys.ipynb") == [
        {
            "action": "accept",
            "content": {
                "name": "web",
                "replicas": 3,
                "region": "us",
                "public": False,
                "notes": "first\nsecond",
            },
        }
    ]
    expected = [
        "Service: web",
        "How many replicas to run: 3",
        "Region: us",
        "Public: False",
        "tags: —",
        "Notes: first second",
    ]
    for when in ("live", "reopened"):
        card = out.locator(".acpnb-elicit")
        assert "answered" in card.inner_text(), when
        assert card.locator(".acpnb-elicit-answers li").all_inner_texts() == expected, when
        assert "fields:" not in card.inner_text() and "asked for" not in card.inner_text()
        if when == "live":
            page.reload()
            page.wait_for_function(polling=POLL, expression=READY, timeout=60_000)
            out.locator(".acpnb-elicit-answers").wait_for()
    assert page.get_by_text("Error displaying widget").count() == 0


def test_a_form_lines_up_and_says_each_refusal_in_the_dark_theme(page, lab) -> None:
    """Issue 23, item 11: labels in one column and inputs in another, a description under its
    input, no "fields:" line repeating the form while it is shown; in the dark theme, readable
    and with a focus ring; the same mistake twice is said twice (the buttons came back)."""
    run(page, lab, "grid.ipynb", cell(ask(DEPLOY), {"say": "ok"}), theme="JupyterLab Dark")
    out = output(page)
    form = out.locator(".acpnb-elicit .acpnb-tv-form")
    form.wait_for()
    page.wait_for_function(
        polling=POLL, expression="() => document.body.dataset.jpThemeLight === 'false'"
    )
    card = out.locator(".acpnb-elicit").inner_text()
    assert "fields:" not in card and "asked for" not in card, card
    boxes = form.evaluate(BOXES)
    assert [b["name"] for b in boxes] == list(DEPLOY["requestedSchema"]["properties"])
    assert len({round(b["label"][0]) for b in boxes}) == 1, boxes  # labels' left edges
    assert len({round(b["input"][0]) for b in boxes}) == 1, boxes  # inputs' left edges
    assert all(b["input"][0] > max(c["label"][1] for c in boxes) for b in boxes), boxes
    (described,) = [b for b in boxes if b["desc"]]
    assert round(described["desc"][0]) == round(described["input"][0])  # under its input
    assert described["desc"][1] >= described["input"][2] - 1
    focused_on(page, "name")
    ring = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert ring != "none"
    submit = form.locator("button", has_text="Submit")
    for _ in range(2):  # nothing typed: refused twice, and the form can be sent again
        submit.click()
        page.wait_for_function(
            polling=POLL,
            expression="() => { const b = [...document.querySelectorAll('.acpnb-tv-form button')]"
            ".find((x) => x.textContent === 'Submit'); return b && !b.disabled; }",
            timeout=30_000,
        )
        assert "Service is required" in form.locator("[data-name=name]").inner_text()
    checked = page.evaluate(
        COLOURS,
        ".acpnb-tv .acpnb-tv-field-title, .acpnb-tv .acpnb-tv-field-desc, "
        ".acpnb-tv .acpnb-tv-field-error, .acpnb-tv .acpnb-tv-choice, "
        ".acpnb-tv .acpnb-tv-form button",
    )
    assert len(checked) >= 8, checked
    low = [(c, round(contrast(c["fg"], c["bg"]), 2)) for c in checked]
    assert all(r >= 4.5 for _, r in low), [x for x in low if x[1] < 4.5]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "lab-elicit-grid-dark.png"), full_page=True)
    form.locator("button", has_text="Decline").click()
    done(page)
    assert answers(page, lab, "grid.ipynb") == [{"action": "decline"}]
    record = out.locator(".acpnb-elicit").inner_text()
    assert "asked for: Service, How many replicas to run, Region, Public, tags, Notes" in record
    command(page, "apputils:change-theme", {"theme": "JupyterLab Light"})


def test_a_form_leaves_the_keyboard_to_someone_typing_elsewhere(page, lab) -> None:
    """A form that appears takes the keyboard only when nobody types elsewhere: an agent must
    not catch the keys (nor the Enter) meant for another cell. Clicked, Enter submits it."""
    fifo = lab[2] / "elicit.fifo"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    steps = ({"say": "working"}, {"wait_fifo": str(fifo)}, ask(FORM), {"say": "thanks"})
    run(page, lab, "typing.ipynb", cell(*steps), "")
    out = output(page)
    out.get_by_text("working").first.wait_for(timeout=60_000)
    editor = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".cm-content")
    editor.click()
    page.keyboard.type("x = 1")
    # The agent asks now, while the person types in the next cell.
    assert raised_within(lambda: fifo.write_text("go"), open_fifo_ends(fifo), 30) is None
    form = out.locator(".acpnb-elicit .acpnb-tv-form")
    form.wait_for()
    page.keyboard.type("2")
    assert editor.inner_text() == "x = 12"
    assert form.locator("[data-name=name] input").input_value() == ""
    form.locator("[data-name=name] input").click()
    page.keyboard.type("Ada")
    page.keyboard.press("Enter")
    done(page)
    assert answers(page, lab, "typing.ipynb") == [{"action": "accept", "content": {"name": "Ada"}}]
