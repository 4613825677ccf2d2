"""The turn's output in a real JupyterLab (headless Chromium): no payload runs script.

Output made by a cell that just ran is trusted: JupyterLab renders its `text/markdown` (marked,
after lifting math) and its `text/html` without a sanitiser. Each `ALERTS` payload
of tests/hostile_payloads.py is rendered by `render_bundle` inside the kernel and displayed as
`text/markdown` alone and as `text/html` alone; a payload that ran would raise an alert dialog
(every payload calls `alert`) or leave an element with an event handler in the page.
"""

from __future__ import annotations

import nbformat
import pytest

from tests.hostile_payloads import ALERTS, encodable
from tests.nb_util import new_nb
from tests.test_lab import READY

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

#: A lone surrogate cannot be sent to the page at all.
PAYLOADS = encodable(ALERTS)
#: Payloads per cell: JupyterLab shows the first 50 outputs of a cell and folds the rest.
BATCH = 12
CELL = """\
from IPython.display import display
from acp_notebook.render import render_bundle
from tests.hostile_payloads import ALERTS, encodable
from tests.test_render_hostile import hostile
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
    page.wait_for_function(READY, timeout=60_000)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    for i in starts:
        page.get_by_text(f"rendered from {i}", exact=True).wait_for(
            state="attached", timeout=120_000
        )
    outputs = page.locator(".jp-OutputArea-output")
    assert outputs.count() >= 2 * len(PAYLOADS) + len(starts)
    # Every image has loaded or failed: an `onerror` left in the page would have fired.
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-OutputArea-output img')].every(i => i.complete)"
    )
    assert page.evaluate(HANDLERS) == []
    assert dialogs == []
