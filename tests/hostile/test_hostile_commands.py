"""A hostile agent's strings and numbers in `%agent status` and `%agent sessions`, in real kernels.

The scripted agent sets titles, config options, modes, commands, a currency and usage numbers
chosen to break out of Markdown or crash the formatting; `session/list` answers come from session
files written here. The strings are the `ALERTS` of tests/hostile_payloads.py; every output of
the command cells must pass tests/markup_check.py, and the cells must not fail. The notebooks
run in the test process's shared kernel (tests/shared_kernel.py). The helpers that build those
cells serve tests/browser/test_lab_hostile_commands.py too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp_notebook.notebook.command_docs import MAX_ITEMS
from tests.hostile_payloads import ALERTS as PAYLOADS
from tests.markup_check import bundle_problems
from tests.nb_util import errors, execute, scripted, text
from tests.shared_kernel import SharedKernel


def problems_of(cell: Any) -> list[str]:
    found = []
    for out in cell.get("outputs", []):
        if "data" in out:
            found += bundle_problems(dict(out["data"]))
    return found


def titles_cell(agent: str) -> str:
    """A cell that, for each payload P (a variable of the kernel), makes it the session's title
    in a quiet turn, then shows `%agent status`."""
    return (
        "import json\n"
        "ip = get_ipython()\n"
        "for P in PAYLOADS:\n"
        "    steps = [{'update': {'sessionUpdate': 'session_info_update', 'title': P}}]\n"
        f"    await ip.run_cell_magic('agent', '--quiet --agent ' + {agent!r},\n"
        "                            '#script ' + json.dumps(steps))\n"
        "    await ip.run_line_magic('agent', 'status')\n"
    )


def config_options(payloads: list[str]) -> list[dict[str, Any]]:
    """A select option per payload: its id, name, value and choice."""
    return [
        {
            "id": f"o{i}-{p}",
            "name": p,
            "type": "select",
            "currentValue": p,
            "options": [{"value": p, "name": p}],
        }
        for i, p in enumerate(payloads)
    ]


def session_files(state: Path, payloads: list[str]) -> None:
    """The scripted agent's `session/list` answer: a session per payload, in every field."""
    state.mkdir(exist_ok=True)
    for i, payload in enumerate(payloads):
        entry = {
            "sessionId": payload,
            "cwd": payload,
            "title": payload,
            "updatedAt": f"2026-01-01T00:00:{i:02d}Z {payload}",
        }
        (state / f"s{i}.json").write_text(json.dumps(entry), encoding="utf-8")


def test_hostile_session_titles_in_status(tmp_path: Path, kernel: SharedKernel) -> None:
    agent = scripted()
    nb = execute(
        [
            f"PAYLOADS = {PAYLOADS!r}",
            titles_cell(agent),
        ],
        tmp_path,
        timeout=90,
        kernel=kernel,
    )
    assert not errors(nb)
    shown = text(nb.cells[1])
    assert shown.count("- session ") == len(PAYLOADS), shown[:2000]  # one status per payload
    assert "onerror=alert(1)" in shown  # the titles arrived, and are shown as text
    assert problems_of(nb.cells[1]) == []


