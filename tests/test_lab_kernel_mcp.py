"""The kernel tools in JupyterLab (headless Chromium): an agent's run_code asks in its card.

The scripted agent starts the kernel's MCP entry from its `mcpServers` and calls `run_code`;
the turn shows a card of kind execute with the code and Allow/Reject inside it; after Allow the
variable the code set exists in the kernel, and the card shows what the code printed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.agents.script import script
from tests.test_lab import output
from tests.test_lab_view import AGENT, done, run, shoot

# What this test checks is in the notebook it opens, not in a fresh browser context.
pytestmark = [pytest.mark.browser, pytest.mark.shared_page, pytest.mark.timeout(240)]


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
    assert out.locator("button.acpnb-permission-option").all_inner_texts() == [
        "Allow once",
        "Reject",
    ]
    # The code, before anything runs: its first line in the card's title and next to the
    # buttons, all of it in the card once opened.
    asked = out.locator(".acpnb-perm").first.inner_text()
    assert "Run code in the kernel: lab_answer = 6 * 7 (+1 more lines)" in asked
    card.first.locator("summary").click()
    card.first.get_by_text("print('set by the agent:', lab_answer)").wait_for(timeout=30_000)
    shoot(page, "kernel-run-code")
    allow.first.click()
    done(page)
    record = output(page).first.text_content() or ""
    assert "set by the agent: 42" in record  # the card shows what the code printed
    assert "did not allow" not in json.dumps(record)
    assert "in the kernel: 42" in output(page, 1).first.inner_text()
