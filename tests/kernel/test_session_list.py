"""`%agent sessions` lists the agent's sessions of the workspace by default, pages through
`session/list` up to -n of them, and says when there are more (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.script import agent_command
from tests.nb_util import execute, kernel_env, text
from tests.shared_kernel import SharedKernel


def test_sessions_are_paged_filtered_by_directory_and_cut_at_n(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    log = tmp_path / "agent.jsonl"
    agents = tmp_path / "agents.toml"
    command = agent_command("--record", str(log), "--list", "--list-page-size", "2")
    agents.write_text(f"[agents.rec]\ncommand = {json.dumps(command)}\n")
    env = kernel_env(tmp_path, ACP_NOTEBOOK_AGENTS_FILE=str(agents))
    cells = [f"%%agent -a rec -s s{i} -q\nhello {i}" for i in range(5)]
    cells += [
        "%agent sessions -a rec -n 3",
        "%agent sessions -a rec",
        f"%agent sessions -a rec --cwd {tmp_path / 'elsewhere'}",
        "%agent sessions -a rec --all -n 0",
    ]
    nb = execute(cells, tmp_path, env=env, allow_errors=True, timeout=120, kernel=kernel)
    cut, whole, elsewhere, bad = (text(c) for c in nb.cells[5:])
    assert cut.count("sess_") >= 3 and "The first 3 are shown: more with -n N" in cut
    assert "more with -n" not in whole and "Sessions of rec in " in whole
    assert "has no stored sessions in " in elsewhere and "elsewhere" in elsewhere
    assert "UsageError" in bad and "-n takes 1 to 1000" in bad
    lists = [
        json.loads(line)["params"]
        for line in log.read_text().splitlines()
        if json.loads(line).get("method") == "session/list"
    ]
    assert any("cursor" in p for p in lists)  # pages followed
    assert all(p.get("cwd") for p in lists)  # filtered by directory (no --all given)
