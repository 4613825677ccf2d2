"""Blocking, race-free file access beneath a set of root directories (Workspace's engine).

A path from the agent is never handed to the OS whole. It is matched to a root, the root is
opened, and every further component is opened relative to the directory descriptor before it
with `O_NOFOLLOW`: a component swapped for a symlink after a check cannot redirect the open,
because there is no separate check. Symlinks met on the way are followed here, one step at a
time (`readlink` through the descriptor), and only while their targets stay beneath a root; a
`..` pops a descriptor we hold instead of asking the OS for the parent. After opening, the
descriptor's real path (`/proc/self/fd/N`, where there is one) is checked again, and its inode
is compared with the protected files' inodes, so a hard link to a protected file is that file.

Writes never open the target: the content goes to a new file with a random fixed-length name
(`O_CREAT|O_EXCL|O_NOFOLLOW`, so nothing planted can be followed and a 255-byte name still
leaves room), is synced, then renamed over the target through the same directory descriptor.
A rename replaces the directory entry, so a write can never change another name's inode: a
hard link from the workspace to a file elsewhere stops being a link, and the file elsewhere is
untouched. The temporary is removed on every failure.

Only regular files are read or replaced: a FIFO, device, socket or directory is refused from
its `lstat`, before any open, and the open itself is `O_NONBLOCK` in case one was swapped in.

The kernel's own files in the workspace (checkpoints and their index, stored attachments) and
the places a revert writes are walked with `follow=False`: every symlink met is refused, even
one whose target stays inside. The agent's shell can plant a link there at any time, and a link
inside still leads the kernel's write or delete to another of the workspace's files.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from ...errors import RpcError
from ...protocol import jsonrpc as rpc

MAX_LINKS = 40  # symlinks followed in one path, as Linux's own limit
# Directory descriptors a walk holds below its root. A 4096-byte path can be 2,000 components
# deep: holding one descriptor per level let a single request take 2,000 of the kernel's file
# descriptors (four at once: 8,000, past the usual soft limit of 1,024). Older levels are
# closed and opened again from the root when a `..` climbs back to them.
KEEP_DIRS = 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


def denied(message: str) -> RpcError:
    return RpcError(rpc.INVALID_PARAMS, message)


def parts(path: str) -> list[str]:
    """An absolute path's components; empty ones and `.` mean nothing and are dropped."""
    return [p for p in path.split("/") if p not in ("", ".")]


@dataclass(frozen=True)
class Root:
    real: str  # its real path when the workspace was made
    spellings: tuple[tuple[str, ...], ...]  # component lists an agent may use for it

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> Root:
        given, real = os.path.abspath(path), os.path.realpath(path)
        return cls(real, tuple(dict.fromkeys((tuple(parts(given)), tuple(parts(real))))))

    def holds(self, real: str) -> bool:
        return real == self.real or real.startswith(self.real.rstrip("/") + "/")


@dataclass
class Spot:
    """Where a path ended: an open directory, a final name in it that is not a symlink (at the
    time of its lstat), its real path, and that lstat (None: nothing there)."""

    dir_fd: int
    name: str
    real: str
    st: os.stat_result | None


