"""The agent's questions (elicitation/create) in the live turn view, in JupyterLab: a form
answered by typing and clicking (a wrong answer is said under it and nothing typed is lost), and
a link declined. Issue 11."""

from __future__ import annotations

from typing import Any

import pytest

from tests.client_helpers import reports
from tests.nb_util import answer
from tests.test_lab import output
from tests.test_lab_view import ARTIFACTS, cell, done, run, save

# What these tests check is in the notebook each opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page, pytest.mark.timeout(240)]

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
    error = form.locator(".acpnb-tv-form-error")
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
