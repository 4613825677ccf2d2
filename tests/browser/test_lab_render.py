"""The turn's output in a real JupyterLab (headless Chromium): no payload runs script; and
the saved record as nbconvert's HTML shows it (with MathJax 2, as nbconvert loads it).

Output made by a cell that just ran is trusted: JupyterLab renders its `text/markdown` (marked,
after lifting math) and its `text/html` without a sanitiser. Each `ALERTS` payload
of tests/hostile_payloads.py is rendered by `render_bundle` inside the kernel and displayed as
`text/markdown` alone and as `text/html` alone; a payload that ran would raise an alert dialog
(every payload calls `alert`) or leave an element with an event handler in the page.
"""

from __future__ import annotations

from pathlib import Path

import jupyter_server_mathjax
import nbformat
import pytest
from nbconvert import HTMLExporter

from tests.browser.test_lab import ARTIFACTS, POLL, READY
from tests.hostile_payloads import ALERTS, encodable
from tests.nb_util import execute, new_nb, script, scripted

pytestmark = [pytest.mark.browser]

#: A lone surrogate cannot be sent to the page at all.
PAYLOADS = encodable(ALERTS)
#: Payloads per cell: JupyterLab shows the first 50 outputs of a cell and folds the rest.
BATCH = 12
CELL = """\
from IPython.display import display
from acp_notebook.render import render_bundle
from tests.hostile_payloads import ALERTS, encodable
from tests.hostile.test_render_hostile import hostile
for p in encodable(ALERTS)[{start}:{end}]:
    b = render_bundle(hostile(p))
    display({{"text/markdown": b["text/markdown"]}}, raw=True)
    display({{"text/html": b["text/html"]}}, raw=True)
print("rendered from {start}")
"""

HANDLERS = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('.jp-OutputArea-output *')) {
    for (const a of el.getAttributeNames())
      if (a.startsWith('on')) bad.push(el.tagName + ' ' + a);
    if (['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED', 'FORM', 'BASE', 'META'].includes(el.tagName))
      bad.push(el.tagName);
    const url = (el.getAttribute('href') || el.getAttribute('src') || '').trim().toLowerCase();
    if (/^(javascript|vbscript|data:text)/.test(url)) bad.push(el.tagName + ' ' + url);
  }
  return bad;
}"""


def test_no_payload_runs_in_jupyterlab(page, lab) -> None:
    base, token, root = lab
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    starts = range(0, len(PAYLOADS), BATCH)
    cells = [CELL.format(start=i, end=i + BATCH) for i in starts]
    nbformat.write(new_nb(*cells), root / "hostile.ipynb")
    page.goto(f"{base}/doc/tree/hostile.ipynb?token={token}&reset")
    page.wait_for_function(polling=POLL, expression=READY, timeout=60_000)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    for i in starts:
        page.get_by_text(f"rendered from {i}", exact=True).wait_for(
            state="attached", timeout=120_000
        )
    outputs = page.locator(".jp-OutputArea-output")
    assert outputs.count() >= 2 * len(PAYLOADS) + len(starts)
    # Every image has loaded or failed: an `onerror` left in the page would have fired.
    page.wait_for_function(
        polling=POLL,
        expression="() => [...document.querySelectorAll('.jp-OutputArea-output img')]"
        ".every(i => i.complete)",
    )
    assert page.evaluate(HANDLERS) == []
    assert dialogs == []


#: MathJax 2 as nbconvert loads it (its default is the same version from a CDN), from the copy
#: jupyter_server_mathjax ships: the test needs no network.
MATHJAX = Path(jupyter_server_mathjax.__file__).parent / "static" / "MathJax.js"
PRICES = "Two prices: $5 and $6, and $x^2$ stays text."


def test_nbconvert_html_shows_the_record_legibly_and_no_math(page, tmp_path) -> None:
    usage = {"sessionUpdate": "usage_update", "used": 5200, "size": 200_000}
    usage["cost"] = {"amount": 0.0031, "currency": "USD"}
    tool = {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read notes.txt"}
    tool |= {"kind": "read", "status": "completed"}
    steps = [{"update": tool}, {"say": PRICES}, {"update": usage}]
    nb = new_nb("", f"%%agent --agent {scripted()}\n{script(*steps)}")
    # The control: MathJax does typeset this page's math (else "no math" would prove nothing).
    nb.cells[0] = nbformat.v4.new_markdown_cell("Math here: $y^2$")
    saved = execute(nb, tmp_path, timeout=120)
    exporter = HTMLExporter(mathjax_url=f"{MATHJAX.as_uri()}?config=TeX-AMS-MML_HTMLorMML-full")
    body, _ = exporter.from_notebook_node(saved)
    html = tmp_path / "record.html"
    html.write_text(body, encoding="utf-8")
    page.goto(html.as_uri())
    page.locator(".jp-MarkdownCell .MathJax").first.wait_for(timeout=60_000)
    record = page.locator(".acpnb-turn")
    assert record.count() == 1  # the record once
    # Whatever MathJax queued for the page is done once a callback queued after it has run.
    page.evaluate("() => new Promise(done => window.MathJax.Hub.Queue(() => done(true)))")
    assert record.locator(".MathJax, script[type^='math/tex']").count() == 0
    answer = record.locator(".acpnb-answer")
    assert PRICES in answer.inner_text()
    footer = record.locator("footer").inner_text()
    assert "$0.0031 this turn" in footer and "done" in footer
    # Legible without the live view's stylesheet: the card says what ran and how it ended, and
    # the text is dark enough on the white page and of a readable size.
    assert "Read notes.txt" in record.locator(".acpnb-tool summary").inner_text()
    assert "completed" in record.locator(".acpnb-tool summary").inner_text()
    style = answer.evaluate(
        "e => { const s = getComputedStyle(e); return [s.color, parseFloat(s.fontSize)]; }"
    )
    rgb = [int(x) for x in style[0][style[0].index("(") + 1 : style[0].index(")")].split(",")[:3]]
    assert sum(rgb) < 3 * 110 and style[1] >= 12, style
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "nbconvert-record.png"), full_page=True)
