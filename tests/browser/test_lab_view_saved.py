"""A notebook saved while a turn runs (JupyterLab autosaves), in headless Chromium: issue 12's
"the saved notebook reads without a kernel".

At each save the live view puts a static snapshot of itself after its own output (turn_view.js,
`snapshot`): hidden on the live page, shown instead of "Error displaying widget: model not found"
where the widget's model is gone; when the turn ends the record stands alone. Screenshots:
test-artifacts/lab-view-saved-*.png.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from tests.browser.test_lab import POLL, READY, output
from tests.browser.test_lab_view import MIME_TURN, WIDGET, cell, done, run, save, shoot

# What these tests check is in the notebook each opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

SAVED = "running when the notebook was saved"


def snapshots(nb: dict[str, Any]) -> list[dict[str, Any]]:
    """The saved snapshot outputs of the first cell."""
    outputs = nb["cells"][0]["outputs"]
    return [o for o in outputs if o.get("metadata", {}).get("acp_notebook", {}).get("snapshot_of")]


def html(output: dict[str, Any]) -> str:
    """The snapshot's markup, after its stylesheet."""
    return "".join(output["data"]["text/html"]).rpartition("</style>")[2]


def test_a_notebook_saved_mid_turn_reopens_with_its_snapshot(page, lab) -> None:
    steps = [
        {"say": "A long job, half done.\n\n- first step\n- second step"},
        {"think": "weighing the rest"},
        {"sleep": 60},
    ]
    run(page, lab, "saved-live.ipynb", cell(*steps))
    out = output(page)
    out.locator(".acpnb-tv .acpnb-thought").first.wait_for()
    view = out.locator(".acpnb-tv-view")
    view.evaluate("el => { el.__before_save = true; }")
    nb = save(page, lab, "saved-live.ipynb")
    # The file: the widget's output, then one snapshot of what had arrived, without buttons.
    bundles = [o.get("data", {}) for o in nb["cells"][0]["outputs"]]
    assert sum(WIDGET in b for b in bundles) == 1
    (snap,) = snapshots(nb)
    token = snap["metadata"]["acp_notebook"]["snapshot_of"]
    outputs = nb["cells"][0]["outputs"]
    assert token in "".join(outputs[outputs.index(snap) - 1]["data"]["text/plain"])
    assert "A long job, half done." in html(snap) and SAVED in html(snap)
    assert "<button" not in html(snap) and "acpnb-running" not in html(snap)
    # Its text keeps the answer's paragraphs and items apart (the markup has no newline between
    # its tags: textContent read "half done.first stepsecond step").
    plain = "".join(snap["data"]["text/plain"])
    assert "half done.\n" in plain and "first step\nsecond step" in plain, plain
    size = len(json.dumps(snap))
    print(
        f"snapshot: {size} chars saved, {size - len(html(snap))} of them stylesheet and text/plain"
    )
    # The live page: the same view, still running, and no second copy shown.
    assert view.evaluate("el => el.__before_save === true"), "the live view was redrawn"
    assert out.locator(".acpnb-running").count() == 1
    assert page.locator(".jp-Notebook .acpnb-tv-snap").count() == 1
    assert not page.locator(".jp-Notebook .acpnb-tv-snap").is_visible()
    seen = out.get_by_text("A long job, half done.").filter(visible=True)
    assert seen.count() == 1, seen.evaluate_all("es => es.map(e => e.outerHTML.slice(0, 300))")
    # Saved again (the save awaited), the one snapshot is refreshed, not doubled.
    page.evaluate("() => window.jupyterapp.shell.currentWidget.context.save()")
    assert len(snapshots(json.loads((lab[2] / "saved-live.ipynb").read_text()))) == 1
    # The saved file opened where that widget's model does not exist (a new kernel).
    root = lab[2]
    shutil.copy(root / "saved-live.ipynb", root / "saved-live-copy.ipynb")
    page.goto(f"{lab[0]}/doc/tree/saved-live-copy.ipynb?token={lab[1]}&reset")
    page.wait_for_function(polling=POLL, expression=READY, timeout=60_000)
    shown = output(page).locator(".acpnb-tv-snap")
    shown.get_by_text("A long job, half done.").wait_for(timeout=30_000)
    assert shown.get_by_text(SAVED).is_visible()
    error = page.get_by_text("model not found")
    error.wait_for(state="attached", timeout=30_000)
    assert not error.is_visible()
    assert (
        page.locator(".jp-Notebook .acpnb-running, .jp-Notebook button.acpnb-tv-stop").count() == 0
    )
    shoot(page, "saved-reopened")


def test_a_turn_that_ends_after_a_save_leaves_its_record_once(page, lab) -> None:
    steps = [
        {"say": "First half."},
        {"permission": {"toolCallId": "e1", "title": "Edit notes.md", "kind": "edit"}},
        {"say": " Second half."},
    ]
    run(page, lab, "saved-ends.ipynb", cell(*steps))
    out = output(page)
    allow = out.locator("button.acpnb-permission-option", has_text="Allow once")
    allow.wait_for()  # the turn waits for the click: saved while it is live
    (snap,) = snapshots(save(page, lab, "saved-ends.ipynb"))
    assert "First half." in html(snap) and "<button" not in html(snap)
    allow.click()
    done(page)  # also: no snapshot left on the page (it carries .acpnb-tv)
    out.locator(".acpnb-answer", has_text="Second half").first.wait_for()
    nb = save(page, lab, "saved-ends.ipynb")
    bundles = [o.get("data", {}) for o in nb["cells"][0]["outputs"]]
    assert not snapshots(nb)
    assert not any(WIDGET in b for b in bundles)
    assert sum(MIME_TURN in b for b in bundles) == 1
    assert sum("text/html" in b for b in bundles) == 1
    assert out.get_by_text("Second half.").count() == 1
    shoot(page, "saved-ended")


def test_a_kernel_restart_after_a_save_leaves_one_copy(page, lab) -> None:
    run(page, lab, "saved-lost.ipynb", cell({"say": "A job cut short."}, {"sleep": 60}))
    out = output(page)
    out.locator(".acpnb-answer", has_text="A job cut short.").wait_for()
    assert len(snapshots(save(page, lab, "saved-lost.ipynb"))) == 1
    page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()"
    )
    out.get_by_text("the kernel went away").wait_for(timeout=30_000)
    # The view's own static copy stands in its place; the snapshot, now a second copy, is gone.
    nb = save(page, lab, "saved-lost.ipynb")
    bundles = [o.get("data", {}) for o in nb["cells"][0]["outputs"]]
    assert not snapshots(nb) and not any(WIDGET in b for b in bundles)
    assert sum("A job cut short." in "".join(b.get("text/html", "")) for b in bundles) == 1
    assert out.get_by_text("A job cut short.").count() == 1
