"""Read a small regular file the kernel was pointed at, without blocking and within a bound.

A path in a setting (the agents file, a recording to replay) may name a FIFO, whose `open`
blocks until a writer comes (in the kernel: the cell, or the extension's load, never ends), or a
device such as /dev/zero, which never ends either. So the path is looked at before it is opened
(opening a device can act), opened with O_NONBLOCK, looked at again on its descriptor (another
file may have taken its place), and read to at most `limit` bytes.
"""

from __future__ import annotations

import errno
import os
import stat

from .safe_fs import kind


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


def _require_regular(st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        what = kind(st.st_mode)
        what = "" if what == "not a regular file" else f"{what}, "
        raise OSError(errno.EINVAL, f"{what}not a regular file")


def _too_big(size: int, limit: int) -> OSError:
    return OSError(errno.EFBIG, f"{size:,} bytes or more, over the limit of {limit:,}")
