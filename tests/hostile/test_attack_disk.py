"""Attacks on fs/read_text_file and fs/write_text_file that the first hostile suite missed.

A path of 4096 bytes can be 2,000 components deep; the walk held a directory descriptor per
level, so one request took 2,000 of the kernel's descriptors and four at once (the worker
pool) went past the usual soft limit of 1,024: the kernel's own sockets, pipes and the agent's
terminals then fail to open.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.client.serving import safe_fs
from acp_notebook.client.serving.workspace import Workspace
from acp_notebook.errors import RpcError

pytestmark = pytest.mark.anyio
KEEP = getattr(safe_fs, "KEEP_DIRS", 16)  # main before the fix had no such limit


def remove_chain(top: Path, name: str = "d") -> None:
    """Remove a chain top/d/d/.../d (files in it too) without recursion: pytest's own clean-up
    of old temporary directories recurses once per level and fails at 2,000."""
    fds = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        while True:
            try:
                fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
            except FileNotFoundError:
                break
        while len(fds) > 1:
            fd = fds.pop()
            for entry in os.listdir(fd):
                os.unlink(entry, dir_fd=fd)
            os.close(fd)
            os.rmdir(name, dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture
def peak_fds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The most descriptors this process held at any os.open, and the count before."""
    before = len(os.listdir("/proc/self/fd"))
    peak = [before, before]
    real_open = os.open

    def counting(*args: Any, **kwargs: Any) -> int:
        fd = real_open(*args, **kwargs)
        peak[1] = max(peak[1], len(os.listdir("/proc/self/fd")))
        return fd

    monkeypatch.setattr(safe_fs.os, "open", counting)
    yield peak


async def test_a_path_2000_deep_holds_few_descriptors(tmp_path: Path, peak_fds: list[int]) -> None:
    w = Workspace([tmp_path])
    deep = str(tmp_path) + "/" + "d/" * 2000 + "f.txt"
    try:
        await w.write({"path": deep, "content": "deep"})
        assert (await w.read({"path": deep}))["content"] == "deep"
        before, peak = peak_fds
    finally:
        remove_chain(tmp_path)
    assert peak - before <= KEEP + 8, f"{peak - before} descriptors held at once"


async def test_dot_dot_back_past_the_closed_levels(tmp_path: Path) -> None:
    """Climbing back up through levels whose descriptors were closed lands where the walk
    went down, and still never leaves the root."""
    w = Workspace([tmp_path])
    (tmp_path / "top.txt").write_text("top")
    assert (await w.read({"path": f"{tmp_path}/top.txt"}))["content"] == "top"  # warm up
    before = len(os.listdir("/proc/self/fd"))
    down = "d/" * 300
    await w.write({"path": f"{tmp_path}/{down}mid.txt", "content": "mid"})
    up = "../" * 300
    assert (await w.read({"path": f"{tmp_path}/{down}{up}top.txt"}))["content"] == "top"
    half = "../" * 150
    path = f"{tmp_path}/{down}{half}mid.txt"
    with pytest.raises(RpcError):  # mid.txt is 300 levels down, not 150
        await w.read({"path": path})
    assert (await w.read({"path": f"{tmp_path}/{down}{half}{'d/' * 150}mid.txt"}))[
        "content"
    ] == "mid"
    with pytest.raises(RpcError) as info:
        await w.read({"path": f"{tmp_path}/{down}{up}../etc/passwd"})
    assert "outside" in info.value.message
    assert len(os.listdir("/proc/self/fd")) == before  # every descriptor closed


async def test_a_level_swapped_for_a_link_before_it_is_reopened_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reopen walks with O_NOFOLLOW like the first walk: a directory replaced by a link
    out of the root between going down and climbing back is not followed."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "secret.txt").write_text("outside secret")
    (work / "a" / "d").mkdir(parents=True)
    w = Workspace([work])
    deep = "d/" * (KEEP + 4)
    (work / "a" / deep).mkdir(parents=True)
    real_pop = safe_fs._Walk.pop

    def swap_then_pop(self: safe_fs._Walk, shown: str) -> None:
        if (work / "a").is_dir() and not (work / "a").is_symlink():
            os.rename(work / "a", work / "a-moved")
            (work / "a").symlink_to(outside)
        real_pop(self, shown)

    monkeypatch.setattr(safe_fs._Walk, "pop", swap_then_pop)
    up = "../" * (KEEP + 4)
    with pytest.raises(RpcError) as info:
        await w.read({"path": f"{work}/a/{deep}{up}secret.txt"})
    assert "outside secret" not in info.value.message
