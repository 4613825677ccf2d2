"""A prompt's file inside the workspace, swapped by the agent's shell for a link out of it.

The chat checked the chosen `@file` (a regular file inside the workspace once links are
resolved), then the prompt read it again by path: an agent swapping `notes.txt` for a symlink
to a file outside got that file in 5 and 15 of 60 sends. Now the path is only checked for its
names, and the file is checked and read on one descriptor reached from the workspace root
without following a link out (`regular_file.read_within`), for the chat's `@file`, a cell's
`--file` and a `{"type": "file"}` part alike. Stored data URLs are not written through a link
planted where they go.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.errors import PromptError
from tests.client_helpers import Agent
from tests.shared_kernel import SharedKernel

pytestmark = [pytest.mark.scripted_agent("in_process")]

SENDS = 60
EMBEDDED = ("--prompt-capabilities", "embedded")  # the file's content goes in the prompt
SECRET = "SECRET from outside the workspace"


def swapping(notes: Path, secret: Path, stop: threading.Event, swaps: list[int]) -> None:
    """Replace `notes` by a link to `secret` and back, atomically (rename), until `stop`; each
    state made alike (a new name, then a rename), so each lasts about as long."""
    link, real = notes.with_name(".notes-link"), notes.with_name(".notes-real")
    keeper = notes.with_name(".notes-kept")
    keeper.write_text("the workspace's notes")
    while not stop.is_set():
        os.symlink(secret, link)
        os.replace(link, notes)
        os.link(keeper, real)
        os.replace(real, notes)
        swaps[0] += 1


def test_an_at_file_swapped_for_a_link_out_is_never_sent(agent: Agent) -> None:
    from acp_notebook.chat.widget import ChatWidget

    secret = agent.tmp / "secret.txt"
    secret.write_text(SECRET)
    notes = agent.cwd / "notes.txt"
    notes.write_text("the workspace's notes")
    stop, swaps = threading.Event(), [0]
    outcomes = {"sent": 0, "refused": 0}

    async def main() -> None:
        async with agent.client(*EMBEDDED) as client:
            chat = ChatWidget(await client.new_session())
            for _ in range(SENDS):
                try:
                    await chat.send("read my notes", files=["notes.txt"])
                    outcomes["sent"] += 1
                except PromptError as exc:  # a link at the instant of the read: refused
                    assert "notes.txt" in str(exc) and SECRET not in str(exc), exc
                    outcomes["refused"] += 1

    swapper = threading.Thread(target=swapping, args=(notes, secret, stop, swaps), daemon=True)
    swapper.start()
    try:
        asyncio.run(asyncio.wait_for(main(), 90))
    finally:
        stop.set()
        swapper.join(10)
    prompts = [json.dumps(p) for p in agent.sent("session/prompt")]
    leaked = [p for p in prompts if SECRET in p or str(secret) in p]
    print(f"\n{SENDS} sends: {outcomes}, {swaps[0]} swaps, {len(leaked)} outside")
    assert swaps[0] > 0 and outcomes["sent"] == len(prompts)
    assert leaked == [], f"{len(leaked)} of {SENDS} sends carried the file outside"


def test_a_file_part_through_a_link_out_is_refused_and_outside_paths_still_read(
    agent: Agent,
) -> None:
    """`{"type": "file"}` (and `--file`): a workspace path through a link out is refused; a
    path the person names outside the workspace is theirs to send; a link inside is read."""
    secret = agent.tmp / "secret.txt"
    secret.write_text(SECRET)
    (agent.cwd / "escape.txt").symlink_to(secret)
    (agent.cwd / "real.txt").write_text("inside")
    (agent.cwd / "alias.txt").symlink_to("real.txt")

    async def main() -> None:
        async with agent.client(*EMBEDDED) as client:
            session = await client.new_session()
            for url in ("escape.txt", str(agent.cwd / "escape.txt")):
                with pytest.raises(PromptError, match="outside the session's workspace"):
                    await session.prompt(["x", {"type": "file", "url": url}])
            for url, why in (("missing.txt", "not found"), (".", "a directory")):
                with pytest.raises(PromptError, match=why):
                    await session.prompt(["x", {"type": "file", "url": url}])
            for url in (str(secret), "alias.txt"):
                await (await session.prompt(["x", {"type": "file", "url": url}])).finished

    asyncio.run(asyncio.wait_for(main(), 60))
    prompts = [json.dumps(p) for p in agent.sent("session/prompt")]
    assert len(prompts) == 2 and SECRET in prompts[0] and "inside" in prompts[1]


def test_a_data_url_is_not_stored_through_a_planted_link(agent: Agent) -> None:
    """The attachments folder is the kernel's, inside the agent's reach: a link planted as the
    folder is not followed (the prompt fails, nothing is written outside)."""
    outside = agent.tmp / "outside"
    outside.mkdir()
    data = "data:text/plain;base64," + base64.b64encode(b"pasted").decode()

    async def main() -> Any:
        async with agent.client() as client:
            session = await client.new_session()
            folder = agent.cwd / ".acp_notebook" / session.id
            folder.mkdir(parents=True)
            (folder / "attachments").symlink_to(outside)
            with pytest.raises(PromptError, match="symbolic link"):
                await session.prompt(["x", {"type": "file", "url": data}])

    asyncio.run(asyncio.wait_for(main(), 60))
    assert list(outside.iterdir()) == []


@pytest.mark.scripted_agent("process")
def test_a_cells_file_through_a_link_out_is_refused(tmp_path: Path, kernel: SharedKernel) -> None:
    """`%%agent --file escape.txt` in a kernel: the link out of the workspace is refused with a
    clear error, and the agent is sent nothing of the file."""
    from tests.nb_util import execute, scripted, text

    secret = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    secret.write_text(SECRET)
    (tmp_path / "escape.txt").symlink_to(secret)
    record = tmp_path / "agent.jsonl"
    nb = execute(
        [f"%%agent --agent {scripted('--record', str(record))} --file escape.txt\nread it"],
        tmp_path,
        allow_errors=True,
        kernel=kernel,
    )
    shown = text(nb.cells[0])
    assert "outside the session's workspace" in shown and SECRET not in shown, shown
    assert not record.exists() or SECRET not in record.read_text()


def test_the_protected_notebook_is_attached_only_by_its_own_name(agent: Agent) -> None:
    """A link or a hard link to the protected notebook in a file's place is refused (the
    agent's own reads of it are); the person naming the notebook itself attaches it."""
    notebook = agent.cwd / "analysis.ipynb"
    notebook.write_text('{"cells": [], "note": "the notebook"}')
    (agent.cwd / "notes.txt").symlink_to(notebook)
    os.link(notebook, agent.cwd / "hard.txt")

    async def main() -> None:
        async with agent.client(*EMBEDDED, protected_paths=[notebook]) as client:
            session = await client.new_session()
            for url in ("notes.txt", "hard.txt"):
                with pytest.raises(PromptError, match=r"analysis\.ipynb, which is protected"):
                    await session.prompt(["x", {"type": "file", "url": url}])
            await (await session.prompt(["x", {"type": "file", "url": "analysis.ipynb"}])).finished

    asyncio.run(asyncio.wait_for(main(), 60))
    prompts = [json.dumps(p) for p in agent.sent("session/prompt")]
    assert len(prompts) == 1 and "the notebook" in prompts[0]
