"""`fs/read_text_file` and `fs/write_text_file`, confined to the session's workspace roots.

The agent is untrusted, and so is everything it may have changed on disk: a path is walked
component by component from a descriptor of the root, never resolved first and opened later
(see safe_fs.py), so `..`, absolute paths elsewhere, symlinks that point out and directories
swapped for symlinks mid-request are all refused. Symlinks whose targets stay inside are
followed. Protected files (the notebook being run) can be neither read nor written, under any
name: a symlink or hard link to one is refused too. Notebooks (`*.ipynb`) cannot be written by
default: often nothing tells the kernel which notebook it runs (nbclient, papermill,
`jupyter execute`).

Only regular files: a FIFO, device, socket or directory is refused before it is opened (a FIFO
would block the open forever). A read holds at most `max_read_bytes` of the file: it skips to
`line` a chunk at a time and stops after `limit` lines; text past the cap is an error, not a
truncated result, because an agent that reads, edits and writes back a silently cut file would
destroy the rest of it. Every blocking step runs in a worker thread; a read whose request is
cancelled is abandoned at once (its thread stops at the next chunk), so closing never waits
for one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio

from ...errors import RpcError
from ...protocol import jsonrpc as rpc
from ..threads import run_in_daemon_thread
from .safe_fs import (
    Cancelled,
    Root,
    Spot,
    check_inside,
    denied,
    fd_path,
    locate,
    open_read,
    read_range,
    require_regular,
    write_replace,
)

DEFAULT_MAX_READ_BYTES = 10 * 1024 * 1024
MAX_PATH_BYTES = 4096  # PATH_MAX: no longer path names a file the agent could use itself
_WORKERS = 4  # concurrent fs requests per session: a flood queues instead of taking every thread

T = TypeVar("T")
K = TypeVar("K")


@dataclass(frozen=True)
class Landed(Generic[K]):
    """Where a write landed: the real path its walk reached (every link resolved), the new
    file's device and inode, and what the `before` hook returned (see `write_keeping`)."""

    real: str
    dev: int
    ino: int
    kept: K


