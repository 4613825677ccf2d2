"""A saved record reads as cards wherever it is shown (issue 23, items 4 and 8), in Chromium.

The record carries its own compact stylesheet (render/style.py, `RECORD_STYLE`): a notebook
JupyterLab saved, reopened in a fresh page where no turn ran (no live view's CSS in it), and the
`jupyter nbconvert --to html` page of a notebook run headless, each in the light and the dark
theme, show a completed badge in its colour, a failed one in another, a diff line on its
background and a card in its border: none of these is so without the stylesheet (the colour is
the text's, the background transparent, no border). And the live footer against the record's:
the model it showed is in the record, and the record's time with its start-up is the clock's.
Screenshots: test-artifacts/record-look-*.png.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import nbformat
import pytest
from nbconvert import HTMLExporter

from tests.agents.script import script
from tests.browser.test_lab import ARTIFACTS, POLL, READY, command, output
from tests.browser.test_lab_view import cell, done, run, save, tool
from tests.nb_util import execute, scripted

pytestmark = [pytest.mark.browser]

DIFF = {"type": "diff", "path": "/w/notes.md", "oldText": "a\n", "newText": "b\n"}
STEPS: list[dict[str, Any]] = [
    tool(1, text="line 1\n"),
    tool(2, status="failed", text="no such file"),
    {"update": {**tool(3)["update"], "title": "Edit notes.md", "kind": "edit", "content": [DIFF]}},
    {"say": "Read, failed once, edited."},
]

#: What the record's look is made of, read in the page: each colour as the page computes it, and
#: what the same property reads on the record's root (the colour a badge would inherit).
LOOK = """rec => {
  const get = (sel, prop) => { const e = rec.querySelector(sel);
                               return e ? getComputedStyle(e)[prop] : null; };
  return {
    text: getComputedStyle(rec).color,
    ok: get('.acpnb-tool>summary>b:not([class])', 'color'),
    failed: get('.acpnb-tool>summary>b.acpnb-st-failed', 'color'),
    add: get('.acpnb-add', 'backgroundColor'),
    border: get('.acpnb-tool', 'borderTopWidth'),
    footer: get('footer', 'borderTopWidth'),
    styles: rec.querySelectorAll('style').length,
  };
}"""
CLEAR = "rgba(0, 0, 0, 0)"


def look(record: Any) -> dict[str, Any]:
    found: dict[str, Any] = record.evaluate(LOOK)
    return found


# How light the theme's page colour is, once its stylesheet applies (0 black .. 255 white): the
# theme's flag on <body> is set before that, and the server's theme is whatever the last test of
# this worker left (a dark one, after test_lab_markdown).
BRIGHTNESS = """() => {
  const probe = document.createElement('div');
  probe.style.background = 'var(--jp-layout-color0)';
  document.body.append(probe);
  const rgb = getComputedStyle(probe).backgroundColor.match(/[0-9.]+/g) || [];
  probe.remove();
  return rgb.length >= 3 ? (+rgb[0] + +rgb[1] + +rgb[2]) / 3 : -1;
}"""


def set_theme(page: Any, theme: str) -> None:
    """Switch JupyterLab's theme and wait until its colours apply."""
    command(page, "apputils:change-theme", {"theme": theme})
    test = "> 128" if theme == "JupyterLab Light" else "< 128"
    page.wait_for_function(
        polling=POLL,
        expression=f"() => {{ const b = ({BRIGHTNESS})(); return b >= 0 && b {test}; }}",
    )


def assert_cards(found: dict[str, Any]) -> None:
    """Badges in colours of their own, a diff line on a background, cards and footer ruled."""
    assert found["ok"] and found["ok"] != found["text"], found
    assert found["failed"] and found["failed"] not in (found["text"], found["ok"]), found
    assert found["add"] not in (None, CLEAR), found
    assert found["border"] == "1px" and found["footer"] == "1px", found


def shoot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"record-look-{name}.png"), full_page=True)


