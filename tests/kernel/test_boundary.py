"""The workspace boundary, seen from a notebook run headless (nbclient, the test process's
shared kernel, reset before and after: tests/shared_kernel.py).

An agent gets the session's roots and nothing else: fs reads and writes outside them (`..`,
absolute paths elsewhere, symlinks that point out) are refused with a JSON-RPC error, and so are
writes to notebooks (by default every `*.ipynb` in the roots: under nbclient, papermill or
`jupyter execute` nothing tells the kernel which notebook it runs). Terminals are off unless
enabled. A secret in the agent's environment, echoed back in a message, a thought, a tool call,
stderr, a terminal, garbage on stdout or an error, never reaches the cells' outputs, the saved
notebook or a TurnFailed message. With nobody to ask, permission requests fail closed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from acp_notebook.protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND
from acp_notebook.protocol.turn import TurnResult
from tests.agents.script import AGENT_PATH, script
from tests.client_helpers import reports
from tests.nb_util import (
    KERNELSPEC,
    answer,
    errors,
    in_shared_kernel,
    kernel_env,
    text,
    transcripts,
)
from tests.shared_kernel import SharedKernel

SECRET = "sk-test-1234567890abcdef"
REDACTED = "[redacted]"

# The scripted agent, with "$MY_API_KEY" in its script replaced by the value from its own
# environment (so the secret is in no cell source), and announcing it on stderr at start.
WRAPPER = f"""\
import os, sys
sys.path.insert(0, {str(AGENT_PATH.parent)!r})
from scripted import cli, turn
key = os.environ["MY_API_KEY"]
sys.stderr.write(f"starting with MY_API_KEY={{key}}\\n")
sys.stderr.flush()
first_text = turn.first_text
turn.first_text = lambda prompt: first_text(prompt).replace("$MY_API_KEY", key)
cli.main()
"""


def req(method: str, **params: Any) -> dict[str, Any]:
    return {"request": method, "params": params}


def code(answer: dict[str, Any]) -> int | None:
    return answer["error"]["code"] if "error" in answer else None


def setup(tmp_path: Path) -> tuple[Path, dict[str, Path], dict[str, str]]:
    """The notebook's directory (the session's root), files in and out of it, the kernel env."""
    work = tmp_path / "work"
    (work / ".ipynb_checkpoints").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("outside secret")
    paths = {
        "nb": work / "analysis.ipynb",
        "other_nb": work / "other.ipynb",
        "checkpoint": work / ".ipynb_checkpoints" / "analysis-checkpoint.ipynb",
        "data": work / "data.txt",
        "outside": outside,
        "link_out": work / "link-out.txt",
        "link_nb": work / "link-to-nb.txt",
        "new": work / "sub" / "new.txt",
        "record": tmp_path / "record.jsonl",
    }
    paths["data"].write_text("inside data")
    paths["other_nb"].write_text('{"cells": []}')
    paths["checkpoint"].write_text('{"cells": []}')
    paths["link_out"].symlink_to(outside)
    paths["link_nb"].symlink_to(paths["nb"])
    wrapper = tmp_path / "secret_agent.py"
    wrapper.write_text(WRAPPER)
    env = kernel_env(tmp_path)  # XDG_CONFIG_HOME is tmp_path/xdg: outside the root
    config = Path(env["XDG_CONFIG_HOME"]) / "acp_notebook"
    config.mkdir(parents=True)
    command = [
        sys.executable,
        str(wrapper),
        "--record",
        str(paths["record"]),
        "--load-session",
        "--state-dir",
        str(tmp_path / "state"),
    ]
    (config / "agents.toml").write_text(
        "[agents.secretive]\n"
        f"command = {json.dumps(command)}\n"
        f'env = {{ MY_API_KEY = "{SECRET}" }}\n'
    )
    return work, paths, env


def test_boundary_terminal_secrets_and_permissions_in_a_headless_run(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    work, p, env = setup(tmp_path)
    boundary = script(
        req("fs/read_text_file", path=str(p["data"])),
        req("fs/read_text_file", path=str(work / ".." / "outside.txt")),
        req("fs/read_text_file", path=str(p["outside"])),
        req("fs/read_text_file", path=str(p["link_out"])),
        req("fs/read_text_file", path="/etc/hostname"),
        req("fs/read_text_file", path="data.txt"),
        req("fs/write_text_file", path=str(p["nb"]), content="pwned"),
        req("fs/write_text_file", path=str(p["other_nb"]), content="pwned"),
        req("fs/write_text_file", path=str(p["checkpoint"]), content="pwned"),
        req("fs/write_text_file", path=str(p["link_nb"]), content="pwned"),
        req("fs/write_text_file", path=str(work / ".." / "escape.txt"), content="pwned"),
        req("fs/write_text_file", path=str(p["link_out"]), content="pwned"),
        req("fs/write_text_file", path=str(p["new"]), content="written"),
        req("fs/read_text_file", path=str(p["nb"])),  # reading a notebook is allowed
        req("terminal/create", command="echo", args=["hi"]),
        {"permission": {"toolCallId": "c9", "title": "Run it", "kind": "execute"}},
    )
    echoes = script(
        {"say": "the key is $MY_API_KEY"},
        {"think": "thinking about $MY_API_KEY"},
        {
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "title": "env $MY_API_KEY",
                "kind": "read",
                "status": "completed",
                "rawInput": {"key": "$MY_API_KEY"},
                "content": [
                    {"type": "content", "content": {"type": "text", "text": "$MY_API_KEY"}}
                ],
            }
        },
        {"raw": "garbage with $MY_API_KEY"},
        {"update": {"sessionUpdate": "brand_new_kind", "key": "$MY_API_KEY"}},
    )
    terminal = script(
        req("terminal/create", command="sh", args=["-c", "echo term:$MY_API_KEY"]),
        req("terminal/wait_for_exit", terminalId="term-1"),
        {
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "sh",
                "kind": "execute",
                "status": "completed",
                "content": [{"type": "terminal", "terminalId": "term-1"}],
            }
        },
        req("terminal/output", terminalId="term-1"),
    )
    failing = script({"say": "x"}, {"error": {"code": -32603, "message": "boom $MY_API_KEY"}})
    cells = [
        # First: the agent's task belongs to the cell that started it, and under ipykernel 7 so
        # does its log output (a protocol error quoting the garbage goes to that cell's stderr).
        f"%%agent --agent secretive\n{echoes}",
        f"%%agent --agent secretive\n{boundary}",
        "%config AcpNotebook.terminal = True\n%agent close --all",
        f"%%agent --agent secretive --allow execute\n{terminal}",
        f"%%agent --agent secretive\n{failing}",
        f"%%agent --agent secretive\n{script({'say': 'x'}, {'exit': 3})}",
        # Reopen the first session: its replayed history (with the echoed key) is displayed.
        "%agent status -s secretive\nsid = _agent_status['session_id']",
        "await get_ipython().run_line_magic('agent', f'load {sid} -a secretive -s reloaded')",
    ]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nbformat.write(nb, p["nb"])
    before = p["nb"].read_bytes()
    with in_shared_kernel(kernel, nb, work, env, allow_errors=True) as client:
        client.execute(env=env)
    assert p["nb"].read_bytes() == before  # the agent did not write the notebook
    nbformat.write(nb, p["nb"])  # as `jupyter execute --inplace` does
    saved = p["nb"].read_text()

    # -- the boundary
    (first,) = transcripts(nb.cells[1])
    assert first["success"], first
    answers = reports(answer(first), "RESPONSE ")
    assert answers[0] == {"result": {"content": "inside data"}}
    assert [code(a) for a in answers[1:6]] == [INVALID_PARAMS] * 5  # out, out, link, /etc, rel
    assert [code(a) for a in answers[6:12]] == [INVALID_PARAMS] * 6  # notebooks and escapes
    assert all("notebook" in a["error"]["message"] for a in answers[6:10]), answers[6:10]
    assert answers[12] == {"result": {}}
    assert code(answers[13]) is None  # reading the notebook is allowed (see docs/security.md)
    assert code(answers[14]) == METHOD_NOT_FOUND  # terminal off unless enabled
    assert p["new"].read_text() == "written"
    assert p["outside"].read_text() == "outside secret"
    assert p["other_nb"].read_text() == p["checkpoint"].read_text() == '{"cells": []}'
    assert not (tmp_path / "escape.txt").exists()
    # Headless: nobody can be asked, so the permission request failed closed.
    (permission,) = reports(answer(first), "PERMISSION ")
    assert permission == {"result": {"outcome": {"outcome": "selected", "optionId": "reject"}}}

    # -- terminal capability in initialize, off then on
    inits = [json.loads(line) for line in p["record"].read_text().splitlines()]
    inits = [m for m in inits if m.get("method") == "initialize"]
    # One process with the default, then (after %config and a restart) two with terminals on.
    assert [m["params"]["clientCapabilities"]["terminal"] for m in inits] == [False, True, True]

    # -- secrets
    assert SECRET not in saved, [line for line in saved.splitlines() if SECRET in line][:5]
    for cell in nb.cells:
        assert SECRET not in text(cell)
    (echoed,) = transcripts(nb.cells[0])
    assert "garbage with" in text(nb.cells[0])  # logged to the cell's stderr, masked
    assert answer(echoed) == f"the key is {REDACTED}"
    assert TurnResult.from_json(echoed).thoughts == f"thinking about {REDACTED}"
    assert any(
        REDACTED in e.get("message", "") for e in echoed["parts"] if e["type"] == "error"
    )  # the garbage line, quoted in its protocol error
    (term,) = transcripts(nb.cells[3])
    assert term["success"], term
    assert term["terminals"][0]["output"].strip() == f"term:{REDACTED}"
    failed = dict(errors(nb))
    assert sorted(failed) == [4, 5]
    assert failed[4]["ename"] == "TurnFailed" and f"boom {REDACTED}" in failed[4]["evalue"]
    assert "exited with code 3" in failed[5]["evalue"]
    assert f"MY_API_KEY={REDACTED}" in failed[5]["evalue"]  # the stderr tail, masked
    assert f"term:{REDACTED}" in text(nb.cells[7])  # the replayed history, masked
    # The agent really did see and echo the secret: the client's answers carried it.
    assert SECRET in p["record"].read_text()


def test_the_executing_notebook_is_protected_when_known_and_the_switch(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    work, p, env = setup(tmp_path)
    probe = script(
        req("fs/read_text_file", path=str(p["nb"])),
        req("fs/write_text_file", path=str(p["other_nb"]), content="edited"),
    )
    cells = [
        # What JupyterLab's server does (a relative path: ipykernel copies it to __session__).
        "%env JPY_SESSION_NAME=analysis.ipynb",
        f"%%agent --agent secretive\n{probe}",
        "%config AcpNotebook.protect_notebooks = False\n%agent close --all",
        f"%%agent --agent secretive\n{probe}",
    ]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nbformat.write(nb, p["nb"])
    with in_shared_kernel(kernel, nb, work, env) as client:
        client.execute(env=env)
    protected = reports(answer(transcripts(nb.cells[1])[0]), "RESPONSE ")
    assert [code(a) for a in protected] == [INVALID_PARAMS, INVALID_PARAMS]
    assert "protected" in protected[0]["error"]["message"]
    switched_off = reports(answer(transcripts(nb.cells[3])[0]), "RESPONSE ")
    assert code(switched_off[0]) == INVALID_PARAMS  # the executing notebook stays unreadable
    assert switched_off[1] == {"result": {}}
    assert p["other_nb"].read_text() == "edited"
    assert os.path.exists(p["nb"])
