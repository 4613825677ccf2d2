"""The blocking file work of checkpoints (see checkpoints.py), run in worker threads.

Everything goes through safe_fs's walk beneath the session's roots, one component at a time
from a descriptor of the root, never a path handed to the OS whole. The previous content of a
file is read in the agent's write itself (`keep_previous`, on the write's directory descriptor),
so the checkpoint is of the very file the write replaced. The kernel's own files (checkpoints,
the index) and a revert's targets are walked with `follow=False`: a symlink planted there by
the agent's shell is refused, never followed, even to a file inside. A revert (`put_back`)
checks, on the entry it is about to replace or delete, that it is the file the turn wrote (its
device and inode recorded at the write, and the hash of what was written), never a protected
file, and replaces or unlinks that directory entry only, so no other name's file changes.
Checkpoint files are created with mode 0600 and `O_EXCL|O_NOFOLLOW` (the previous content may
be private).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from ...errors import RpcError
from ...protocol import jsonrpc as rpc
from .safe_fs import (
    Root,
    Spot,
    check_inside,
    denied,
    locate,
    open_read,
    require_regular,
    write_replace,
)

_CHUNK = 1 << 20
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Previous:
    """What a file held before a write: nothing (`existed` False), or its size and, when it
    fit in the room given, the checkpoint file keeping it and its hash. `error`: it could not be
    read or kept (the write goes on, not covered)."""

    existed: bool
    size: int = 0
    checkpoint: str | None = None
    sha256: str | None = None
    error: str = ""


def keep_previous(roots: Sequence[Root], spot: Spot, where: str, room: int) -> Previous:
    """Keep the file at `spot` (the agent's write is about to replace it) in a new checkpoint
    file `where`, if it holds at most `room` bytes. Never raises: a failure is `error`."""
    if spot.st is None:
        return Previous(False)
    try:
        fd = open_read(spot, spot.real)
        with open(fd, "rb", closefd=True) as file:
            size = os.fstat(fd).st_size
            if size > room:
                return Previous(True, size)
            data = file.read(room + 1)
    except (RpcError, OSError) as exc:
        return Previous(True, error=f"cannot read it: {exc}")
    if len(data) > room:  # it grew since the fstat
        return Previous(True, len(data))
    try:
        save_new(roots, where, data)
    except (RpcError, OSError) as exc:
        return Previous(True, len(data), error=f"cannot keep it: {exc}")
    return Previous(True, len(data), where, digest(data))


def _refuse_protected(
    spot: Spot, st: os.stat_result, protected: Iterable[Path], notebooks: bool, shown: str
) -> None:
    """A protected file (by its path or inode: a hard link to it is it) or, with `notebooks`,
    any notebook: never replaced nor deleted by a revert, forced or not."""
    if notebooks and spot.real.lower().endswith(".ipynb"):
        raise denied(f"{shown} is a notebook, which is protected")
    for each in protected:
        try:
            other = os.stat(each)
        except OSError:
            other = None
        if Path(spot.real) == each or (
            other is not None and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)
        ):
            raise denied(f"{shown} is protected (it is {each.name})")


def save_new(roots: Sequence[Root], path: str, data: bytes) -> None:
    """Create `path` (a checkpoint file; its directories too) holding `data`, mode 0600."""
    spot = locate(roots, path, make_dirs=True, follow=False)
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
    spot = locate(roots, path, make_dirs=True, follow=False)
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


def remove(roots: Sequence[Root], path: str) -> None:
    """Delete the checkpoint file at `path`, if it is there (a link there is left alone)."""
    try:
        spot = locate(roots, path, follow=False)
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
    """A checkpoint file's content (None: gone, a link, or larger than `cap`)."""
    try:
        spot = locate(roots, path, follow=False)
        try:
            if spot.st is None:
                return None
            fd = open_read(spot, path)
        finally:
            os.close(spot.dir_fd)
    except RpcError:
        return None
    with open(fd, "rb", closefd=True) as file:
        data = file.read(cap + 1)
    return data if len(data) <= cap else None


@dataclass(frozen=True)
class Written:
    """The file a turn wrote, as `put_back` checks it: where the write landed (a real path,
    every link resolved at the write) and the identity of what it made."""

    real: str
    dev: int
    ino: int
    sha256: str


@dataclass(frozen=True)
class Outcome:
    """What `put_back` did; `current`: the content before it (None: no file, or not read)."""

    action: Literal["restored", "deleted", "refused"]
    reason: str = ""
    current: bytes | None = None


@dataclass(frozen=True)
class Guard:
    """What a revert never touches, and how much of a file it reads for the diff."""

    protected: tuple[Path, ...] = ()
    notebooks: bool = True
    cap: int = 10 * 1024 * 1024


def put_back(
    roots: Sequence[Root],
    shown: str,
    written: Written,
    old: bytes | None,
    force: bool,
    guard: Guard,
) -> Outcome:
    """Put `old` back where the turn wrote (None: delete what it created), if the file there
    is still the one it wrote, or, with `force`, any regular file (the name is replaced, not
    written into). A link anywhere on the way, a protected file, anything not a regular file:
    refused, forced or not. One walk: what is checked is what is replaced or unlinked."""
    try:
        spot = locate(roots, written.real, make_dirs=force and old is not None, follow=False)
    except RpcError as exc:
        if exc.code != rpc.RESOURCE_NOT_FOUND:
            return Outcome("refused", f"not touched: {exc.message}")
        if old is None:
            return Outcome("deleted", "it was already gone")
        return Outcome("refused", _changed(shown, "was deleted"))
    try:
        return _put_back_at(roots, spot, shown, written, old, force, guard)
    except RpcError as exc:
        return Outcome("refused", f"not touched: {exc.message}")
    except OSError as exc:
        return Outcome("refused", f"cannot {'delete' if old is None else 'write'} it: {exc}")
    finally:
        os.close(spot.dir_fd)


def _put_back_at(
    roots: Sequence[Root],
    spot: Spot,
    shown: str,
    written: Written,
    old: bytes | None,
    force: bool,
    guard: Guard,
) -> Outcome:
    check_inside(roots, spot.dir_fd, shown)  # its directory was not moved out meanwhile
    current: bytes | None = None
    if spot.st is None:
        if old is None:
            return Outcome("deleted", "it was already gone")
        if not force:
            return Outcome("refused", _changed(shown, "was deleted"))
    else:
        _refuse_protected(spot, spot.st, guard.protected, guard.notebooks, shown)
        fd = open_read(spot, shown)  # O_NOFOLLOW, O_NONBLOCK: regular files only
        with open(fd, "rb", closefd=True) as file:
            st = os.fstat(fd)
            _refuse_protected(spot, st, guard.protected, guard.notebooks, shown)
            sha, current = _hash(file, guard.cap)
        if not force and (st.st_dev, st.st_ino) != (written.dev, written.ino):
            return Outcome("refused", _changed(shown, "was replaced by another file"), current)
        if not force and sha != written.sha256:
            return Outcome("refused", _changed(shown, "changed"), current)
    if old is None:
        # unlink() never follows a link: what goes is this directory entry, nothing else.
        os.unlink(spot.name, dir_fd=spot.dir_fd)
        return Outcome("deleted", "the turn created it", current)
    write_replace(spot, old)  # a rename over the entry: no other name's file changes
    return Outcome("restored", "", current)


def _hash(file: BinaryIO, cap: int) -> tuple[str, bytes | None]:
    """The whole file's hash, and its content when it is at most `cap` bytes."""
    sha, head, size = hashlib.sha256(), bytearray(), 0
    while chunk := file.read(_CHUNK):
        sha.update(chunk)
        size += len(chunk)
        if len(head) <= cap:
            head += chunk[: cap + 1 - len(head)]
    return sha.hexdigest(), bytes(head) if size <= cap else None


def _changed(shown: str, what: str) -> str:
    return (
        f"{shown} {what} since the agent wrote it; revert with --force (force=True) "
        "to overwrite it anyway"
    )