def test_a_saved_record_reopened_in_a_fresh_page_shows_cards_light_and_dark(page, lab) -> None:
    run(page, lab, "record-look.ipynb", cell(*STEPS, session="look"))
    done(page)
    nb = save(page, lab, "record-look.ipynb")
    (html,) = ["".join(o["data"]["text/html"]) for o in nb["cells"][0]["outputs"] if "data" in o]
    assert html.count("<style>") == 1  # the record's own, once
    root = lab[2]
    shutil.copy(root / "record-look.ipynb", root / "record-look-copy.ipynb")
    fresh = page.context.new_page()  # a JupyterLab where no turn ran: no live view's CSS
    try:
        fresh.goto(f"{lab[0]}/doc/tree/record-look-copy.ipynb?token={lab[1]}&reset")
        fresh.wait_for_function(polling=POLL, expression=READY, timeout=60_000)
        record = output(fresh).locator(".acpnb-turn")
        record.get_by_text("Read, failed once, edited.").wait_for(timeout=30_000)
        assert fresh.locator(".acpnb-tv").count() == 0  # no live view came with it
        set_theme(fresh, "JupyterLab Light")
        light = look(record)
        assert light["styles"] == 1
        assert_cards(light)
        shoot(fresh, "lab-light")
        set_theme(fresh, "JupyterLab Dark")
        dark = look(record)
        assert_cards(dark)
        assert dark["ok"] != light["ok"] and dark["text"] != light["text"]  # the theme's own
        shoot(fresh, "lab-dark")
        set_theme(fresh, "JupyterLab Light")  # the server's setting, for this worker's next test
    finally:
        fresh.close()


def test_the_nbconvert_html_of_a_saved_notebook_shows_cards(page, tmp_path) -> None:
    agent = scripted()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"%%agent --agent {agent}\n{script(*STEPS)}")]
    saved = execute(nb, tmp_path, timeout=120)
    found: dict[str, dict[str, Any]] = {}
    # JupyterLab's light and dark themes as nbconvert ships them, and its bare template (no
    # JupyterLab variables: the record's own fallbacks) in a page that prefers dark.
    for name, exporter, scheme in (
        ("light", HTMLExporter(), "light"),
        ("dark", HTMLExporter(theme="dark"), "light"),
        ("bare-dark", HTMLExporter(template_name="basic"), "dark"),
        ("bare-light", HTMLExporter(template_name="basic"), "light"),
    ):
        body, _ = exporter.from_notebook_node(saved)
        path = tmp_path / f"{name}.html"
        path.write_text(body, encoding="utf-8")
        page.emulate_media(color_scheme=scheme)
        page.goto(path.as_uri())
        record = page.locator(".acpnb-turn")
        assert record.count() == 1
        found[name] = look(record)
        assert_cards(found[name])
        shoot(page, f"nbconvert-{name}")
    page.emulate_media(color_scheme="light")
    assert found["dark"]["ok"] != found["light"]["ok"]
    # Without a theme's variables, the fallbacks follow the reader's colour scheme.
    assert found["bare-dark"]["ok"] == "rgb(102, 187, 106)"
    assert found["bare-light"]["ok"] == "rgb(46, 125, 50)"


MODEL = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "type": "select",
    "currentValue": "m9",
    "options": [{"value": "m9", "name": "Model Nine"}],
}
#: The live footer's model and clock, each time they change (the view redraws them in place).
WATCH = """() => {
  window.__footer = [];
  new MutationObserver(() => {
    const m = document.querySelector('.jp-Notebook .acpnb-tv-model')?.textContent || '';
    const c = document.querySelector('.jp-Notebook .acpnb-tv-clock')?.textContent || '';
    const last = window.__footer[window.__footer.length - 1];
    if (c && (!last || last.c !== c || last.m !== m)) window.__footer.push({m, c});
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def seconds(text: str) -> float:
    return float(text.replace("\u00a0", " ").split(" s")[0])


def test_the_record_footer_says_what_the_live_footer_did(page, lab) -> None:
    steps = [
        {"update": {"sessionUpdate": "config_option_update", "configOptions": [MODEL]}},
        {"say": "Working on it."},
        {"sleep": 1.5},
        {"say": " Done."},
    ]
    run(page, lab, "record-footer.ipynb", cell(*steps, session="footer-new"))
    page.evaluate(WATCH)
    done(page)
    seen = page.evaluate("() => window.__footer")
    assert any(s["m"] == "Model Nine" for s in seen), seen  # the live footer showed the model
    clock = max(seconds(s["c"]) for s in seen)
    footer = output(page).locator(".acpnb-turn > footer").inner_text().replace("\u00a0", " ")
    assert "Model Nine" in footer, footer
    # The record's time is the turn's; with the start-up it says, it is the clock's last reading.
    match = re.search(r"(\d+\.\d) s(?: \(\+(\d+\.\d) s start-up\))?", footer)
    assert match, footer
    total = float(match[1]) + float(match[2] or 0)
    assert abs(total - clock) <= 0.8, (footer, seen[-3:])
    shoot(page, "footer")
