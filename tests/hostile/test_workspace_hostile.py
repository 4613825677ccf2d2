"""fs/read_text_file and fs/write_text_file against an agent that also changes the disk.

The agent plants symlinks where the client writes, swaps directories for symlinks while the
client reads, hard-links the protected notebook into the workspace, names FIFOs and 1 GB files.
Direct `Workspace` calls where only the file access matters; the scripted agent through the
real client where the request path matters (a FIFO must not wedge the client's close).
"""

from __future__ import annotations

import os
import stat
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from acp_notebook.client.serving import safe_fs, workspace
from acp_notebook.client.serving.workspace import Workspace
from acp_notebook.errors import RpcError
from tests.agents.script import script
from tests.client_helpers import Agent, reports

# The agent runs in this process (no spawn per test): the request path is what is tested.
pytestmark = [pytest.mark.anyio, pytest.mark.scripted_agent("in_process")]

INVALID_PARAMS = -32602
NOT_FOUND = -32002


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A workspace root and, beside it, a directory outside it with a secret."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("outside secret")
    yield work, outside


async def read(w: Workspace, path: Path | str, **params: Any) -> str:
    content = (await w.read({"path": str(path), **params}))["content"]
    assert isinstance(content, str)
    return content


async def refused(coro: Any, code: int = INVALID_PARAMS) -> str:
    with pytest.raises(RpcError) as info:
        await coro
    assert info.value.code == code, info.value.message
    return info.value.message


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# -- writes: planted symlinks, temporaries, long names -----------------------------------------


