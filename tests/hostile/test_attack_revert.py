"""`revert()` after the agent's shell planted links over what the turn wrote.

The turn writes `a.py` (it existed) and creates `b.txt` and `sub/c.txt`, each a copy of a file it
was asked to copy, so their content is the content of files it never wrote. Then its own shell
replaces `b.txt` by a symlink to `keep.py`, `a.py` by a symlink to `victim.py` (with `--force`:
to the protected notebook) and `sub` by a symlink to another folder holding a `c.txt`. The
revert followed each link: it overwrote `victim.py`, deleted `keep.py` while saying "deleted
b.txt (the turn created it)", wrote over the notebook with `--force`. Now it walks the path
where each write landed without following any link, checks that the file there is the one the
turn wrote (device and inode from the write, and the hash), and never touches a protected file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.client_helpers import Agent
from tests.kernel.test_checkpoints import turn, write

pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]

VICTIM, KEEP, OTHER = "victim's code\n", "keep me\n", "another c\n"
NOTEBOOK = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n'


def plant(cwd: Path, a_to: str) -> None:
    """What the agent's shell does after the turn: every written name becomes a link."""
    for name, target in (("a.py", a_to), ("b.txt", "keep.py")):
        (cwd / name).unlink()
        (cwd / name).symlink_to(cwd / target)
    (cwd / "sub").rename(cwd / "sub-old")
    (cwd / "sub").symlink_to(cwd / "elsewhere")


@pytest.mark.parametrize("force", [False, True])
async def test_revert_follows_no_link_planted_after_the_writes(agent: Agent, force: bool) -> None:
    cwd = agent.cwd
    notebook = cwd / "analysis.ipynb"
    for path, text in (
        (cwd / "a.py", "a before\n"),
        (cwd / "victim.py", VICTIM),
        (cwd / "keep.py", KEEP),
        (cwd / "elsewhere" / "c.txt", OTHER),
        (notebook, NOTEBOOK),
    ):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    (cwd / "sub").mkdir()
    async with agent.session(protected_paths=[notebook], bound=40) as session:
        # Copies: what the turn wrote is, byte for byte, what the link targets hold.
        await turn(
            session,
            write(cwd / "a.py", VICTIM),
            write(cwd / "b.txt", KEEP),
            write(cwd / "sub" / "c.txt", OTHER),
        )
        plant(cwd, "analysis.ipynb" if force else "victim.py")
        result = await session.revert(force=force)
    assert (cwd / "victim.py").read_text() == VICTIM
    assert (cwd / "keep.py").read_text() == KEEP
    assert (cwd / "elsewhere" / "c.txt").read_text() == OTHER
    assert notebook.read_text() == NOTEBOOK
    assert all((cwd / n).is_symlink() for n in ("a.py", "b.txt", "sub"))  # left as they are
    by_name = {Path(f.path).name: f for f in result.files}
    assert [f.action for f in result.files] == ["refused"] * 3, result
    for name in ("a.py", "b.txt"):
        assert "symbolic link" in by_name[name].reason, by_name[name]
    assert "symbolic link" in by_name["c.txt"].reason and "sub" in by_name["c.txt"].reason
    assert result.refused == [str(cwd / n) for n in ("a.py", "b.txt", "sub/c.txt")]


async def test_revert_restores_only_the_file_the_turn_wrote(agent: Agent) -> None:
    """A regular file that is not the one written (a hard link to `keep.py`, same bytes) is
    refused without --force; with it only the name is replaced or deleted, never another
    name's file, and a hard link to the protected notebook is never touched."""
    cwd = agent.cwd
    notebook = cwd / "analysis.ipynb"
    notebook.write_text(NOTEBOOK)
    (cwd / "keep.py").write_text(KEEP)
    (cwd / "a.py").write_text("a before\n")
    async with agent.session(protected_paths=[notebook], bound=40) as session:
        await turn(session, write(cwd / "b.txt", KEEP), write(cwd / "a.py", "a after\n"))
        [b, _] = session.checkpoints[0].files
        assert (b.dev, b.ino) == (os.stat(cwd / "b.txt").st_dev, os.stat(cwd / "b.txt").st_ino)
        (cwd / "b.txt").unlink()
        os.link(cwd / "keep.py", cwd / "b.txt")
        (cwd / "a.py").unlink()
        os.link(notebook, cwd / "a.py")
        refused = await session.revert()
        assert [f.action for f in refused.files] == ["refused", "refused"], refused
        assert "was replaced by another file since the agent wrote it" in refused.files[0].reason
        assert "protected" in refused.files[1].reason
        forced = await session.revert(force=True)
        assert [f.action for f in forced.files] == ["deleted", "refused"], forced
        assert "protected" in forced.files[1].reason
    assert (cwd / "keep.py").read_text() == KEEP and not (cwd / "b.txt").exists()
    assert notebook.read_text() == NOTEBOOK and (cwd / "a.py").read_text() == NOTEBOOK


async def test_a_link_inside_at_the_write_still_reverts(agent: Agent) -> None:
    """A write through a link that stays inside (there before the turn) landed in its target:
    the revert goes back to where it landed, without following anything."""
    cwd = agent.cwd
    (cwd / "real").mkdir()
    (cwd / "alias").symlink_to(cwd / "real")
    (cwd / "real" / "a.py").write_text("before\n")
    async with agent.session(bound=40) as session:
        await turn(session, write(cwd / "alias" / "a.py", "after\n"))
        [record] = session.checkpoints[0].files
        assert record.real == str(cwd / "real" / "a.py")
        result = await session.revert()
    assert result.paths("restored") == [str(cwd / "alias" / "a.py")]
    assert (cwd / "real" / "a.py").read_text() == "before\n"
