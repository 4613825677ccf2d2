"""The turn view's last line of defence (turn_view.js, `fragment`), in headless Chromium.

The kernel escapes every byte of the agent's, so the HTML it sends the view is its renderer's own
markup. If hostile HTML reached the view anyway, nothing of it may run or restyle the page: not
on the live page, and not in the snapshot saved in the notebook, which JupyterLab trusts when the
notebook is reopened. Here the hostile HTML is sent to a view straight from the kernel (no
renderer in between): script, on* handlers, javascript: and data: links, styles, iframe, svg and
math, forms. Screenshot: test-artifacts/lab-view-scrub.png.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from tests.browser.test_lab import POLL, READY, output
from tests.browser.test_lab_view import run, save, shoot

# What this test checks is in the notebook it opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

HOSTILE = """
<script>window.__pwned = 'script'</script>
<img src="x" onerror="window.__pwned = 'img'" alt="bad image">
<img src="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+" alt="svg image">
<img alt="fine image" style="max-width:100%" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<a href="javascript:window.__pwned = 'js-link'">js-link</a>
<a href=" JaVa&#x09;ScRiPt:window.__pwned = 'js-link-2'">js-link-2</a>
<a href="data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;">data-link</a>
<a href="vbscript:msgbox(1)">vb-link</a>
<a href="https://example.org/fine" onmouseover="window.__pwned = 'hover'">fine-link</a>
<a href="https://accounts.google.com@evil.example/">userinfo-link</a>
<a href="https://@evil.example/">empty-userinfo-link</a>
<a href="//evil.example/x">scheme-relative-link</a>
<a href="/\\evil.example/x">backslash-relative-link</a>
<a href="docs/notes.md">relative-link</a>
<p style="position:fixed;inset:0;z-index:9999;background:red" onclick="window.__pwned = 'p'">
  covering-paragraph</p>
<style>body { --pwned: 1; } .jp-Notebook { display: none; }</style>
<iframe srcdoc="&lt;script&gt;parent.__pwned = 'iframe'&lt;/script&gt;"></iframe>
<svg onload="window.__pwned = 'svg'"><a xlink:href="javascript:window.__pwned = 'svg-link'">
  <text x="10" y="20">svg-link</text></a>
  <animate onbegin="window.__pwned = 'animate'" attributeName="x" dur="1s"/></svg>
<math><maction actiontype="statusline" xlink:href="javascript:window.__pwned = 'math'">
  math-link</maction></math>
<form action="javascript:window.__pwned = 'form'"><input name="q" value="form-input">
  <button formaction="javascript:window.__pwned = 'button'">form-button</button></form>
<details open ontoggle="window.__pwned = 'toggle'"><summary>a card</summary>in the card</details>
<object data="javascript:window.__pwned = 'object'"></object>
<embed src="javascript:window.__pwned = 'embed'">
<base href="javascript:/">
<meta http-equiv="refresh" content="0;url=javascript:window.__pwned = 'meta'">
<link rel="stylesheet" href="data:text/css,body{display:none}">
<noscript><p title="</noscript><img src=x onerror=window.__pwned='noscript'>"></p></noscript>
<template><img src="x" onerror="window.__pwned = 'template'"></template>
<table><tr><td style="text-align:right" background="javascript:x">a cell</td></tr></table>
<footer><meter value=".5" high="0.8" low="x" min="-1" style="width:50%"
  onclick="window.__pwned = 'meter'" high2="1">meter</meter></footer>
<ol start="3" onfocus="window.__pwned = 'ol'"><li>third</li></ol>
<div class="jp-Dialog lm-Widget acpnb-note language-py"><b class="jp-mod-hidden">classy</b></div>
"""

# A view, with its hostile part sent when the page asks for it ("sync"), then a sentinel part.
CELL = f"""
from IPython.display import display
from acp_notebook.widgets.turn_view import TurnWidget, _widget_bundle
view = TurnWidget()
view.token = "acpnb-view-hostile"
HOSTILE = {HOSTILE!r}
head = {{"state": "streaming", "model": "", "pending": [], "forms": [], "duration": None,
         "turn": "turn-hostile"}}
def page_said(_w, content, _b):
    if isinstance(content, dict) and content.get("type") == "sync":
        ops = [{{"op": "reset"}}, {{"op": "part", "id": "bad", "html": HOSTILE}},
               {{"op": "part", "id": "end", "after": "bad", "html": "<p>all drawn</p>"}}]
        view.send({{"ops": ops, "head": head, "elapsed": 0}})
