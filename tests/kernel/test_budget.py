"""Budgets and the ledger: `max_cost=` / `--max-cost`, `c.AcpNotebook.max_cost_total`, `%agent
ledger`.

The scripted agent reports its session's cumulative cost with `usage_update`s and then waits
for `session/cancel` (`wait_cancel`): a turn that passes its budget ends only because the client
cancelled it, so a missing cancellation fails the test by its time bound, not by a sleep.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_notebook import InvalidArgumentError
from acp_notebook.notebook.ledger import Entry, Ledger, ledger_doc
from acp_notebook.protocol.costs import NO_COST, CostLimit, money
from tests.agents.script import script
from tests.client_helpers import Agent
from tests.shared_kernel import SharedKernel

pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]


def usage(amount: float, currency: str = "USD") -> dict[str, Any]:
    return {
        "update": {
            "sessionUpdate": "usage_update",
            "used": 1000,
            "size": 200_000,
            "cost": {"amount": amount, "currency": currency},
        }
    }


async def test_a_turn_past_its_budget_is_cancelled_and_marked(agent: Agent) -> None:
    async with agent.session() as session:
        first = await session.prompt(script(usage(1.0), {"say": "before"}))
        assert (await first.finished).success
        steps = script(usage(1.05), {"say": "working"}, usage(1.5), {"wait_cancel": True})
        turn = await session.prompt(steps, max_cost=0.25)
        result = await turn.finished
    assert not result.success and result.over_budget
    assert result.stop_reason == "cancelled"  # what the agent answered
    # The turn's own cost (the cumulative cost minus the session's before it).
    assert result.error == "over budget: $0.50 > $0.25 (max_cost)"
    assert len(agent.sent("session/cancel")) == 1
    assert result.to_json()["overBudget"] is True


async def test_a_cost_in_another_currency_is_not_compared_and_the_turn_says_so(
    agent: Agent,
) -> None:
    async with agent.session() as session:
        turn = await session.prompt(
            script(usage(5, "EUR"), usage(9, "EUR"), {"say": "done"}), max_cost=0.1
        )
        result = await turn.finished
    assert result.success and not result.over_budget
    assert agent.sent("session/cancel") == []
    (note,) = [e for e in result.errors if "not applied" in e]
    assert "'EUR', not USD" in note


async def test_a_turn_with_a_budget_and_no_reported_cost_says_so(agent: Agent) -> None:
    async with agent.session() as session:
        result = await (await session.prompt(script({"say": "hi"}), max_cost=1)).finished
        plain = await (await session.prompt(script({"say": "hi"}))).finished
    assert result.success and NO_COST in result.errors
    assert NO_COST not in plain.errors


async def test_a_bad_max_cost_is_refused(agent: Agent) -> None:
    async with agent.session() as session:
        for bad in (-1, float("nan"), "1", True):
            with pytest.raises(InvalidArgumentError):
                await session.prompt("hi", max_cost=bad)
    assert agent.sent("session/prompt") == []


def test_the_ledger_totals_by_currency_and_limits_the_next_turn() -> None:
    ledger = Ledger()
    for cost, currency in ((0.5, "USD"), (0.25, "usd"), (3.0, "EUR"), (None, None)):
        ledger.add(Entry(1, "a", None, 10, 5, cost, currency, 1.0, "ok"))
    assert ledger.spent() == 0.75 and ledger.costs["EUR"] == 3.0
    assert ledger.turn_limit(None, 0) is None
    assert ledger.turn_limit(0.1, 1.0) == CostLimit(0.1, source="--max-cost")
    left = ledger.turn_limit(None, 1.0)
    assert left is not None and left.amount == 0.25 and "max_cost_total $1.00" in left.source
    with pytest.raises(Exception, match=r"max_cost_total = \$0.75.*%agent ledger"):
        ledger.turn_limit(None, 0.75)
    plain = ledger_doc(ledger, 1.0).bundle()["text/plain"]
    assert "total (4 turns) |  |  | 40 | 20 | 3.00 EUR; $0.75 | 4.0 s | 4 ok" in plain
    assert money(0.0123, "USD") == "$0.0123" and money(12, "eur") == "12.00 eur"


def test_the_ledger_escapes_what_the_agent_chose() -> None:
    ledger = Ledger()
    hostile = "<img src=x onerror=alert(1)>\x1b[2J" + "y" * 10_000
    ledger.add(Entry(None, "a", hostile, None, None, 1.0, hostile, 0.5, "ok"))
    bundle = ledger_doc(ledger, 0).bundle()
    assert "<img" not in bundle["text/html"] and "&lt;img" in bundle["text/html"]
    assert "\x1b" not in bundle["text/html"] + bundle["text/plain"]
    assert len(bundle["text/html"]) < 3000


# -- a real kernel ---------------------------------------------------------------------------


def test_budgets_and_the_ledger_in_a_kernel(tmp_path: Path, kernel: SharedKernel) -> None:
    from tests.nb_util import errors, execute, scripted, text

    record = tmp_path / "agent.jsonl"
    agent = f"%%agent --agent {scripted('--record', str(record))}"
    cells = [
        "%config AcpNotebook.max_cost_total = 1.0",
        # 1: over its own --max-cost; 2: within what is left; 3: over what is left of the total
        f"{agent} --max-cost 0.2\n{script(usage(0.5), {'wait_cancel': True})}",
        f"{agent}\n{script(usage(0.9), {'say': 'fine'})}",
        f"{agent}\n{script(usage(1.5), {'wait_cancel': True})}",
        # 4: the kernel has spent its total: refused before the agent hears of it
        f"{agent}\nnever sent",
        "%agent ledger",
        "import json; print(json.dumps(_agent_ledger))",
        f"{agent} --max-cost 0.1 --session other\n{script({'say': 'x'})}",
    ]
    nb = execute(cells, tmp_path, allow_errors=True, timeout=120, kernel=kernel)
    failed = dict(errors(nb))
    assert sorted(failed) == [1, 3, 4, 7], {i: text(nb.cells[i]) for i in failed}
    assert failed[1]["ename"] == "TurnFailed"
    first = failed[1]["evalue"]
    assert "over budget: $0.50 > $0.20 (--max-cost)" in first and "raise --max-cost" in first
    assert "over budget: $0.60 > $0.10 (what is left of" in failed[3]["evalue"]
    assert failed[4]["ename"] == "BudgetExceededError"
    refused = failed[4]["evalue"]
    assert "max_cost_total = $1.00" in refused and "%agent ledger" in refused
    # 7: the total is spent, whatever the session or its own --max-cost.
    assert failed[7]["ename"] == "BudgetExceededError"
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    prompts = [m for m in sent if m.get("method") == "session/prompt"]
    assert len(prompts) == 3 and not any("never sent" in json.dumps(p) for p in prompts)
    assert len([m for m in sent if m.get("method") == "session/cancel"]) == 2

    rows = json.loads(text(nb.cells[6]).strip())
    counts = [nb.cells[i].execution_count for i in (1, 2, 3)]
    assert [(r["cell"], r["outcome"], r["cost"]) for r in rows] == [
        (counts[0], "over budget", 0.5),
        (counts[1], "ok", pytest.approx(0.4)),
        (counts[2], "over budget", pytest.approx(0.6)),
    ]
    shown = text(nb.cells[5])
    assert "total (3 turns)" in shown and "$1.50" in shown and "1 ok, 2 over budget" in shown
    html = nb.cells[5].outputs[0]["data"]["text/html"]
    assert "<table>" in html and "$1.00" in html and "0.00 left" in html
