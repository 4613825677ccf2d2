"""Checkpoints of the files an agent writes through the client, and `revert()` / `%agent revert`.

The scripted agent writes files with `fs/write_text_file` requests from its script; the client
keeps each file's previous content first. Client-level tests run the agent in this process; the
last test runs `%agent revert` in a real kernel.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_notebook.client.session import Session
from acp_notebook.errors import InvalidArgumentError
from tests.agents.script import script
from tests.client_helpers import Agent, reports
from tests.nb_util import data, execute, scripted
from tests.shared_kernel import SharedKernel

pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]


def write(path: Path, content: str) -> dict[str, Any]:
    return {"request": "fs/write_text_file", "params": {"path": str(path), "content": content}}


async def turn(session: Session, *steps: dict[str, Any]) -> str:
    """Run one scripted turn; every write must have been answered with success."""
    result = await (await session.prompt(script(*steps))).finished
    assert result.success, result
    for answer in reports(result.text, "RESPONSE "):
        assert answer == {"result": {}}, answer
    return result.turn_id


async def test_a_turn_is_checkpointed_and_reverted(agent: Agent) -> None:
    old, new = agent.cwd / "a.txt", agent.cwd / "sub" / "b.txt"
    old.write_text("before\n")
    with anyio.fail_after(20):
        async with agent.client() as client:
            session = await client.new_session()
            turn_id = await turn(session, write(old, "after\n"), write(new, "made\n"))
            assert old.read_text() == "after\n" and new.read_text() == "made\n"

            [taken] = session.checkpoints
            assert taken.turn_id == turn_id
            a, b = taken.files
            assert (a.path, a.existed, a.covered, b.existed) == (str(old), True, True, False)
            kept = Path(a.checkpoint or "")
            assert kept.read_text() == "before\n" and kept.is_relative_to(
                agent.cwd / ".acp_notebook"
            )
            assert stat.S_IMODE(kept.stat().st_mode) == 0o600
            assert "checkpoints" in kept.parts
            index = (kept.parent / "index.jsonl").read_text().splitlines()
            assert [json.loads(line)["path"] for line in index] == [str(old), str(new)]

            result = await session.revert()
            assert result.turn_id == turn_id
            assert result.paths("restored") == [str(old)] and result.paths("deleted") == [str(new)]
            assert "not through the client, are not" in result.note
            assert old.read_text() == "before\n" and not new.exists()
            with pytest.raises(InvalidArgumentError, match="nothing to revert"):
                await session.revert()


async def test_a_file_changed_since_is_refused_unless_forced(
    agent: Agent, session: Session
) -> None:
    path = agent.cwd / "a.txt"
    path.write_text("v1")
    # Two writes in one turn: the checkpoint is what the file held before the turn.
    turn_id = await turn(session, write(path, "v2"), write(path, "v3"))
    path.write_text("edited by hand")
    refused = await session.revert(turn_id)
    [only] = refused.files
    assert only.action == "refused" and str(path) in only.reason and "--force" in only.reason
    assert path.read_text() == "edited by hand"
    forced = await session.revert(turn_id, force=True)
    assert forced.paths("restored") == [str(path)]
    assert path.read_text() == "v1"


async def test_the_default_is_the_last_turn_that_wrote(agent: Agent, session: Session) -> None:
    one, two = agent.cwd / "one.txt", agent.cwd / "two.txt"
    first = await turn(session, write(one, "1"))
    await turn(session, write(two, "2"))
    await turn(session)  # wrote nothing: no checkpoints
    assert len(session.checkpoints) == 2
    await session.revert()
    assert one.exists() and not two.exists()
    assert (await session.revert()).turn_id == first
    assert not one.exists()
    with pytest.raises(InvalidArgumentError, match="no checkpoints for turn 'turn-nope'"):
        await session.revert("turn-nope")


async def test_bounds_leave_the_write_but_say_not_covered(agent: Agent, session: Session) -> None:
    big = agent.cwd / "big.txt"
    big.write_text("x" * 100)
    session.checkpoints.max_file_bytes = 10
    await turn(session, write(big, "small"))
    [record] = session.checkpoints[0].files
    assert not record.covered and "larger than 10 bytes" in record.reason
    assert big.read_text() == "small"  # the write happened all the same
    result = await session.revert()
    assert [(f.action, f.reason) for f in result.files] == [("not covered", record.reason)]
    assert big.read_text() == "small"

    # The session's budget: the first file fits, the second no longer does.
    session.checkpoints.max_file_bytes = 1000
    session.checkpoints.max_session_bytes = 150
    for name in ("c.txt", "d.txt"):
        (agent.cwd / name).write_text("y" * 100)
    await turn(session, write(agent.cwd / "c.txt", "1"), write(agent.cwd / "d.txt", "2"))
    c, d = session.checkpoints[1].files
    assert c.covered and not d.covered and "reached 150 bytes" in d.reason
    assert (agent.cwd / "d.txt").read_text() == "2"


async def test_checkpoints_never_leave_the_workspace(agent: Agent) -> None:
    outside = agent.tmp / "outside"
    outside.mkdir()
    os.symlink(outside, agent.cwd / ".acp_notebook")  # planted by the agent's own tools
    path = agent.cwd / "a.txt"
    path.write_text("private")
    async with agent.session() as session:
        await turn(session, write(path, "new"))
        [record] = session.checkpoints[0].files
        assert not record.covered and "cannot keep it" in record.reason
    assert path.read_text() == "new"
    assert not any(p.is_file() for p in outside.rglob("*"))


async def test_a_tampered_checkpoint_is_not_restored(agent: Agent, session: Session) -> None:
    path = agent.cwd / "a.txt"
    path.write_text("original")
    await turn(session, write(path, "agent"))
    [record] = session.checkpoints[0].files
    Path(record.checkpoint or "").write_text("planted")
    [only] = (await session.revert(force=True)).files
    assert only.action == "refused" and "checkpoint file" in only.reason
    assert path.read_text() == "agent"


async def test_a_refused_write_leaves_no_record(agent: Agent, session: Session) -> None:
    result = await (await session.prompt(script(write(agent.tmp / "escape.txt", "x")))).finished
    assert "error" in reports(result.text, "RESPONSE ")[0]
    assert len(session.checkpoints) == 0


@pytest.mark.scripted_agent("process")
def test_agent_revert_in_a_kernel(tmp_path: Path, kernel: SharedKernel) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    made = tmp_path / "made.txt"
    agent = scripted()
    body = script(write(notes, "agent's\n"), write(made, "new file\n"))
    nb = execute(
        [
            f"%%agent --agent {agent}\n{body}",
            "with open('notes.txt', 'w') as f:\n    f.write('edited by hand\\n')",
            "%agent revert",
            "%agent revert --force",
            "print(sorted(f.action for f in _agent_revert.files))",
        ],
        tmp_path,
        kernel=kernel,
    )
    refused = " ".join(data(nb.cells[2], "text/plain"))
    assert "notes.txt: refused" in refused and "changed since the agent wrote it" in refused
    assert "made.txt: deleted" in refused  # the unchanged file is reverted at once
    assert "not through the client, are not" in refused
    forced = " ".join(data(nb.cells[3], "text/plain"))
    assert "notes.txt: restored" in forced
    assert "-edited by hand" in forced and "+mine" in forced  # the diff of what was restored
    assert "<pre>" in data(nb.cells[3], "text/html")[0]
    assert notes.read_text() == "mine\n" and not made.exists()