view.on_msg(page_said)
display(_widget_bundle(view), raw=True)
"""

# What the drawn parts hold that is not the renderer's (an empty list when nothing is).
LEFT = """(root) => {
  const banned = new RegExp('^(script|style|iframe|svg|math|form|input|button|object|embed|'
    + 'base|meta|link|noscript|template)$');
  const ours = /^(max-width:100%|text-align:right)$/;
  const out = [];
  for (const e of root.querySelectorAll('*')) {
    const html = e.namespaceURI === 'http://www.w3.org/1999/xhtml';
    if (!html || banned.test(e.localName)) out.push('<' + e.localName);
    for (const a of e.attributes) {
      const v = a.value.replace(/\\s/g, '').toLowerCase();
      if (a.name.startsWith('on') || a.name.includes(':')) out.push(a.name);
      const script = /^(javascript|vbscript|data):/.test(v) && !/^data:image\\/gif;/.test(v);
      if (script) out.push(a.name + '=' + v);
      if (a.name === 'style' && !ours.test(a.value)) out.push(a.value);
      for (const c of a.name === 'class' ? a.value.split(/\\s+/) : []) {
        if (!/^(acpnb-|language-|mathjax_ignore$|tex2jax_ignore$)/.test(c)) out.push('.' + c);
      }
    }
  }
  return out; }"""


def test_hostile_html_sent_to_the_view_runs_nothing_live_or_saved(page: Any, lab: Any) -> None:
    run(page, lab, "scrub.ipynb", CELL)
    out = output(page)
    parts = out.locator(".acpnb-tv .acpnb-tv-parts")
    parts.get_by_text("all drawn").wait_for(state="attached", timeout=60_000)
    assert parts.evaluate(LEFT) == []
    # Our own words and markup stay: links to the web, the card, the table, the image.
    assert parts.locator("a[href='https://example.org/fine'][rel='noopener noreferrer']").count()
    # A link that shows one host and opens another is none (issue 20, item 3); a relative
    # one to a file of this page's host stays.
    for label in ("userinfo", "empty-userinfo", "scheme-relative", "backslash-relative"):
        assert parts.get_by_text(f"{label}-link", exact=True).get_attribute("href") is None
    assert parts.get_by_text("relative-link", exact=True).get_attribute("href") == "docs/notes.md"
    assert parts.locator("details[open] summary", has_text="a card").count() == 1
    assert parts.locator("td[style='text-align:right']", has_text="a cell").count() == 1
    assert parts.locator("img[alt='fine image']").count() == 1
    assert parts.locator("img").count() == 1
    assert parts.locator("ol[start='3']").count() == 1
    # A meter keeps its number and its mark, nothing else.
    meter = parts.locator("footer > meter")
    assert meter.evaluate("(m) => m.getAttributeNames().sort().join(' ')") == "high value"
    # No class of JupyterLab's (a dialog's covers the page): the renderer's own stay.
    assert parts.get_by_text("classy").evaluate("(e) => e.parentElement.className") == (
        "acpnb-note language-py"
    )
    # Nothing to click runs anything, and no style reached the page.
    for label in ("js-link", "js-link-2", "data-link", "vb-link", "covering-paragraph"):
        parts.get_by_text(label, exact=True).click()
    parts.get_by_text("fine-link").hover()
    assert page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--pwned')") == ""
    assert page.locator(".jp-Notebook").is_visible()
    assert page.evaluate("() => window.__pwned") is None
    shoot(page, "view-scrub")

    # Saved: the snapshot holds what the view drew, nothing more; reopened (trusted, no widget
    # model), it shows and nothing runs.
    nb = save(page, lab, "scrub.ipynb")
    (snap,) = [
        o
        for o in nb["cells"][0]["outputs"]
        if o.get("metadata", {}).get("acp_notebook", {}).get("snapshot_of")
    ]
    saved = "".join(snap["data"]["text/html"])
    markup = saved.rpartition("</style>")[2]
    assert saved.count("<style>") == 1 and "all drawn" in markup
    for word in ("<script", "onerror", "javascript:", "<svg", "<math", "<iframe", "<form"):
        assert word not in markup.lower(), word
    root = lab[2]
    shutil.copy(root / "scrub.ipynb", root / "scrub-copy.ipynb")
    page.goto(f"{lab[0]}/doc/tree/scrub-copy.ipynb?token={lab[1]}&reset")
    page.wait_for_function(polling=POLL, expression=READY, timeout=60_000)
    shown = output(page).locator(".acpnb-tv-snap")
    shown.get_by_text("all drawn").wait_for(timeout=30_000)
    assert shown.evaluate(LEFT) == []
    assert page.evaluate("() => window.__pwned") is None
    assert json.loads((root / "scrub-copy.ipynb").read_text())["cells"][0]["outputs"]
