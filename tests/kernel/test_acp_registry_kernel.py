"""The ACP registry from a notebook: `%agent registry` lists a fixture registry (served by a
local HTTP server) with how each agent runs here, escaped; `%%agent --agent <id>` then runs the
registry's agent that is installed (a program on the kernel's PATH: the scripted agent), from the
cached copy, with the server gone."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from tests.agents.script import AGENT_PATH, script
from tests.nb_util import answer, data, execute, kernel_env, text, transcripts
from tests.registry_server import body, fixture_registry, registry_server
from tests.shared_kernel import SharedKernel


def test_registry_listed_then_an_installed_agent_run_by_its_id(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "acpnb-test-agent"  # the registry's `cmd`: the scripted agent
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{AGENT_PATH}"\n')
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    with registry_server() as served:
        served.body = body(fixture_registry())
        env = kernel_env(
            tmp_path,
            PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            ACP_NOTEBOOK_REGISTRY_URL=served.url,
        )
        listed = execute(["%agent registry"], tmp_path, env=env, kernel=kernel)
        assert served.hits == 1
    html = " ".join(data(listed.cells[0], "text/html"))
    plain = " ".join(data(listed.cells[0], "text/plain"))
    assert "fetched now" in plain and "4 entries that are not what the format says" in plain
    assert "<code>local-agent</code>" in html and "Local &lt;b&gt;Agent&lt;/b&gt;" in html
    assert "local-agent | Local <b>Agent</b> 1.2.3 |" in plain and "✓ installed" in plain
    assert "not installed | install uv (uvx)" in plain
    # The server is gone: the cells name the agent by its id, from the cached copy.
    ran = execute(
        [f"%%agent --agent local-agent\n{script({'say': 'from the registry'})}", "%agent list"],
        tmp_path,
        env=env,
        kernel=kernel,
    )
    (record,) = transcripts(ran.cells[0])
    assert answer(record) == "from the registry"  # the scripted agent, by its registry id
    assert "local-agent" not in text(ran.cells[1])  # not in the agent table: the registry's
