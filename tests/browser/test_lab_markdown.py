"""The answer's Markdown drawn as it streams, in JupyterLab (headless Chromium), issue 23 item 3.

A scripted agent sends Markdown a few characters at a time and waits on a FIFO twice: while it
waits the test reads the live view. Before the turn ends the page shows a rendered <strong>,
<blockquote> and <li>, a highlighted code block with a copy button that copies its code, in the
dark theme with the theme's editor colours; and the record at the end holds the very HTML that
streamed (nothing moves). Screenshot: test-artifacts/lab-view-markdown-streaming.png.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.blocking import open_fifo_ends, raised_within
from tests.browser.test_lab import POLL, command, open_notebook, output
from tests.browser.test_lab_view import cell, done, run, shoot
from tests.browser.test_lab_view_more import clipboard
from tests.nb_util import new_nb

pytestmark = [pytest.mark.browser]

FIRST = (
    "Some **bold** words.\n\n> a quoted line\n\n- one\n- two\n\n"
    "```python\ndef f(x):\n    return 1  # one\n```\n\nAnd "
)
SECOND = "the *end*.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
#: The answer's HTML without the page's buttons: what the reader sees of it.
ANSWER_HTML = """(root) => {
  const a = root.querySelector('.acpnb-answer').cloneNode(true);
  a.querySelectorAll('button').forEach((b) => b.remove());
  return a.innerHTML;
}"""


def slowly(text: str, size: int = 7) -> list[dict[str, Any]]:
    """`text` said `size` characters at a time, a little apart (a chunk boundary anywhere)."""
    steps: list[dict[str, Any]] = []
    for i in range(0, len(text), size):
        steps += [{"say": text[i : i + size]}, {"sleep": 0.03}]
    return steps


def release(fifo: Any) -> None:
    assert raised_within(lambda: fifo.write_text("go"), open_fifo_ends(fifo), 30) is None


def test_markdown_is_drawn_as_it_streams_and_the_record_is_the_same(page, lab) -> None:
    fifos = [lab[2] / f"md-{i}.fifo" for i in (1, 2)]
    for fifo in fifos:
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
    steps = [
        *slowly(FIRST),
        {"wait_fifo": str(fifos[0])},
        *slowly(SECOND),
        {"wait_fifo": str(fifos[1])},
    ]
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab[0])
    run(page, lab, "markdown.ipynb", cell(*steps), theme="JupyterLab Dark")
    out = output(page)
    live = out.locator(".acpnb-tv")
    answer = live.locator(".acpnb-answer")
    # The agent waits on the first FIFO: the turn runs, its Markdown is already drawn.
    answer.locator("pre > code .k").first.wait_for(timeout=60_000)
    assert out.locator(".acpnb-running").count() == 1
    assert answer.locator("strong").inner_text() == "bold"
    assert answer.locator("blockquote").inner_text() == "a quoted line"
    assert answer.locator("li").all_inner_texts() == ["one", "two"]
    assert "**" not in answer.inner_text() and "> a" not in answer.inner_text()
    code = answer.locator("pre > code.language-python")
    assert code.locator(".k").first.inner_text().strip() == "def"
    assert code.locator(".c").inner_text().strip() == "# one"
    # Highlighted in the dark theme's editor colours (its keyword colour, not the text's).
    colours = page.evaluate(
        """() => {
          const k = document.querySelector('.acpnb-tv pre > code .k');
          const probe = document.createElement('span');
          probe.style.color = 'var(--jp-mirror-editor-keyword-color)';
          k.parentElement.append(probe);
          const out = [getComputedStyle(k).color, getComputedStyle(probe).color,
                       getComputedStyle(k.parentElement).color];
          probe.remove();
          return out;
        }"""
    )
    assert colours[0] == colours[1] and colours[0] != colours[2], colours
    copy = answer.locator("pre button.acpnb-tv-codecopy")
    assert copy.count() == 1
    copy.click()
    answer.locator("pre button.acpnb-tv-codecopy[data-copied=yes]").wait_for()
    assert clipboard(page) == "def f(x):\n    return 1  # one\n"
    shoot(page, "markdown-streaming")
    release(fifos[0])
    # The second wait: the whole answer has streamed; the turn has not ended.
    answer.locator("table td", has_text="2").wait_for(timeout=30_000)
    assert out.locator(".acpnb-running").count() == 1
    assert answer.locator("em").inner_text() == "end"
    streamed = live.evaluate(ANSWER_HTML)
    release(fifos[1])
    done(page)
    record = out.locator(".acpnb-turn").first
    page.wait_for_function(polling=POLL, expression="() => !document.querySelector('.acpnb-tv')")
    assert record.evaluate(ANSWER_HTML) == streamed


STREAM_AGENT = Path(__file__).resolve().parents[2] / "bench" / "stream_agent.py"
#: Records, for each stamp of bench/stream_agent.py's Markdown chunks (`t<ms>i<index>`, code),
#: when its text was first in the page's DOM (a mutation observer's callback: right after it).
PAINT = """() => {
  const got = window.acpnbPaint = new Map();
  new MutationObserver(() => {
    const now = Date.now();
    const codes = document.querySelectorAll('.acpnb-tv .acpnb-answer code');
    for (let i = codes.length - 1; i >= 0; i--) {
      const m = /^t(\\d{13})i(\\d+)$/.exec(codes[i].textContent);
      if (!m) continue;
      if (got.has(m[2])) break;
      got.set(m[2], now - Number(m[1]));
    }
  }).observe(document.body, { childList: true, subtree: true, characterData: true });
}"""


@pytest.mark.parametrize(("chunks", "rate"), [(100, 10), (1000, 100), (2000, 1000)])
def test_agent_to_paint_with_markdown(page, lab, chunks: int, rate: int) -> None:
    """Figures, not a timed test (bench/README.md): from the agent writing a chunk to its text
    in the page's DOM, drawn as Markdown, at `rate` chunks a second. Asserted: every chunk's
    text reached the page."""
    agent = shlex.join([sys.executable, str(STREAM_AGENT)])
    source = f"%%agent --agent {shlex.quote(agent)} --session paint{rate}\n{chunks} {rate} md"
    name = f"paint{rate}.ipynb"
    nbformat.write(new_nb(source), lab[2] / name)
    open_notebook(page, lab, name)
    page.evaluate(PAINT)
    command(page, "notebook:run-all-cells")
    done(page)
    got = page.evaluate("() => [...window.acpnbPaint.entries()]")
    delays = [d for _, d in sorted((int(i), d) for i, d in got)]
    assert len(delays) == chunks
    steady = sorted(delays[1:])
    print(
        f"\n{chunks} Markdown chunks at {rate} a second: first text {delays[0]} ms after the "
        f"agent wrote it; then median {statistics.median(steady):.0f} ms, 95th percentile "
        f"{steady[int(0.95 * (len(steady) - 1))]} ms, max {steady[-1]} ms"
    )