class Workspace:
    def __init__(
        self,
        roots: Iterable[str | os.PathLike[str]],
        protected: Iterable[str | os.PathLike[str]] = (),
        protect_notebooks: bool = True,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
    ) -> None:
        roots = list(roots)
        self.roots = [Path(r).resolve() for r in roots]
        self._roots = [Root.of(r) for r in roots]
        self.protected = {Path(p).resolve() for p in protected}
        self.protect_notebooks = protect_notebooks
        self.max_read_bytes = max_read_bytes
        self._limiter: anyio.CapacityLimiter | None = None

    def resolve(self, path: Any) -> Path:
        """A path's real location if inside the roots (for a terminal's cwd; fs requests use
        the race-free walk instead)."""
        path = _checked_path(path)
        real = Path(path).resolve()
        if not any(real == root or real.is_relative_to(root) for root in self.roots):
            raise denied(f"access denied: {path} is outside the session's workspace")
        if real in self.protected:
            raise denied(f"access denied: {path} is protected")
        return real

    async def read(self, params: Any) -> dict[str, Any]:
        params = params if isinstance(params, dict) else {}
        path = _checked_path(params.get("path"))
        line, limit = params.get("line"), params.get("limit")
        for name, value in (("line", line), ("limit", limit)):
            if value is not None and (type(value) is not int or value < 0):
                raise RpcError(rpc.INVALID_PARAMS, f"{name} must be a non-negative integer")
        content = await self._in_thread(partial(self._read, path, line, limit), abandon=True)
        return {"content": content}

    async def write(self, params: Any) -> dict[str, Any]:
        await self.write_keeping(params, lambda spot: None)
        return {}

    async def write_keeping(self, params: Any, before: Callable[[Spot], K]) -> Landed[K]:
        """Serve one fs/write_text_file; `before(spot)` runs in the worker thread once every
        check passed, just before the rename, on the walk's own directory descriptor (the
        checkpoint reads the previous content there, not by path in a second walk)."""
        params = params if isinstance(params, dict) else {}
        path = _checked_path(params.get("path"))
        # Checked before anything is created; the name a symlink leads to is checked again.
        self._refuse_notebook(path)
        content = params.get("content")
        if not isinstance(content, str):
            raise RpcError(rpc.INVALID_PARAMS, "content must be a string")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate from JSON's \ud800 escapes
            raise RpcError(
                rpc.INVALID_PARAMS,
                f"content is not valid text: {exc.reason} at "
                f"character {exc.start}; nothing was written",
            ) from None
        # Not abandoned on cancel: a write finishes (rename) or fails (temporary removed).
        return await self._in_thread(partial(self._write, path, data, before), abandon=False)

    # -- in the worker thread --------------------------------------------------------------------

    def _read(self, path: str, line: int | None, limit: int | None, stop: threading.Event) -> str:
        spot = locate(self._roots, path)
        try:
            self._refuse_protected(spot, path)
            fd = open_read(spot, path)
        finally:
            os.close(spot.dir_fd)
        with open(fd, "rb", closefd=True) as file:
            # The descriptor is what counts: where it is now and which inode it is.
            check_inside(self._roots, fd, path)
            self._refuse_protected(
                Spot(-1, spot.name, fd_path(fd) or spot.real, os.fstat(fd)), path
            )
            return read_range(file, line, limit, self.max_read_bytes, stop, path)

    def _write(
        self, path: str, data: bytes, before: Callable[[Spot], K], stop: threading.Event
    ) -> Landed[K]:
        spot = locate(self._roots, path, make_dirs=True)
        try:
            self._refuse_notebook(spot.real)
            self._refuse_protected(spot, path)
            if spot.st is not None:
                require_regular(spot.st, path)  # a FIFO or device is not replaced either
            check_inside(self._roots, spot.dir_fd, path)  # its directory was not moved out
            kept = before(spot)
            made = write_replace(spot, data)
            return Landed(spot.real, made.st_dev, made.st_ino, kept)
        finally:
            os.close(spot.dir_fd)

    # -- checks ----------------------------------------------------------------------------------

    def _refuse_notebook(self, path: str) -> None:
        # Under nbclient, papermill and `jupyter execute` the kernel cannot know which notebook
        # runs, and an agent overwrote it (the run then saved over the agent's edit, or the
        # other way round). Notebooks are the user's documents, not the agent's files: edits go
        # through cells.
        if self.protect_notebooks and path.lower().endswith(".ipynb"):
            raise denied(
                f"access denied: {path} is a notebook; agents may not write notebooks "
                "(c.AcpNotebook.protect_notebooks, or protect_notebooks=False)"
            )

    def _refuse_protected(self, spot: Spot, shown: str) -> None:
        """By name, and by inode: a hard link to the notebook is the notebook.

        Hard links in general are not refused: a write replaces the directory entry (it
        cannot change the other names' file), and reads of uv's or pnpm's hard-linked caches
        inside a project are ordinary."""
        if Path(spot.real) in self.protected:
            raise denied(f"access denied: {shown} is protected")
        if spot.st is None:
            return
        for protected in self.protected:
            try:
                st = os.stat(protected)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (spot.st.st_dev, spot.st.st_ino):
                raise denied(
                    f"access denied: {shown} is protected (another name of {protected.name})"
                )

    async def _in_thread(self, fn: Callable[[threading.Event], T], abandon: bool) -> T:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(_WORKERS)
        stop = threading.Event()
        try:
            return await run_in_daemon_thread(
                partial(_guarded, fn, stop), abandon_on_cancel=abandon, limiter=self._limiter
            )
        finally:
            stop.set()  # an abandoned read stops at its next chunk


def _guarded(fn: Callable[[threading.Event], T], stop: threading.Event) -> T:
    """Turn OS errors nobody anticipated into a clear answer to the agent."""
    try:
        return fn(stop)
    except (RpcError, Cancelled):
        raise
    except ValueError as exc:  # e.g. an embedded NUL the path check did not see
        raise RpcError(rpc.INVALID_PARAMS, f"invalid path: {exc}") from None
    except OSError as exc:
        raise RpcError(rpc.INTERNAL_ERROR, f"file access failed: {exc.strerror or exc}") from None


def _checked_path(path: Any) -> str:
    if not isinstance(path, str) or not path:
        raise RpcError(rpc.INVALID_PARAMS, "path must be a non-empty string")
    if not path.startswith("/"):
        raise RpcError(rpc.INVALID_PARAMS, f"path must be absolute: {path}")
    try:
        size = len(os.fsencode(path))
    except UnicodeError:
        raise RpcError(rpc.INVALID_PARAMS, "path is not valid text") from None
    if "\0" in path or size > MAX_PATH_BYTES:
        raise RpcError(rpc.INVALID_PARAMS, "path contains NUL or is too long")
    return path