@dataclass
class _Walk:
    roots: Sequence[Root]
    make_dirs: bool
    follow: bool = True  # False: a symlink anywhere below the root is refused
    # The root's descriptor, then one entry per level in `names`: a descriptor for the last
    # KEEP_DIRS levels at most, None for older ones (closed; reopened on a `..` back to them).
    stack: list[int | None] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # components below the root
    root: Root | None = None
    hops: int = 0

    @property
    def top(self) -> int:
        fd = self.stack[-1]
        assert fd is not None  # the current directory is always held
        return fd

    def enter(self, components: list[str], shown: str) -> list[str]:
        """Start again at the root this absolute path is in; the components left to walk."""
        match = self.match(components)
        if not match:
            # Another spelling of a root (a symlink above it): its real path picks the root and
            # the components. Only the choice: the walk below still opens each one itself.
            components = parts(os.path.realpath("/" + "/".join(components)))
            match = self.match(components)
        if not match:
            raise denied(f"access denied: {shown} is outside the session's workspace")
        root, depth = min(match, key=lambda m: m[1])  # the outermost root: `..` may climb in it
        self.close()
        try:
            fd = os.open(root.real, _DIR_FLAGS)
        except OSError as exc:
            raise denied(
                f"the workspace root {root.real} cannot be opened: {exc.strerror}"
            ) from None
        self.stack, self.names, self.root = [fd], [], root
        return components[depth:]

    def match(self, components: list[str]) -> list[tuple[Root, int]]:
        """The roots `components` start with, and how many components name each."""
        return [
            (r, len(s)) for r in self.roots for s in r.spellings if tuple(components[: len(s)]) == s
        ]

    def close(self) -> None:
        while self.stack:
            fd = self.stack.pop()
            if fd is not None:
                os.close(fd)

    def take(self) -> int:
        """The current directory's descriptor, now the caller's to close."""
        fd = self.top
        self.stack.pop()
        return fd

    def push(self, fd: int, name: str) -> None:
        self.stack.append(fd)
        self.names.append(name)
        old = len(self.stack) - 1 - KEEP_DIRS
        if old > 0:
            fd_old, self.stack[old] = self.stack[old], None
            if fd_old is not None:
                os.close(fd_old)

    def pop(self, shown: str) -> None:
        """Climb one level (a `..`) to the directory walked through, never the OS's parent."""
        fd = self.stack.pop()
        if fd is not None:
            os.close(fd)
        self.names.pop()
        if self.stack[-1] is None:
            self.reopen(shown)

    def reopen(self, shown: str) -> None:
        """Open the closed levels again from the root, each component with O_NOFOLLOW as the
        first time (a directory swapped for a link meanwhile is refused), keeping the last
        KEEP_DIRS of them. Called when every level below the root is closed."""
        keep_from = max(1, len(self.names) - KEEP_DIRS + 1)
        fd, passing = self.stack[0], None  # `passing`: a level not kept, closed after the next
        assert fd is not None
        try:
            for level, name in enumerate(self.names, start=1):
                try:
                    fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise denied(
                        f"{shown}: {self.real()} changed during the request ({exc.strerror})"
                    ) from None
                if passing is not None:
                    os.close(passing)
                    passing = None
                if level >= keep_from:
                    self.stack[level] = fd
                else:
                    passing = fd
        finally:
            if passing is not None:
                os.close(passing)

    def real(self, name: str | None = None) -> str:
        assert self.root is not None
        return "/".join([self.root.real.rstrip("/"), *self.names, *([name] if name else [])])

    def through(self, name: str, rest: list[str], shown: str) -> list[str]:
        """The components to walk after replacing symlink `name` by its target."""
        if not self.follow:
            where = self.real(name)
            also = f" (on the way to {shown})" if rest else ""
            raise denied(f"{where} is a symbolic link, which is not followed{also}")
        self.hops += 1
        if self.hops > MAX_LINKS:
            raise denied(f"too many symbolic links (or a path that keeps changing): {shown}")
        try:
            target = os.readlink(name, dir_fd=self.top)
        except OSError:  # replaced by something else since its lstat: look again
            return [name, *rest]
        if target.startswith("/"):
            return self.enter(parts(target), shown) + rest
        return parts(target) + rest

    def descend(self, name: str, shown: str) -> bool:
        """Open directory `name` below the current one (creating it if asked); False if it
        is a symlink, to be followed."""
        for _ in range(2):
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=self.top)
            except FileNotFoundError:
                if not self.make_dirs:
                    raise RpcError(rpc.RESOURCE_NOT_FOUND, f"file not found: {shown}") from None
                try:
                    os.mkdir(name, 0o777, dir_fd=self.top)
                except FileExistsError:
                    pass  # made by someone else meanwhile: open it (O_NOFOLLOW) all the same
                continue
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise denied(f"cannot open {self.real(name)}: {exc.strerror}") from None
                st = lstat(name, self.top)
                if st is not None and stat.S_ISLNK(st.st_mode):
                    return False
                raise denied(f"not a directory: {self.real(name)}") from None
            self.push(fd, name)
            return True
        raise denied(f"{self.real(name)} keeps changing")


def lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def locate(
    roots: Sequence[Root], path: str, *, make_dirs: bool = False, follow: bool = True
) -> Spot:
    """Walk `path` (absolute) beneath `roots`; the caller closes the Spot's `dir_fd`. Without
    `follow`, a symlink anywhere below the root (the last component too) is refused."""
    walk = _Walk(roots, make_dirs, follow)
    try:
        todo = walk.enter(parts(path), path)
        while todo:
            name, todo = todo[0], todo[1:]
            if name == "..":
                if not walk.names:
                    raise denied(f"access denied: {path} leads outside the session's workspace")
                walk.pop(path)
            elif todo:
                if not walk.descend(name, path):
                    todo = walk.through(name, todo, path)
            else:
                st = lstat(name, walk.top)
                if st is not None and stat.S_ISLNK(st.st_mode):
                    todo = walk.through(name, todo, path)
                    continue
                return Spot(walk.take(), name, walk.real(name), st)
        raise denied(f"is a directory: {path}")
    finally:
        walk.close()


def named(roots: Sequence[Root], path: str) -> str | None:
    """The real path absolute `path` names beneath one of `roots` by its names alone (`..`
    applied to the names, as the walk applies it; the root's spelling replaced by its real
    path), whatever is on disk; None when it names no place beneath them."""
    names = parts(os.path.normpath(path))
    for root in roots:
        for spelling in root.spellings:
            if tuple(names[: len(spelling)]) == spelling:
                return "/".join([root.real.rstrip("/"), *names[len(spelling) :]]) or "/"
    return None


def within(roots: Sequence[Root], path: str) -> bool:
    """Whether absolute `path` names a place beneath one of `roots` by its names alone."""
    return named(roots, path) is not None


