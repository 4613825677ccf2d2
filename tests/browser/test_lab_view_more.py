"""More of the live turn view in JupyterLab (headless Chromium): what issue 12 asks beyond
test_lab_view.py.

The copy buttons (the Markdown source on the clipboard, live and on the record), a long tool
output that opens with "show all" and stays open while the turn streams, the "starting agent"
state of a slow agent and Stop during that start, `$` kept as text in nbconvert's HTML (typeset
there by MathJax 2 from disk, no network), `--background --out NAME` keeping the handle, one
demo-agent notice per kernel, and readable contrast in the dark theme. Screenshots:
test-artifacts/lab-view-*.png.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.agents.script import agent_command, script
from tests.browser.test_lab import POLL, command, output
from tests.browser.test_lab_view import AGENT, cell, done, run, shoot, tool
from tests.nb_util import execute, kernel_env, new_nb, process_gone
from tests.polling import wait_until

# What these tests check is in the notebook each opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page]

LIVE = ".acpnb-tv"


def clipboard(page: Any) -> str:
    return str(page.evaluate("() => navigator.clipboard.readText()"))


def test_copy_buttons_copy_the_markdown(page, lab) -> None:
    first = "First **part** costs $5, see [docs](https://example.org/x)."
    second = "Second:\n\n- `code`\n- done"
    steps = [{"say": first}, tool(1, text="x"), {"say": second}, {"sleep": 3}]
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab[0])
    run(page, lab, "copy.ipynb", cell(*steps))
    out = output(page)
    live = out.locator(LIVE)
    live.locator(".acpnb-answer", has_text="Second").wait_for()
    assert out.locator(".acpnb-running").count() == 1  # still streaming
    buttons = live.locator("button.acpnb-tv-msgcopy")
    assert buttons.count() == 2
    buttons.first.click()
    live.locator("button.acpnb-tv-msgcopy[data-copied=yes]").wait_for()
    assert buttons.first.inner_text() == "✓ copied"  # the user is told
    assert clipboard(page) == first  # the Markdown, not the HTML or the shown text
    shoot(page, "copy-live")
    done(page)
    # The record that replaced the view has the same buttons (page only, not saved).
    whole = out.locator("button.acpnb-tv-allcopy")
    whole.wait_for()
    whole.click()
    out.locator("button.acpnb-tv-allcopy[data-copied=yes]").wait_for()
    assert clipboard(page) == f"{first}\n\n{second}"
    out.locator("button.acpnb-tv-msgcopy").nth(1).click()
    page.wait_for_function(
        polling=POLL, expression=f"() => navigator.clipboard.readText().then(t => t === {second!r})"
    )
    shoot(page, "copy-record")


SHORT = (
    "() => { const p = document.querySelector('.acpnb-tv .acpnb-tool pre'); return p && {"
    "shown: p.clientHeight, all: p.scrollHeight, short: p.classList.contains('acpnb-tv-short')} }"
)


def test_long_tool_output_expands_and_stays_expanded(page, lab) -> None:
    lines = "".join(f"output line {i}\n" for i in range(40))
    steps = [
        tool(1, status="in_progress", text=lines),
        {"say": "Reading."},
        # The turn waits here until the test has opened the output and answers.
        {"permission": {"toolCallId": "p1", "title": "Go on", "kind": "read"}},
        tool(1, status="in_progress", text=lines + "output line 40\n", again=True),
        *({"say": f" more {i}."} for i in range(3)),
        {"sleep": 1.5},
        tool(1, status="completed", text=lines + "output line 40\noutput line 41\n", again=True),
        {"say": " Finished."},
        {"sleep": 1.5},
    ]
    run(page, lab, "long.ipynb", cell(*steps))
    live = output(page).locator(LIVE)
    live.locator("details.acpnb-tool summary").first.click()  # a text output's card is closed
    more = live.locator("button.acpnb-tv-more")
    more.wait_for()
    assert more.inner_text() == "show all (40 lines)"
    short = page.evaluate(SHORT)
    assert short["short"] and short["shown"] < short["all"] / 2, short
    assert live.locator(".acpnb-tool pre").inner_text().startswith("output line 0\n")
    more.click()
    assert more.inner_text() == "show less"
    live.locator("button.acpnb-permission-option", has_text="Allow once").click()
    # The card is redrawn twice while the turn streams: the output stays open, all of it shown.
    live.locator(".acpnb-tool pre", has_text="output line 40").wait_for()
    live.locator(".acpnb-answer", has_text="more 2").wait_for()
    live.locator("details.acpnb-tool:has(> summary > b:not([class]))").wait_for()
    assert out_of(page)["short"] is False
    assert out_of(page)["shown"] >= out_of(page)["all"] - 1, out_of(page)
    assert live.locator("button.acpnb-tv-more").inner_text() == "show less"
    assert out_of(page)["all"] > 30 * 12  # 42 lines, not a box of 12
    shoot(page, "expanded")
    done(page)


def out_of(page: Any) -> dict[str, Any]:
    return dict(page.evaluate(SHORT))


def gated(gate: Path, *flags: str) -> str:
    """An `--agent` value whose process waits for `gate` to exist before it becomes the
    scripted agent: a slow start that the test ends when it has seen what it wants."""
    wait = f"while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.05; done"
    line = f"{wait}; exec {shlex.join(agent_command(*flags))}"
    return shlex.quote(shlex.join(["sh", "-c", line]))


def test_a_slow_agent_start_shows_the_view_at_once(page, lab) -> None:
    gate = lab[2] / "start.gate"
    gate.unlink(missing_ok=True)
    body = script({"sleep": 1.5}, {"say": "Started at last."}, {"sleep": 0.5})
    run(page, lab, "starting.ipynb", f"%%agent --agent {gated(gate)} --session s\n{body}")
    live = output(page).locator(LIVE)
    live.locator(".acpnb-tv-state", has_text="starting agent").wait_for()
    assert live.locator("button.acpnb-tv-stop").is_enabled()
    page.wait_for_function(
        polling=POLL,
        expression="() => parseFloat(document.querySelector('.acpnb-tv-clock').textContent) >= 1.0",
        timeout=10_000,
    )  # the clock ticks while nothing answers
    assert live.get_attribute("data-state") == "starting"
    shoot(page, "starting")
    gate.touch()
    live.locator(".acpnb-tv-state", has_text="waiting for the agent").wait_for(timeout=30_000)
    seconds = float(live.locator(".acpnb-tv-clock").inner_text().split()[0])
    assert seconds >= 1.0  # the clock went on from the start, not from the prompt
    output(page).locator(".acpnb-answer", has_text="Started at last").wait_for()
    done(page)


def test_stop_during_the_start_cancels_it_and_stops_the_agent(page, lab) -> None:
    marker = "scripted-never-starts-7f3a"
    agent = shlex.quote(
        shlex.join(agent_command("--hang-method", "initialize", "--agent-name", marker))
    )
    run(
        page,
        lab,
        "stopstart.ipynb",
        f"%%agent --agent {agent} --session never\nhello",
        "print('the kernel answers')",
    )
    live = output(page).locator(LIVE)
    live.locator(".acpnb-tv-state", has_text="starting agent").wait_for()
    pids = wait_until(lambda: _pids(marker), 30, "the agent process")
    live.locator("button.acpnb-tv-stop").click()
    output(page).get_by_text("Stopped before the turn started").wait_for(timeout=30_000)
    # Run All went on: the cell did not fail and the kernel is not stuck.
    output(page, 1).filter(has_text="the kernel answers").wait_for(timeout=30_000)
    assert output(page).locator(LIVE).count() == 0
    assert (
        page.locator(".jp-Notebook [data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    )
    assert all(process_gone(p) for p in pids), "the agent process outlived the stopped start"
    shoot(page, "stopped-start")


def _pids(marker: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


def test_background_out_stays_the_handle(page, lab) -> None:
    """Issue 12, item 9: `--background --out h` leaves `h` the handle once the turn ended."""
    body = script({"say": "from the background"}, {"sleep": 0.5}, {"say": " and done"})
    run(
        page,
        lab,
        "background.ipynb",
        f"%%agent --background --out h --agent {AGENT} --session b\n{body}",
        "r = await h.finished\nprint('first', type(h).__name__, r.text)",
        "print('later', type(h).__name__, h.result.text, (await h.finished).text)",
    )
    output(page, 1).filter(has_text="first TurnHandle from the background and done").wait_for(
        timeout=60_000
    )
    output(page, 2).filter(has_text="later TurnHandle from the background and done").wait_for()
    assert page.get_by_text("AttributeError").count() == 0
    shoot(page, "background")


NOTICE = "No agent is configured"


def test_the_demo_agent_notice_shows_once_per_kernel(page, lab) -> None:
    """Issue 12, item 10: the demo agent's notice in the first cell only."""
    run(page, lab, "notice.ipynb", "%%agent\n/plan one", "%%agent\n/plan two")
    output(page, 1).locator(".acpnb-answer", has_text="Demo turn").wait_for(timeout=60_000)
    page.wait_for_function(
        polling=POLL, expression="() => !document.querySelector('.jp-Notebook .acpnb-tv')"
    )
    assert output(page, 0).filter(has_text=NOTICE).count() == 1
    assert output(page, 1).filter(has_text=NOTICE).count() == 0


