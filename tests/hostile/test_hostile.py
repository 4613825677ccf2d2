"""A hostile agent (tests/agents/hostile_agent.py) cannot put script in the page: headless part.

One notebook per payload class (tests/hostile_payloads.py), in the test process's shared kernel
reset for each (tests/shared_kernel.py). It runs a full turn (every update kind,
a client terminal, tool calls, images, resource links), one light turn per payload (the session
title, `updatedAt`, mode, config options and usage currency), `%agent status` after each,
`%agent sessions` (paged), a turn with a hostile stop reason, a failing turn, a permission
request, and a chat widget. Then every rendering that reached the front-end, the saved outputs
and every live frame on iopub and the chat's HTML, must be inert (`tests/markup_check.py`): what a
browser would run is found by rendering the Markdown as marked does and parsing the HTML.
The same notebook in JupyterLab, with a check of what actually ran:
tests/browser/test_lab_hostile.py.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.hostile_payloads import CLASSES, by_class
from tests.markup_check import bundle_problems, payload_ids
from tests.nb_util import MIME_TURN, RecordingClient, errors, execute, outputs, text
from tests.shared_kernel import SharedKernel

AGENT = Path(__file__).parents[1] / "agents" / "hostile_agent.py"


def hostile_argv(cls: str, *flags: str) -> list[str]:
    return [sys.executable, str(AGENT), "--payloads", cls, *flags]


def hostile_cells(cls: str, log: Path) -> list[str]:
    """The notebook: every agent-controlled string on every path that displays one."""
    argv = hostile_argv(cls, "--log", str(log))
    agent = shlex.quote(shlex.join(argv))
    turn = f"%%agent --agent {agent} --session h\n"
    cells = ["%config AcpNotebook.terminal = True", turn + "turn 0", "%agent status -s h"]
    for k in range(len(by_class(cls))):
        cells += [turn + f"title {k}", "%agent status -s h"]
    cells += [
        f"%agent sessions -a {agent} --all -n 1000",
        turn + "stop 1",
        turn + "fail 2",
        turn + "permission 3",
        "%agent status -s h",
        "%agent chat -s h",
        # The chat's turns, as drawn for its record (the HTML its turn views are patched with
        # comes from the same renderer), its status line and its whole record: a chat of its own.
        "import asyncio, json\n"
        "import acp_notebook\n"
        "from acp_notebook.chat.widget import ChatWidget\n"
        f"async with acp_notebook.connect({argv!r}) as client:\n"
        "    chat = ChatWidget(await client.new_session())\n"
        "    for prompt in ('turn 0', 'title 4', 'fail 5'):\n"
        "        await chat.send(prompt)\n"
        "    views = [r['text/html'] for r in chat.records] + [chat.status.value]\n"
        "    views.append(chat.record()['text/html'])\n"
        "    chat.close()\n"
        "print(json.dumps(views))",
    ]
    return cells


def displayed(nb: Any, client: RecordingClient) -> list[tuple[str, dict[str, Any]]]:
    """Every mimebundle the front-end was given: saved outputs, live frames, widget HTML."""
    found: list[tuple[str, dict[str, Any]]] = []
    for i, cell in enumerate(nb.cells):
        for out in outputs(cell):
            if "data" in out:
                found.append((f"cell {i} saved {out['output_type']}", dict(out["data"])))
    for i, msg in client.messages:
        if msg["msg_type"] in ("display_data", "update_display_data", "execute_result"):
            found.append((f"cell {i} live {msg['msg_type']}", msg["content"]["data"]))
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    for model_id, model in state.get("state", {}).items():
        value = model.get("state", {}).get("value")
        if model.get("model_name") in ("HTMLModel", "HTMLMathModel") and isinstance(value, str):
            found.append((f"widget {model_id}", {"text/html": value}))
    chat_views = json.loads(text(nb.cells[-1]).strip().splitlines()[-1])
    found += [(f"chat view {n}", {"text/html": v}) for n, v in enumerate(chat_views)]
    return found


def run_hostile(
    cls: str, tmp_path: Path, kernel: SharedKernel | None = None
) -> tuple[Any, RecordingClient, Path]:
    log = tmp_path / "permissions.jsonl"
    clients: list[RecordingClient] = []
    nb = execute(
        hostile_cells(cls, log),
        tmp_path,
        timeout=60,
        allow_errors=True,
        client_out=clients,
        kernel=kernel,
    )
    return nb, clients[0], log


@pytest.mark.parametrize("cls", list(CLASSES))
def test_hostile_agent_cannot_script_the_page(
    cls: str, tmp_path: Path, kernel: SharedKernel
) -> None:
    nb, client, log = run_hostile(cls, tmp_path, kernel)
    ids = [p.id for p in by_class(cls)]

    # The run did what it claims: only the failing turns failed, every payload was displayed.
    failed = [nb.cells[i].source.splitlines()[-1] for i, _ in errors(nb)]
    assert set(failed) <= {"fail 2", "stop 1"}, [(i, text(nb.cells[i])) for i, _ in errors(nb)]
    assert "fail 2" in failed
    record = json.dumps(
        next(o["data"][MIME_TURN] for o in outputs(nb.cells[1]) if MIME_TURN in o.get("data", {}))
    )
    assert all(pid in record for pid in ids), "a payload never reached the turn's record"
    sessions = next(c for c in nb.cells if c.source.startswith("%agent sessions"))
    # The sessions table is HTML plus plain text (never Markdown): every page is in the text.
    sessions_text = "".join(o["data"].get("text/plain", "") for o in outputs(sessions))
    listed = [i for i in range(len(ids)) if f"listed-{i}-" in sessions_text]
    assert listed == list(range(len(ids))), f"%agent sessions missed pages: {listed}"
    decisions = [json.loads(line) for line in log.read_text().splitlines()]
    assert decisions and all(
        d["outcome"].get("optionId") not in ("allow", "allow-always") for d in decisions
    ), decisions

    bundles = displayed(nb, client)
    print(f"[hostile] {cls}: {len(bundles)} displays checked")
    assert len(bundles) > 4 * len(ids)
    leaks: dict[str, list[str]] = {}
    for where, bundle in bundles:
        problems = bundle_problems(bundle, plain_controls=True)
        if problems:
            leaks[where] = problems
    ran = payload_ids([p for problems in leaks.values() for p in problems])
    detail = "\n".join(f"{where}: {problems[0]}" for where, problems in list(leaks.items())[:15])
    assert not leaks, (
        f"{len(leaks)} of {len(bundles)} displays could run script, payloads {ran}:\n{detail}"
    )