async def test_a_symlink_planted_at_a_temporary_name_is_never_followed(
    ws: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    work, outside = ws
    notebook = work / "analysis.ipynb"
    notebook.write_text('{"cells": []}')
    # The old fixed temporary name, and the next random name (predicted here by fixing the
    # random source; a real attacker could only guess it, and a wrong guess changes nothing).
    (work / ".notes.txt.acp-tmp").symlink_to(outside / "secret.txt")
    names = iter(["planted0", "free0001"])
    monkeypatch.setattr(safe_fs.secrets, "token_hex", lambda n: next(names))
    (work / ".acp-planted0.tmp").symlink_to(notebook)
    w = Workspace([work], protected=[notebook])
    await w.write({"path": str(work / "notes.txt"), "content": "agent notes"})
    assert (work / "notes.txt").read_text() == "agent notes"
    assert (outside / "secret.txt").read_text() == "outside secret"
    assert notebook.read_text() == '{"cells": []}'
    assert listing(work) == sorted(
        [".notes.txt.acp-tmp", ".acp-planted0.tmp", "notes.txt", "analysis.ipynb"]
    )  # no temporary left


async def test_a_failed_write_leaves_no_temporary(ws: tuple[Path, Path]) -> None:
    work, _ = ws
    (work / "old.txt").write_text("kept")
    (work / "adir").mkdir()
    (work / "adir" / "x").write_text("x")
    w = Workspace([work])
    before = listing(work)
    message = await refused(w.write({"path": str(work / "old.txt"), "content": "bad \ud800"}))
    assert "nothing was written" in message
    await refused(w.write({"path": str(work / "adir"), "content": "over a directory"}))
    await refused(w.write({"path": str(work / "new.txt"), "content": "lone \udfff"}))
    assert listing(work) == before
    assert (work / "old.txt").read_text() == "kept"


async def test_a_write_that_fails_after_creating_the_temporary_removes_it(
    ws: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    work, _ = ws
    w = Workspace([work])

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safe_fs.os, "fsync", full_disk)
    message = await refused(w.write({"path": str(work / "f.txt"), "content": "x"}), -32603)
    assert "No space left" in message
    assert listing(work) == []


@pytest.mark.parametrize("length", [250, 255])
async def test_a_legal_long_name_is_writable(ws: tuple[Path, Path], length: int) -> None:
    work, _ = ws
    name = "n" * (length - 4) + ".txt"
    w = Workspace([work])
    await w.write({"path": str(work / name), "content": "long"})
    assert await read(w, work / name) == "long"
    assert listing(work) == [name]


async def test_symlinks_as_last_component(ws: tuple[Path, Path]) -> None:
    work, outside = ws
    (work / "real.txt").write_text("real")
    (work / "out.txt").symlink_to(outside / "secret.txt")
    (work / "dangling.txt").symlink_to(outside / "new.txt")
    (work / "in.txt").symlink_to("real.txt")
    w = Workspace([work])
    for name in ("out.txt", "dangling.txt"):
        await refused(read(w, work / name))
        await refused(w.write({"path": str(work / name), "content": "pwned"}))
    assert (outside / "secret.txt").read_text() == "outside secret"
    assert not (outside / "new.txt").exists()
    # A link whose target stays inside is followed: the target changes, the link stays a link.
    await w.write({"path": str(work / "in.txt"), "content": "via link"})
    assert (work / "in.txt").is_symlink() and (work / "real.txt").read_text() == "via link"
    assert await read(w, work / "in.txt") == "via link"


async def test_parent_directories_are_created_inside_and_never_through_links(
    ws: tuple[Path, Path],
) -> None:
    work, outside = ws
    (work / "out").symlink_to(outside)
    w = Workspace([work])
    await w.write({"path": str(work / "a" / "b" / "c.txt"), "content": "deep"})
    assert (work / "a" / "b" / "c.txt").read_text() == "deep"
    await refused(w.write({"path": str(work / "out" / "x" / "y.txt"), "content": "pwned"}))
    await refused(w.write({"path": str(work / "a" / ".." / ".." / "e.txt"), "content": "x"}))
    assert listing(outside) == ["secret.txt"]
    assert not (work.parent / "e.txt").exists()


async def test_a_write_keeps_the_files_mode(ws: tuple[Path, Path]) -> None:
    work, _ = ws
    script_file = work / "run.sh"
    script_file.write_text("#!/bin/sh\n")
    script_file.chmod(0o750)
    await Workspace([work]).write({"path": str(script_file), "content": "#!/bin/sh\necho\n"})
    assert stat.S_IMODE(script_file.stat().st_mode) == 0o750


# -- reads: races, hard links, links inside ----------------------------------------------------


async def test_a_directory_swapped_for_a_symlink_during_reads_never_leaks(
    ws: tuple[Path, Path],
) -> None:
    work, outside = ws
    real, link = work / "d.real", work / "d.link"
    real.mkdir()
    (real / "secret.txt").write_text("inside")
    link.symlink_to(outside)
    d = work / "d"
    stop = threading.Event()

    def flip() -> None:  # d is the directory, nothing, the symlink out, nothing, ...
        while not stop.is_set():
            for src in (real, link):
                os.rename(src, d)
                os.rename(d, src)

    w = Workspace([work])
    answers: list[str] = []
    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        for _ in range(200):
            try:
                answers.append(await read(w, d / "secret.txt"))
            except RpcError as exc:
                answers.append(f"error {exc.code}")
            except Exception as exc:  # counted, then asserted absent
                answers.append(f"crash {type(exc).__name__}")
    finally:
        stop.set()
        await anyio.to_thread.run_sync(flipper.join)
    assert answers.count("outside secret") == 0, answers.count("outside secret")
    assert set(answers) <= {"inside", f"error {INVALID_PARAMS}", f"error {NOT_FOUND}"}


async def test_a_directory_moved_out_after_it_was_opened_is_refused(
    ws: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other race: the walk is done, then the agent moves the directory out of the root
    (the descriptor follows it). What the descriptor is now is checked, not what it was."""
    work, outside = ws
    real_locate = workspace.locate

    def locate_then_move(*args: Any, **kwargs: Any) -> safe_fs.Spot:
        spot = real_locate(*args, **kwargs)
        os.rename(work / "d", outside / "d")
        return spot

    monkeypatch.setattr(workspace, "locate", locate_then_move)
    w = Workspace([work])
    for attempt in (
        read(w, work / "d" / "f.txt"),
        w.write({"path": str(work / "d" / "f.txt"), "content": "pwned"}),
    ):
        (work / "d").mkdir()
        (work / "d" / "f.txt").write_text("moved")
        assert "outside" in await refused(attempt)
        assert (outside / "d" / "f.txt").read_text() == "moved"
        os.rename(outside / "d", outside / "d.done")
        (outside / "d.done" / "f.txt").unlink()
        (outside / "d.done").rmdir()


async def test_a_hard_link_to_the_protected_notebook_is_the_notebook(ws: tuple[Path, Path]) -> None:
    work, _ = ws
    notebook = work / "analysis.ipynb"
    notebook.write_text('{"cells": ["private"]}')
    os.link(notebook, work / "copy.txt")
    (work / "sym.txt").symlink_to(notebook)
    w = Workspace([work], protected=[notebook])
    for name in ("copy.txt", "sym.txt", "analysis.ipynb"):
        assert "protected" in await refused(read(w, work / name))
        await refused(w.write({"path": str(work / name), "content": "pwned"}))
    assert notebook.read_text() == '{"cells": ["private"]}'
    assert (work / "copy.txt").stat().st_ino == notebook.stat().st_ino
    # Other hard links are ordinary files (uv and pnpm link their caches into projects); a
    # write replaces the name in the workspace and cannot change the file's other names.
    elsewhere = ws[1] / "secret.txt"
    os.link(elsewhere, work / "cache.txt")
    await Workspace([work]).write({"path": str(work / "cache.txt"), "content": "new"})
    assert elsewhere.read_text() == "outside secret"
    assert (work / "cache.txt").read_text() == "new"


async def test_roots_by_any_spelling_links_inside_and_dot_dot(
    ws: tuple[Path, Path], tmp_path: Path
) -> None:
    work, outside = ws
    alias = tmp_path / "alias"
    alias.symlink_to(work)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "e.txt").write_text("extra")
    (work / "sub").mkdir()
    (work / "sub" / "f.txt").write_text("f")
    (work / "to-extra").symlink_to(extra)  # a link from one root into another
    (work / "up").symlink_to("sub/..")
    w = Workspace([alias, extra])
    assert await read(w, alias / "sub" / "f.txt") == "f"
    assert await read(w, work / "sub" / "f.txt") == "f"
    assert await read(w, work / "sub" / ".." / "sub" / "./f.txt") == "f"
    assert await read(w, work / "to-extra" / "e.txt") == "extra"
    assert await read(w, work / "up" / "sub" / "f.txt") == "f"
    # A spelling the workspace was not given (a link above the root) still finds the root.
    assert await read(Workspace([work]), alias / "sub" / "f.txt") == "f"
    (tmp_path / "alias-out").symlink_to(outside)
    await refused(read(Workspace([work]), tmp_path / "alias-out" / "secret.txt"))
    await refused(read(w, work / ".." / "outside" / "secret.txt"))
    await refused(read(w, work / "to-extra" / ".." / "outside" / "secret.txt"))
    await refused(read(w, work), INVALID_PARAMS)
    await refused(read(w, work / "nope" / "x.txt"), NOT_FOUND)
    for bad in ("", "rel/path", "/a\0b", "/" + "a/" * 3000):
        await refused(w.read({"path": bad}))


async def test_a_symlink_loop_is_refused(ws: tuple[Path, Path]) -> None:
    work, _ = ws
    (work / "a").symlink_to("b")
    (work / "b").symlink_to("a")
    message = await refused(read(Workspace([work]), work / "a" / "x"))
    assert "symbolic links" in message


# -- item 7: non-regular files, size, memory --------------------------------------------------


async def test_non_regular_files_are_refused_without_blocking(ws: tuple[Path, Path]) -> None:
    work, _ = ws
    os.mkfifo(work / "fifo")
    (work / "dir").mkdir()
    w = Workspace([work])
    with anyio.fail_after(5):
        assert "FIFO" in await refused(read(w, work / "fifo"))
        assert "directory" in await refused(read(w, work / "dir"))
        assert "FIFO" in await refused(w.write({"path": str(work / "fifo"), "content": "x"}))
    assert stat.S_ISFIFO((work / "fifo").lstat().st_mode)


LINES = "one\ntwo\nthree\n\nfive"


@pytest.mark.parametrize(
    ("line", "limit", "expected"),
    [
        (None, None, LINES),
        (1, None, LINES),
        (0, None, LINES),
        (2, None, "two\nthree\n\nfive"),
        (2, 2, "two\nthree\n"),
        (4, 1, "\n"),
        (5, 1, "five"),
        (5, 9, "five"),
        (6, None, ""),
        (10**12, 3, ""),
        (None, 0, ""),
        (None, 1, "one\n"),
        (3, 0, ""),
    ],
)
async def test_line_and_limit(
    ws: tuple[Path, Path], line: int | None, limit: int | None, expected: str
) -> None:
    work, _ = ws
    (work / "f.txt").write_bytes(LINES.encode())
    params = {k: v for k, v in (("line", line), ("limit", limit)) if v is not None}
    assert await read(Workspace([work]), work / "f.txt", **params) == expected


async def test_line_endings_are_returned_as_they_are(ws: tuple[Path, Path]) -> None:
    """A changed behaviour: CRLF used to come back as LF, so an agent's read-edit-write
    silently rewrote every line ending of a Windows file. Lines end at LF, as for `wc -l`."""
    work, _ = ws
    (work / "f.txt").write_bytes(b"a\r\nb\rc\r\nd")
    w = Workspace([work])
    assert await read(w, work / "f.txt") == "a\r\nb\rc\r\nd"
    assert await read(w, work / "f.txt", line=2, limit=1) == "b\rc\r\n"


async def test_line_and_limit_across_chunk_boundaries(ws: tuple[Path, Path]) -> None:
    work, _ = ws
    rows = [f"row {i} " + "x" * (i % 300) + "\n" for i in range(40_000)]  # about 6 MB
    (work / "big.txt").write_text("".join(rows))
    w = Workspace([work])
    for line, limit in ((1, 3), (7_001, 5), (39_999, 10), (12_345, 1)):
        got = await read(w, work / "big.txt", line=line, limit=limit)
        assert got == "".join(rows[line - 1 : line - 1 + limit])
    assert await read(w, work / "big.txt") == "".join(rows)
    assert await read(w, work / "big.txt", line=40_001) == ""


async def test_reads_past_the_cap_are_an_error_not_a_cut(ws: tuple[Path, Path]) -> None:
    work, _ = ws
    (work / "f.txt").write_text("a" * 50 + "\n" + "b" * 200 + "\nc\n")
    w = Workspace([work], max_read_bytes=100)
    assert await read(w, work / "f.txt", line=1, limit=1) == "a" * 50 + "\n"
    assert await read(w, work / "f.txt", line=3) == "c\n"
    for params in ({}, {"line": 2, "limit": 1}, {"line": 1, "limit": 2}):
        assert "larger than 100 bytes" in await refused(read(w, work / "f.txt", **params))


SPARSE_SIZE = 1 << 30


def sparse(path: Path, head: bytes, size: int) -> None:
    """`head`, then a hole up to `size`: no data on disk, NUL bytes when read."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


async def test_one_line_of_a_1gb_file_is_quick_and_small(ws: tuple[Path, Path]) -> None:
    work, _ = ws
    big = work / "big.log"
    sparse(big, b"first line\n", SPARSE_SIZE)
    w = Workspace([work])
    tracemalloc.start()
    try:
        started = time.monotonic()
        assert await read(w, big, line=1, limit=1) == "first line\n"
        first = time.monotonic() - started
        # Line 2 is a 1 GB line: an error once the cap is passed, not 1 GB of memory.
        assert "larger than" in await refused(read(w, big, line=2, limit=1))
        assert "larger than" in await refused(read(w, big))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first < 2, first
    assert peak < 2 * w.max_read_bytes, peak  # the cap and a chunk; not the file


# -- through the client: the request path -----------------------------------------------------


def req(method: str, **params: Any) -> dict[str, Any]:
    return {"request": method, "params": params}


async def test_fifo_and_planted_links_through_the_client(agent: Agent) -> None:
    work, tmp = agent.cwd, agent.tmp
    (tmp / "outside.txt").write_text("outside secret")
    notebook = work / "analysis.ipynb"
    notebook.write_text("{}")
    os.mkfifo(work / "pipe")
    os.link(notebook, work / "hard.txt")
    (work / ".notes.txt.acp-tmp").symlink_to(tmp / "outside.txt")
    steps = [
        req("fs/read_text_file", path=str(work / "pipe")),
        req("fs/read_text_file", path=str(work / "hard.txt")),
        req("fs/write_text_file", path=str(work / "notes.txt"), content="notes"),
        req("fs/write_text_file", path=str(work / ("x" * 246 + ".txt")), content="long"),
    ]
    started = time.monotonic()
    async with agent.session(protected_paths=[notebook], bound=15) as session:
        result = await (await session.prompt(script(*steps))).finished
    assert time.monotonic() - started < 10
    answers = reports(result.text, "RESPONSE ")
    assert [a.get("error", {}).get("code") for a in answers] == [INVALID_PARAMS] * 2 + [None] * 2
    assert "FIFO" in answers[0]["error"]["message"]
    assert "protected" in answers[1]["error"]["message"]
    assert (tmp / "outside.txt").read_text() == "outside secret"
    assert (work / "notes.txt").read_text() == "notes"
    assert not [n for n in os.listdir(work) if n.startswith(".acp-")]


async def test_a_read_stuck_in_the_filesystem_does_not_hold_up_close(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file on a hung network mount: the read's thread is abandoned, close returns."""
    (agent.cwd / "slow.txt").write_text("slow")
    entered, release = threading.Event(), threading.Event()
    real_read_range = safe_fs.read_range

    def stuck(*args: Any) -> str:
        entered.set()
        release.wait(20)
        return real_read_range(*args)

    monkeypatch.setattr("acp_notebook.client.serving.workspace.read_range", stuck)
    try:
        with anyio.fail_after(15):
            # The scripted agent ignores session/cancel while it waits for an answer: a short
            # grace, so what is measured is the stuck read.
            async with agent.client(cancel_grace=0.5) as client:
                session = await client.new_session()
                await session.prompt(
                    script(req("fs/read_text_file", path=str(agent.cwd / "slow.txt")))
                )
                await anyio.to_thread.run_sync(entered.wait, 10)
                assert entered.is_set()
                closing = time.monotonic()
        assert time.monotonic() - closing < 4  # not the 20 s the thread is stuck for
    finally:
        release.set()