def _luminance(rgb: list[float]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


# The text colour of each element and the first opaque background behind it.
COLOURS = """(sel) => [...document.querySelectorAll(sel)]
 .filter(e => e.textContent.trim() && e.getClientRects().length).map(e => {
  const rgb = s => s.match(/[\\d.]+/g).map(Number);
  let b = e, bg = null;
  while (b) { const c = rgb(getComputedStyle(b).backgroundColor);
    if (c.length < 4 || c[3] > 0.5) { bg = c; break; } b = b.parentElement; }
  return {sel: e.className, fg: rgb(getComputedStyle(e).color), bg: bg || [255, 255, 255]};
})"""


def contrast(fg: list[float], bg: list[float]) -> float:
    """WCAG's contrast ratio; a translucent text colour is first laid over its background."""
    alpha = fg[3] if len(fg) > 3 else 1.0
    seen = [alpha * f + (1 - alpha) * b for f, b in zip(fg[:3], bg[:3], strict=True)]
    hi, lo = sorted((_luminance(seen), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_dark_theme_has_readable_contrast(page, lab) -> None:
    steps = [
        tool(1, text="hello\n" * 20),
        {"say": "In the **dark**."},
        {"permission": {"toolCallId": "p1", "title": "Go on", "kind": "read"}},
    ]
    run(page, lab, "dark2.ipynb", cell(*steps), theme="JupyterLab Dark")
    out = output(page)
    allow = out.locator("button.acpnb-permission-option", has_text="Allow once")
    allow.wait_for()  # the turn waits for the test from here
    out.locator("details.acpnb-tool summary").first.click()
    page.wait_for_function(
        polling=POLL, expression="() => document.body.dataset.jpThemeLight === 'false'"
    )
    checked = page.evaluate(
        COLOURS,
        ".acpnb-tv .acpnb-answer, .acpnb-tv .acpnb-tool summary, .acpnb-tv .acpnb-tool pre, "
        ".acpnb-tv .acpnb-tv-state, .acpnb-tv footer, .acpnb-tv .acpnb-muted, "
        ".acpnb-tv .acpnb-tool summary > b, .acpnb-tv .acpnb-tv-clock, .acpnb-tv button",
    )
    assert len(checked) >= 10, checked
    low = [(c, round(contrast(c["fg"], c["bg"]), 2)) for c in checked]
    assert all(r >= 4.5 for _, r in low), [x for x in low if x[1] < 4.5]
    shoot(page, "dark-contrast")
    allow.click()
    done(page)
    command(page, "apputils:change-theme", {"theme": "JupyterLab Light"})


def test_dollars_stay_text_in_nbconvert_html(page, lab, tmp_path: Path) -> None:
    """Issue 12, item 3 in nbconvert: an executed notebook exported as HTML and opened in
    Chromium, MathJax (2, from the jupyter-server-mathjax package) given time to typeset."""
    import jupyter_server_mathjax

    mathjax = Path(jupyter_server_mathjax.__file__).parent / "static" / "MathJax.js"
    answer = "Two prices: $5 and $6, and $x^2$ stays text."
    usage = {
        "sessionUpdate": "usage_update",
        "used": 1000,
        "size": 200_000,
        "cost": {"amount": 0.0031, "currency": "USD"},
    }
    source = f"%%agent --agent {AGENT}\n{script({'update': usage}, {'say': answer})}"
    nb = new_nb(source)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("A control that MathJax typesets: $y^2$."))
    execute(nb, tmp_path)
    path = tmp_path / "executed.ipynb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            "html",
            f"--HTMLExporter.mathjax_url={mathjax.as_uri()}?config=TeX-AMS-MML_HTMLorMML-full,Safe",
            str(path),
        ],
        check=True,
        capture_output=True,
        env=kernel_env(tmp_path),
        timeout=120,
    )
    html = path.with_suffix(".html")
    page.goto(html.as_uri())
    # MathJax ran: it typesets the control, a `$…$` outside our output, then signals the end.
    page.wait_for_function(
        polling=POLL,
        expression="() => window.MathJax && window.MathJax.Hub && MathJax.Hub.queue.pending === 0"
        " && document.querySelector('.MathJax_CHTML, .MathJax')",
        timeout=60_000,
    )
    record = page.locator(".acpnb-turn").first
    assert "$5 and $6, and $x^2$ stays text" in record.inner_text()
    assert "$0.0031" in record.locator("footer").inner_text()
    assert record.locator(".MathJax, .MathJax_CHTML, mjx-container, script").count() == 0
    shoot(page, "nbconvert")