def test_hostile_options_modes_commands_and_agent_name_in_status(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    options = config_options(PAYLOADS)
    commands = [{"name": p, "description": p} for p in PAYLOADS]
    steps = [
        {"update": {"sessionUpdate": "config_option_update", "configOptions": options}},
        {"update": {"sessionUpdate": "available_commands_update", "availableCommands": commands}},
        {
            "update": {
                "sessionUpdate": "current_mode_update",
                "currentModeId": "\\`<img src=x onerror=alert(1)>`",
            }
        },
        {
            "update": {
                "sessionUpdate": "usage_update",
                "used": 5,
                "size": 10,
                "cost": {"amount": 1.5, "currency": "<img src=x onerror=alert(1)>"},
            }
        },
    ]
    cells = []
    for name in ("\\`<img src=x onerror=alert(1)>`", "<svg onload=alert(1)>"):
        agent = scripted("--modes", "--agent-name", name)
        cells += [
            "%%agent --quiet --new --agent " + agent + "\n#script " + json.dumps(steps),
            "%agent status",
        ]
    nb = execute(cells, tmp_path, timeout=90, kernel=kernel)
    assert not errors(nb)
    for cell in (nb.cells[1], nb.cells[3]):
        shown = text(cell)
        # Each list shows its first MAX_ITEMS entries, a payload in several places of each.
        assert shown.count("onerror=alert(1)") >= MAX_ITEMS, shown[:2000]
        assert problems_of(cell) == []


def test_malformed_config_options_from_session_new(tmp_path: Path, kernel: SharedKernel) -> None:
    # session/new answers are not validated: ids that are lists, names that are objects, huge
    # numbers. The status still shows (it used to fail on an unhashable id).
    garbage = [
        {"id": ["a", "list"], "name": {"<b>": "x"}, "currentValue": 10**400},
        "not an option",
        {"id": "<img src=x onerror=alert(1)>", "name": None},
        {"id": 7, "name": "\\`<svg onload=alert(1)>`", "currentValue": [1, [2]]},
    ]
    agent = scripted("--config-options-json", json.dumps(garbage))
    nb = execute(
        [f"%%agent --quiet --agent {agent}\nhello", "%agent status"], tmp_path, kernel=kernel
    )
    assert not errors(nb)
    shown = text(nb.cells[1])
    # Beyond 64 bits the reader gives null (the display's own totality is tested in-process).
    options = shown.split("\n", 1)[1]  # the first line quotes the agent's command
    assert "onerror=alert(1)" in options and "0" * 30 not in options, shown
    assert problems_of(nb.cells[1]) == []


def test_hostile_numbers_in_status(tmp_path: Path, kernel: SharedKernel) -> None:
    usages = [
        {"used": 10**400, "size": 1},
        {"used": 1, "size": 10**400},
        {"used": 10**400, "size": 10**399, "cost": {"amount": 1e308, "currency": "USD"}},
        {"used": 5, "size": 0, "cost": {"amount": -1e-300, "currency": "$"}},
        {"used": 2**63 - 1, "size": 1000, "cost": {"amount": 1e15, "currency": "USD"}},
    ]
    cells = ["%%agent --quiet --agent " + scripted() + "\nhello"]
    for usage in usages:
        update = {"sessionUpdate": "usage_update", **usage}
        cells += [
            "%%agent --quiet --agent "
            + scripted()
            + "\n#script "
            + json.dumps([{"update": update}]),
            "%agent status",
        ]
    nb = execute(cells, tmp_path, kernel=kernel)
    assert not errors(nb)  # it used to raise OverflowError
    statuses = [text(nb.cells[i]) for i in range(2, len(cells), 2)]
    # Beyond 64 bits, negative, or a cost past 1e15: the client keeps such an update as an
    # unknown one, not as the usage (tests/hostile/test_limits.py), so the status shows no
    # context line.
    for status in statuses[:4]:
        assert "context:" not in status and "0" * 30 not in status, status
    # The largest numbers the client does adopt still format, with a percentage over 100.
    assert "context: " in statuses[4] and "%)" in statuses[4], statuses[4]
    for cell in nb.cells[2::2]:
        assert problems_of(cell) == []
        for out in cell.get("outputs", []):
            assert "NaN" not in json.dumps(out.get("data", {}))


def test_hostile_session_list(tmp_path: Path, kernel: SharedKernel) -> None:
    state = tmp_path / "state"
    session_files(state, PAYLOADS)
    agent = scripted("--list", "--state-dir", str(state))
    nb = execute(
        [f"%agent sessions --agent {agent} --all -n 1000", "print(len(_agent_sessions))"],
        tmp_path,
        kernel=kernel,
    )
    assert not errors(nb)
    assert text(nb.cells[1]).strip() == str(len(PAYLOADS))
    assert problems_of(nb.cells[0]) == []
    [html] = [o["data"]["text/html"] for o in nb.cells[0].outputs if "data" in o]
    assert html.count("<tr>") == len(PAYLOADS) + 1  # no cell broke out of its row
    assert html.count("<td>") == 4 * len(PAYLOADS)
