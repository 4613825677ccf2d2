"""The kernel tools in JupyterLab (headless Chromium): an agent's run_code asks in its card.

The scripted agent starts the kernel's MCP entry from its `mcpServers` and calls `run_code`;
the turn shows a card of kind execute with the code and Allow/Reject inside it; after Allow the
variable the code set exists in the kernel, and the card shows what the code printed.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.agents.script import script
from tests.blocking import open_fifo_ends, raised_within
from tests.browser.test_lab import output
from tests.browser.test_lab_view import AGENT, done, run, shoot
from tests.hostile.test_attack_client_parts import GUESSES, spoofs

# What this test checks is in the notebook it opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page]


def test_run_code_asks_in_its_card_and_runs_after_allow(page: Any, lab: Any) -> None:
    code = "lab_answer = 6 * 7\nprint('set by the agent:', lab_answer)"
    steps = [{"mcp": "kernel", "calls": [{"name": "run_code", "arguments": {"code": code}}]}]
    run(
        page,
        lab,
        "kernel_tools.ipynb",
        f"%%agent --agent {AGENT} --session k\n{script(*steps)}",
        "print('in the kernel:', lab_answer)",
    )
    out = output(page)
    card = out.locator(".acpnb-tool", has_text="Run code in the kernel")
    card.first.wait_for(timeout=90_000)
    allow = out.locator("button.acpnb-permission-option", has_text="Allow")
    allow.first.wait_for(timeout=90_000)
    # The kernel server's names for its options (kernel_tools/card.py), as they are.
    assert out.locator("button.acpnb-permission-option").all_inner_texts() == ["Allow", "Reject"]
    # The code, before anything runs: its first line in the card's title and next to the
    # buttons, all of it in the card, open, marked as the client's own.
    asked = out.locator(".acpnb-perm").first.inner_text()
    assert "Run code in the kernel: lab_answer = 6 * 7 (+1 more lines)" in asked
    card.first.get_by_text("print('set by the agent:', lab_answer)").wait_for(timeout=30_000)
    assert "acp_notebook's own" in card.first.locator("summary").inner_text()
    shoot(page, "kernel-run-code")
    allow.first.click()
    done(page)
    record = output(page).first.text_content() or ""
    assert "set by the agent: 42" in record  # the card shows what the code printed
    assert "did not allow" not in json.dumps(record)
    assert "in the kernel: 42" in output(page, 1).first.inner_text()


def test_long_code_is_shown_whole_while_allow_waits(page: Any, lab: Any) -> None:
    """Issue 23, item 1: the live view cut every long output of a card to its first 12 lines
    ("show all"), the code asked about too. While Allow waits, the card is whole."""
    code = "".join(f"v{i} = {i}\n" for i in range(40)) + "print('the last line', v39)"
    steps = [{"mcp": "kernel", "calls": [{"name": "run_code", "arguments": {"code": code}}]}]
    run(page, lab, "kernel_long.ipynb", f"%%agent --agent {AGENT} --session kl\n{script(*steps)}")
    out = output(page)
    allow = out.locator("button.acpnb-permission-option", has_text="Allow")
    allow.first.wait_for(timeout=90_000)
    card = out.locator("details.acpnb-own[open]")
    card.wait_for(timeout=30_000)
    pre = card.locator("pre", has_text="v0 = 0")
    assert "acpnb-tv-short" not in (pre.get_attribute("class") or "")
    assert card.locator("button.acpnb-tv-more").count() == 0
    # All of it drawn, none scrolled out of sight (the client's own card does not scroll).
    assert pre.evaluate("p => p.scrollHeight <= p.clientHeight + 1")
    last = card.get_by_text("print('the last line', v39)")
    last.scroll_into_view_if_needed()
    assert last.is_visible()
    assert out.locator(".acpnb-tv-asked details.acpnb-own").count() == 1  # marked as asked
    shoot(page, "kernel-run-long")
    allow.first.click()
    done(page)
    assert "the last line 39" in (output(page).first.text_content() or "")


#: The text of the card just before the element (the card a permission box is about: the
#: client's permission follows its card at once).
CARD_BEFORE = """(el) => {
  const cards = [...document.querySelectorAll('.jp-Notebook details.acpnb-tool')].filter(
    (c) => c.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING);
  return cards.length ? cards[cards.length - 1].textContent : null;
}"""


def test_the_card_allowed_shows_the_code_that_runs(page: Any, lab: Any) -> None:
    """While Allow waits, the agent sends updates (and a tool_call) for the ids the client's
    card had before, with other code, output and status: the card the person allows still shows
    the code, and that code is what runs (issue 20)."""
    root = lab[2]
    fifo, ran = root / "spoof.fifo", root / "spoof_ran.txt"
    for path in (fifo, ran):
        path.unlink(missing_ok=True)
    os.mkfifo(fifo)
    code = "from pathlib import Path\nPath('spoof_ran.txt').write_text('real')\nlab_ran = 'real'"
    during = [{"wait_fifo": str(fifo)}, *spoofs(GUESSES), {"say": "spoofed", "message_id": "mk"}]
    call = {"name": "run_code", "arguments": {"code": code}}
    steps = script({"mcp": "kernel", "calls": [call], "during": during})
    run(
        page,
        lab,
        "kernel_spoof.ipynb",
        f"%%agent --agent {AGENT} --session sp\n{steps}",
        "print('in the kernel:', lab_ran)",
    )
    out = output(page)
    allow = out.locator("button.acpnb-permission-option", has_text="Allow")
    allow.first.wait_for(timeout=90_000)
    # The card waits for the person: the agent spoofs it now, then says so.
    assert raised_within(lambda: fifo.write_text("asked"), open_fifo_ends(fifo), 30) is None
    out.get_by_text("spoofed").first.wait_for(timeout=60_000)
    asked = out.locator(".acpnb-perm", has=page.locator("button.acpnb-permission-option"))
    seen_title = asked.first.inner_text()
    seen_card = asked.first.evaluate(CARD_BEFORE)
    shoot(page, "kernel-run-spoofed")
    allow.first.click()
    done(page)
    # What the person saw when they clicked: the code, waiting, none of the agent's.
    assert "Run code in the kernel: from pathlib import Path (+2 more lines)" in seen_title
    assert seen_card is not None and "Path('spoof_ran.txt').write_text('real')" in seen_card
    assert "hello" not in seen_card and "print(" not in seen_card
    # ... and what ran: that code.
    assert ran.read_text() == "real"
    assert "in the kernel: real" in output(page, 1).first.inner_text()
