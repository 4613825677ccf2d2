"""Read a small regular file the kernel was pointed at, without blocking and within a bound.

A path in a setting (the agents file, a recording to replay) may name a FIFO, whose `open`
blocks until a writer comes (in the kernel: the cell, or the extension's load, never ends), or a
device such as /dev/zero, which never ends either. So the path is looked at before it is opened
(opening a device can act), opened with O_NONBLOCK, looked at again on its descriptor (another
file may have taken its place), and read to at most `limit` bytes.

A path inside a workspace the agent can change (a prompt's file) is read with `read_within`
instead: walked from the root's descriptor one component at a time with O_NOFOLLOW (safe_fs,
as the agent's own reads), so a name swapped for a link out of the workspace between any check
and the read is refused, not followed; what is checked is the descriptor that is read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from .safe_fs import Root, check_inside, denied, kind, locate, named, open_read


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at `path`. `FileNotFoundError` when there is none; another
    `OSError`, whose `strerror` says why, when it is not a regular file or over `limit` bytes."""
    _require_regular(os.stat(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        _require_regular(st)
        if st.st_size > limit:
            raise _too_big(st.st_size, limit)
        file = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with file:
        data = file.read(limit + 1)  # it may have grown since fstat
    if len(data) > limit:
        raise _too_big(len(data), limit)
    return data


def read_within(
    roots: Sequence[Root], path: str, limit: int, protected: Iterable[Path] = ()
) -> tuple[str, bytes]:
    """The real path and the bytes of the regular file at `path` beneath `roots`, links
    followed only while they stay inside. `RpcError` for a path led outside, missing, not a
    regular file, or one of the `protected` files (by inode) that `path` does not name itself
    (a link or hard link to the notebook put in a file's place); `OSError` (EFBIG) past
    `limit` bytes."""
    spot = locate(roots, path)
    try:
        fd = open_read(spot, path)
    finally:
        os.close(spot.dir_fd)
    with open(fd, "rb", closefd=True) as file:
        check_inside(roots, fd, path)  # the descriptor is what counts
        st = os.fstat(fd)
        _refuse_protected(roots, path, st, protected)
        if st.st_size > limit:
            raise _too_big(st.st_size, limit)
        data = file.read(limit + 1)
    if len(data) > limit:
        raise _too_big(len(data), limit)
    return spot.real, data


def _refuse_protected(
    roots: Sequence[Root], path: str, st: os.stat_result, protected: Iterable[Path]
) -> None:
    for each in protected:
        try:
            other = os.stat(each)
        except OSError:
            continue
        same = (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)
        if same and named(roots, path) != str(each):
            raise denied(f"access denied: {path} leads to {each.name}, which is protected")


def _require_regular(st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        what = kind(st.st_mode)
        what = "" if what == "not a regular file" else f"{what}, "
        raise OSError(errno.EINVAL, f"{what}not a regular file")


def _too_big(size: int, limit: int) -> OSError:
    return OSError(errno.EFBIG, f"{size:,} bytes or more, over the limit of {limit:,}")
