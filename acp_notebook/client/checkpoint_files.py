"""The blocking file work of checkpoints (see checkpoints.py), run in worker threads.

Everything goes through safe_fs's walk beneath the session's roots, as the agent's own requests
do: a path is opened one component at a time, symlinks are followed only while they stay
inside, so neither a checkpoint nor a restore can be led out of the workspace. Checkpoint files
are created with mode 0600 and `O_EXCL|O_NOFOLLOW` (the previous content may be private).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import RpcError
from ..protocol import jsonrpc as rpc
from .safe_fs import Root, check_inside, denied, locate, open_read, require_regular, write_replace

_CHUNK = 1 << 20
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Found:
    """A file as it is now: absent (`exists` False), or its hash, size and first `cap` bytes."""

    exists: bool
    sha256: str | None = None
    size: int = 0
    head: bytes = b""  # the whole content when size <= the cap asked for

    @property
    def whole(self) -> bool:
        return len(self.head) == self.size


def look(
    roots: Sequence[Root],
    path: str,
    cap: int,
    protected: Iterable[Path] = (),
    need_hash: bool = True,
) -> Found:
    """The file at `path` now. Raises RpcError for a path outside the roots, not a regular
    file, or one of the `protected` files (by inode: a hard link to it too); a missing file (or
    directory on the way) is `Found(False)`. Without `need_hash`, a file over `cap` bytes is
    not read at all (no hash, no head)."""
    try:
        spot = locate(roots, path)
        try:
            if spot.st is None:
                return Found(False)
            fd = open_read(spot, path)
        finally:
            os.close(spot.dir_fd)
    except RpcError as exc:
        if exc.code == rpc.RESOURCE_NOT_FOUND:  # a directory on the way, or the file, is gone
            return Found(False)
        raise
    with open(fd, "rb", closefd=True) as file:
        check_inside(roots, fd, path)
        st = os.fstat(fd)
        _refuse_protected(st, protected, path)
        if not need_hash and st.st_size > cap:
            return Found(True, None, st.st_size)
        sha, head, size = hashlib.sha256(), bytearray(), 0
        while chunk := file.read(_CHUNK):
            sha.update(chunk)
            size += len(chunk)
            if len(head) <= cap:
                head += chunk[: cap + 1 - len(head)]
    return Found(True, sha.hexdigest(), size, bytes(head[: cap + 1]))


def _refuse_protected(st: os.stat_result, protected: Iterable[Path], shown: str) -> None:
    for each in protected:
        try:
            other = os.stat(each)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            raise denied(f"access denied: {shown} is protected")


def save_new(roots: Sequence[Root], path: str, data: bytes) -> None:
    """Create `path` (a checkpoint file; its directories too) holding `data`, mode 0600."""
    spot = locate(roots, path, make_dirs=True)
    try:
        check_inside(roots, spot.dir_fd, path)
        fd = os.open(spot.name, _NEW_FLAGS, 0o600, dir_fd=spot.dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        os.close(spot.dir_fd)


def append_line(roots: Sequence[Root], path: str, line: bytes) -> None:
    """Append one line to `path` (the index), creating it with mode 0600."""
    spot = locate(roots, path, make_dirs=True)
    try:
        if spot.st is not None:
            require_regular(spot.st, path)
        check_inside(roots, spot.dir_fd, path)
        # O_NONBLOCK, then fstat: the index is in the workspace, where the agent's shell can
        # put a FIFO; its open blocked this thread (and the agent's write, the turn) for good.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(spot.name, flags | os.O_NONBLOCK, 0o600, dir_fd=spot.dir_fd)
        try:
            require_regular(os.fstat(fd), path)
            os.write(fd, line)
        finally:
            os.close(fd)
    finally:
        os.close(spot.dir_fd)


def replace(roots: Sequence[Root], path: str, data: bytes) -> None:
    """Put `data` at `path` as the agent's write did (temporary, then rename)."""
    spot = locate(roots, path, make_dirs=True)
    try:
        if spot.st is not None:
            require_regular(spot.st, path)
        check_inside(roots, spot.dir_fd, path)
        write_replace(spot, data)
    finally:
        os.close(spot.dir_fd)


def remove(roots: Sequence[Root], path: str) -> None:
    """Delete the regular file at `path`, if it is there."""
    try:
        spot = locate(roots, path)
    except RpcError as exc:
        if exc.code == rpc.RESOURCE_NOT_FOUND:
            return
        raise
    try:
        if spot.st is None:
            return
        require_regular(spot.st, path)
        check_inside(roots, spot.dir_fd, path)
        os.unlink(spot.name, dir_fd=spot.dir_fd)
    finally:
        os.close(spot.dir_fd)


def read_back(roots: Sequence[Root], path: str, cap: int) -> bytes | None:
    """A checkpoint file's content (None: gone, or larger than `cap`)."""
    found = look(roots, path, cap)
    return found.head if found.exists and found.whole else None