# Keys that start like the ends of what a view shows: every digit (each part id, "m1", "t2",
# "p3", ends in one) and a tool's status ("in_progress"). A live view that held back such an end
# (as it does the end of a streaming text) renamed its parts "m", "t", "p": permission buttons
# found no card, and a card the reader opened was replaced by a new one, closed.
KEYS = (
    "import os\n"
    "os.environ.update({f'ACPNB_TEST_{d}_TOKEN': f'{d}q9xk2LmP0aBcDeFgH' for d in '0123456789'})\n"
    "os.environ['ACPNB_TEST_STATUS_TOKEN'] = 'progress9xk2LmP0aBcDeFgH'"
)


def test_keys_in_the_kernel_leave_the_view_whole(page, lab) -> None:
    steps = [
        {"think": "Pondering"},
        {"sleep": 0.5},
        tool(1, status="in_progress", text="first output\n"),
        {"say": "Reading."},
        {"permission": {"toolCallId": "c1", "title": "Read file_1.txt", "kind": "read"}},
        tool(1, text="first output\nsecond output\n", again=True),
        {"say": " Done."},
    ]
    run(page, lab, "keys.ipynb", KEYS, cell(*steps))
    out = output(page, 1)
    allow = out.locator("button.acpnb-permission-option", has_text="Allow once")
    allow.wait_for()
    card = out.locator("details.acpnb-tool").first
    assert card.locator("summary > b").get_attribute("class") == "acpnb-st-in_progress"
    # The card asked about opens with its buttons (issue 23); the reader closes it and opens it
    # again: what they chose is kept (before, the test opened a card that came closed).
    assert card.evaluate("d => d.open")
    card.locator("summary").click()
    assert not card.evaluate("d => d.open")
    card.locator("summary").click()
    assert card.evaluate("d => d.open")
    allow.click()
    out.locator(".acpnb-answer", has_text="Done.").wait_for()
    done(page)
    # One card per part, the one opened still open, and the ids the record carries whole.
    assert out.locator("details.acpnb-tool").count() == 1
    assert out.locator("details.acpnb-thought").count() == 1
    assert out.locator("details.acpnb-tool").first.evaluate("d => d.open"), "card closed"
    assert out.locator(".acpnb-chosen", has_text="Allow").count() >= 1