def store(roots: Sequence[Root], path: str, data: bytes) -> None:
    """Put `data` at `path`, one of the kernel's own files in the workspace (a stored
    attachment): walked without following any link, its folders made, the file replaced by a
    rename (nothing planted at the name is written into)."""
    spot = locate(roots, path, make_dirs=True, follow=False)
    try:
        if spot.st is not None:
            require_regular(spot.st, path)
        check_inside(roots, spot.dir_fd, path)
        write_replace(spot, data)
    finally:
        os.close(spot.dir_fd)


def fd_path(fd: int) -> str | None:
    """The descriptor's current real path, where the OS tells it (Linux's /proc)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def check_inside(roots: Iterable[Root], fd: int, shown: str) -> None:
    """Refuse a descriptor whose file or directory is (now) outside every root."""
    real = fd_path(fd)
    if real is not None and not any(r.holds(real.removesuffix(" (deleted)")) for r in roots):
        raise denied(f"access denied: {shown} is outside the session's workspace")


def kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def require_regular(st: os.stat_result, shown: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise denied(f"cannot read or write {shown}: it is {kind(st.st_mode)}, not a regular file")


def open_read(spot: Spot, shown: str) -> int:
    """Open the spot's regular file for reading without blocking or following anything."""
    if spot.st is None:
        raise RpcError(rpc.RESOURCE_NOT_FOUND, f"file not found: {shown}")
    require_regular(spot.st, shown)  # before opening: a FIFO or device is never opened
    try:
        fd = os.open(spot.name, _READ_FLAGS, dir_fd=spot.dir_fd)
    except FileNotFoundError:
        raise RpcError(rpc.RESOURCE_NOT_FOUND, f"file not found: {shown}") from None
    except OSError as exc:  # ELOOP: swapped for a symlink since its lstat
        raise denied(f"cannot open {shown}: {exc.strerror}") from None
    try:
        require_regular(os.fstat(fd), shown)
        return fd
    except BaseException:
        os.close(fd)
        raise


class Cancelled(Exception):
    """The awaiting task gave up: the worker thread stops at its next chunk."""


def read_range(
    file: BinaryIO, line: int | None, limit: int | None, cap: int, stop: threading.Event, shown: str
) -> str:
    """Lines `line`.. (1-based) of `file`, at most `limit` of them, never more than `cap` bytes
    read into memory (and never a line more): past it, an error naming the limit."""
    _skip_lines(file, max((line or 1) - 1, 0), stop)
    pieces: list[bytes] = []  # joined once at the end: a growing buffer would copy itself
    size = count = 0
    while limit is None or count < limit:
        if stop.is_set():
            raise Cancelled
        # A chunk at a time (a long line is joined here, not in readline's own list), and at
        # most one byte past the cap: enough to know it is exceeded, even within one line (a
        # 1 GB file without newlines).
        piece = file.readline(min(cap - size + 1, _CHUNK))
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
        if size > cap:
            pieces.clear()  # not kept alive by the traceback while the error travels
            raise denied(
                f"{shown}: the requested text is larger than {cap} bytes, the read "
                "limit; ask for fewer lines with line and limit"
            )
        count += piece.endswith(b"\n")
    return b"".join(pieces).decode("utf-8", errors="replace")


def _skip_lines(file: BinaryIO, n: int, stop: threading.Event) -> None:
    """Move past `n` newlines reading a chunk at a time (no line is ever held whole)."""
    while n > 0:
        if stop.is_set():
            raise Cancelled
        chunk = file.read(_CHUNK)
        if not chunk:
            return
        found = chunk.count(b"\n")
        if found < n:
            n -= found
            continue
        rest = chunk.split(b"\n", n)[-1]
        file.seek(-len(rest), os.SEEK_CUR)
        return


def write_replace(spot: Spot, data: bytes) -> os.stat_result:
    """Put `data` at the spot's name: a new file, synced, renamed over the old one. Returns the
    new file's `fstat` (its device and inode are the file's identity: a rename keeps them)."""
    mode = stat.S_IMODE(spot.st.st_mode) & 0o777 if spot.st is not None else None
    tmp, fd = _create_temp(spot.dir_fd)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # an executable script stays executable
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            made = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, spot.name, src_dir_fd=spot.dir_fd, dst_dir_fd=spot.dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=spot.dir_fd)
        except OSError:
            pass
        raise
    try:
        os.fsync(spot.dir_fd)  # the rename itself survives a crash
    except OSError:
        pass
    return made


def _create_temp(dir_fd: int) -> tuple[str, int]:
    # A fixed-length random name, not the target's name with a prefix: a legal 255-byte target
    # name still leaves a legal temporary, and nothing can be planted at a name not yet chosen.
    for _ in range(8):
        name = f".acp-{secrets.token_hex(8)}.tmp"
        try:
            return name, os.open(name, _TMP_FLAGS, 0o666, dir_fd=dir_fd)
        except FileExistsError:
            continue
    raise denied("cannot create a temporary file for the write")
