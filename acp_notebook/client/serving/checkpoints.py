"""Checkpoints: what a file held before the agent wrote it through the client, and reverts.

Every `fs/write_text_file` the client serves first keeps the file's previous content (or that
it did not exist) under `.acp_notebook/<session>/checkpoints/` in the session's working
directory, recorded per turn: the turn id, the path, the checkpoint file, and the hash of what
the agent wrote. `revert()` puts a turn's files back as they were before it, deleting the files
it created; a file whose content is no longer what the agent wrote (someone changed it since)
is refused unless forced. A checkpoint file whose content no longer matches its recorded hash
(the agent can write into the workspace too) is never restored.

The previous content is read in the write's own walk (`Workspace.write_keeping`), and the record
keeps where the write landed (its real path) and what it made (device and inode). A revert goes
back to that real path without following any link and restores only that file: a name the
agent's shell replaced by a link since (to another file, the notebook, another folder) is
refused and left alone, forced or not, and so is a protected file under any name (checkpoint
_files.put_back).

Only writes served by the client are covered: edits an agent makes with its own tools (its
shell, its own file access) leave no checkpoint. Sizes are bounded (`max_file_bytes` per
checkpoint, `max_session_bytes` per session, `MAX_FILES` records): past a bound the write still
happens and its record says it is not covered, and why.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from ...errors import InvalidArgumentError, RpcError, TurnStateError
from ..threads import run_in_daemon_thread
from . import checkpoint_files as files
from .safe_fs import Root, Spot
from .workspace import Landed, Workspace

log = logging.getLogger("acp_notebook")

T = TypeVar("T")
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_SESSION_BYTES = 100 * 1024 * 1024
MAX_FILES = 2000  # file records per session
OUTSIDE = "(outside a turn)"  # the turn id of a write while no turn runs
NOT_COVERED_NOTE = (
    "Only files the agent wrote through the client (fs/write_text_file) are covered: edits an "
    "agent makes with its own tools, not through the client, are not."
)


@dataclass(frozen=True)
class FileCheckpoint:
    """One file a turn wrote: where its previous content is kept, and what the agent wrote."""

    turn_id: str
    path: str  # as the agent named it
    existed: bool  # False: the turn created it (a revert deletes it)
    checkpoint: str | None  # the file holding the previous content (None: none needed or kept)
    saved_sha256: str | None  # of the checkpoint's content
    written_sha256: str  # of what the agent wrote last in this turn
    covered: bool = True
    reason: str = ""  # why it is not covered
    reverted: bool = False
    real: str = ""  # where the write landed (every link resolved then): what a revert walks
    dev: int = 0  # the device and inode of the file the write made: a revert checks them
    ino: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TurnCheckpoints:
    """The files one turn wrote through the client, in the order it first wrote them."""

    turn_id: str
    files: tuple[FileCheckpoint, ...]

    @property
    def reverted(self) -> bool:
        return all(f.reverted or not f.covered for f in self.files)


Action = Literal["restored", "deleted", "refused", "not covered", "already reverted"]


@dataclass(frozen=True)
class RevertedFile:
    """What a revert did to one file; `current` and `restored` are the texts for a diff (None:
    no file), `current` as it was before the revert."""

    path: str
    action: Action
    reason: str = ""
    current: str | None = None
    restored: str | None = None


@dataclass(frozen=True)
class RevertResult:
    """`Session.revert()`'s answer: per file, what was restored, deleted, refused or not
    covered; `note` says what checkpoints never cover."""

    turn_id: str
    files: tuple[RevertedFile, ...]
    note: str = NOT_COVERED_NOTE

    def paths(self, action: Action) -> list[str]:
        return [f.path for f in self.files if f.action == action]

    @property
    def refused(self) -> list[str]:
        return self.paths("refused")


class Checkpoints:
    """A session's checkpoints, a sequence of `TurnCheckpoints` (one per turn that wrote).

    `roots` are the session's workspace roots as given, `directory("checkpoints")` where its
    checkpoint files go (inside them); `busy()` says whether a turn runs (no revert then)."""

    def __init__(
        self,
        roots: Sequence[str],
        workspace: Workspace,
        directory: Callable[[str], Path],
        busy: Callable[[], bool] = lambda: False,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_session_bytes: int = DEFAULT_MAX_SESSION_BYTES,
    ) -> None:
        self._roots = [Root.of(r) for r in roots]
        self._workspace = workspace
        self._directory: Callable[[], str] = lambda: str(directory("checkpoints"))
        self._busy = busy
        self.max_file_bytes = max_file_bytes
        self.max_session_bytes = max_session_bytes
        self._turns: dict[str, list[FileCheckpoint]] = {}
        self._used = 0  # bytes of checkpoint files kept
        self._sizes: dict[str, int] = {}  # of each checkpoint file
        self._count = 0
        self._done: set[str] = set()  # turns reverted with nothing refused

    def turns(self) -> list[TurnCheckpoints]:
        return [TurnCheckpoints(t, tuple(fs)) for t, fs in self._turns.items()]

    def __iter__(self) -> Iterator[TurnCheckpoints]:
        return iter(self.turns())

    def __len__(self) -> int:
        return len(self._turns)

    def __getitem__(self, index: int) -> TurnCheckpoints:
        return self.turns()[index]

    def __repr__(self) -> str:
        return f"Checkpoints({self.turns()!r})"

    # -- taking them -----------------------------------------------------------------------------

    async def around(self, params: Any, turn_id: str | None) -> dict[str, Any]:
        """Serve one fs/write_text_file, keeping the file's previous content first.

        A write the workspace refuses leaves no record; a checkpoint that cannot be kept (a
        bound, an error) leaves a record that says the file is not covered."""
        turn = turn_id or OUTSIDE
        taking = _Taking(
            self._roots,
            os.path.join(self._directory(), f"{_safe(turn)}-{secrets.token_hex(6)}"),
            min(self.max_file_bytes, self.max_session_bytes - self._used),
            frozenset(f.real for f in self._turns.get(turn, ())),
            self._count >= MAX_FILES,
        )
        try:
            landed = await self._workspace.write_keeping(params, taking)
        except BaseException:
            await self._discard(taking.previous)
            raise
        path, data = _request(params)
        assert path is not None and data is not None  # the workspace wrote it
        written = files.digest(data)
        self._done.discard(turn)
        earlier = next((f for f in self._turns.get(turn, ()) if f.real == landed.real), None)
        if earlier is not None:  # the same file again: the first checkpoint stays the one
            await self._discard(landed.kept)  # (kept by a concurrent write of it)
            again = dataclasses.replace(earlier, written_sha256=written, reverted=False)
            self._replace(dataclasses.replace(again, dev=landed.dev, ino=landed.ino))
            return {}
        record = self._record(turn, path, written, landed)
        self._turns.setdefault(turn, []).append(record)
        self._count += 1
        await self._index(record)
        return {}

    def _record(
        self, turn: str, path: str, written: str, landed: Landed[files.Previous | None]
    ) -> FileCheckpoint:
        """The record of a first write of a file in `turn`, from what its hook kept."""
        record = FileCheckpoint(
            turn, path, True, None, None, written, real=landed.real, dev=landed.dev, ino=landed.ino
        )
        kept = landed.kept
        if kept is None:
            return dataclasses.replace(
                record, covered=False, reason=f"more than {MAX_FILES} files checkpointed"
            )
        if not kept.existed:
            return dataclasses.replace(record, existed=False)
        if kept.error:
            return dataclasses.replace(record, covered=False, reason=kept.error)
        if kept.checkpoint is None:
            why = (
                f"it is larger than {self.max_file_bytes} bytes"
                if kept.size > self.max_file_bytes
                else f"the session's checkpoints reached {self.max_session_bytes} bytes"
            )
            return dataclasses.replace(record, covered=False, reason=why)
        self._used += kept.size
        self._sizes[kept.checkpoint] = kept.size
        return dataclasses.replace(record, checkpoint=kept.checkpoint, saved_sha256=kept.sha256)

    async def _discard(self, kept: files.Previous | None) -> None:
        """Remove a checkpoint file no record keeps (its write failed, or came second)."""
        if kept is not None and kept.checkpoint is not None:
            await self._thread(partial(files.remove, self._roots, kept.checkpoint))

    async def _index(self, record: FileCheckpoint) -> None:
        """One JSON line per checkpoint in `index.jsonl` next to the files, for people."""
        line = (json.dumps(record.to_json()) + "\n").encode("utf-8")
        where = os.path.join(self._directory(), "index.jsonl")
        try:
            await self._thread(partial(files.append_line, self._roots, where, line))
        except (RpcError, OSError) as exc:
            log.warning("acp_notebook: could not write the checkpoint index: %s", exc)

    def _replace(self, record: FileCheckpoint) -> None:
        kept = self._turns[record.turn_id]
        kept[:] = [record if f.real == record.real else f for f in kept]

    # -- reverting -------------------------------------------------------------------------------

    def last_turn(self) -> str | None:
        """The last turn that wrote, except turns reverted with nothing refused."""
        return next((t for t in reversed(self._turns) if t not in self._done), None)

    async def revert(self, turn_id: str | None = None, force: bool = False) -> RevertResult:
        """Put back the files `turn_id` (default: the last turn that wrote) wrote through the
        client, deleting those it created. A file changed since the agent wrote it is refused
        unless `force`. Edits an agent makes with its own tools are not covered."""
        if self._busy():
            raise TurnStateError("a turn is running: stop it (or let it finish) before reverting")
        turn = turn_id or self.last_turn()
        if turn is None or turn not in self._turns:
            known = ", ".join(self._turns) or "none"
            raise InvalidArgumentError(
                f"no checkpoints for turn {turn_id!r}; turns with checkpoints: {known}"
                if turn_id
                else "nothing to revert: no turn wrote a file through the client "
                "(or every such turn was reverted)"
            )
        done = []
        for record in list(self._turns[turn]):
            outcome = await self._revert_file(record, force)
            if outcome.action in ("restored", "deleted"):
                self._replace(dataclasses.replace(record, reverted=True))
            done.append(outcome)
        if all(f.action != "refused" for f in done):
            self._done.add(turn)
        return RevertResult(turn, tuple(done))

    async def _revert_file(self, record: FileCheckpoint, force: bool) -> RevertedFile:
        """One file: check it is still what the agent wrote, then restore or delete it."""
        path = record.path
        if not record.covered:
            return RevertedFile(path, "not covered", record.reason)
        if record.reverted:
            return RevertedFile(path, "already reverted")
        old = None
        if record.existed:
            old = await self._saved(record)
            if old is None:
                return RevertedFile(
                    path, "refused", "its checkpoint file is gone or was changed since"
                )
        written = files.Written(record.real, record.dev, record.ino, record.written_sha256)
        guard = files.Guard(
            tuple(self._workspace.protected), self._workspace.protect_notebooks, self.max_file_bytes
        )
        done = await self._thread(
            partial(files.put_back, self._roots, path, written, old, force, guard)
        )
        current = None if done.current is None else _text(done.current)
        restored = _text(old) if done.action == "restored" and old is not None else None
        return RevertedFile(path, done.action, done.reason, current, restored)

    async def _saved(self, record: FileCheckpoint) -> bytes | None:
        """The checkpoint's content, if it is still exactly what was kept."""
        assert record.checkpoint is not None
        try:
            old = await self._thread(
                partial(files.read_back, self._roots, record.checkpoint, self.max_file_bytes)
            )
        except (RpcError, OSError):
            return None
        if old is None or files.digest(old) != record.saved_sha256:
            return None
        return old

    async def _thread(self, fn: Callable[[], T]) -> T:
        return await run_in_daemon_thread(fn)


@dataclass
class _Taking:
    """One write's `before` hook, run in its worker thread on the write's own walk: keeps the
    previous content in checkpoint file `where` (at most `room` bytes), unless this turn kept
    that file already (`skip`, real paths) or the session's records are full. `previous`
    stays for the clean-up when the write fails after it."""

    roots: Sequence[Root]
    where: str
    room: int
    skip: frozenset[str]
    full: bool
    previous: files.Previous | None = None

    def __call__(self, spot: Spot) -> files.Previous | None:
        if spot.real in self.skip or self.full:
            return None
        self.previous = files.keep_previous(self.roots, spot, self.where, self.room)
        return self.previous


def _request(params: Any) -> tuple[str | None, bytes | None]:
    """The path and the bytes a write request asks for (None: malformed)."""
    if not isinstance(params, dict):
        return None, None
    path, content = params.get("path"), params.get("content")
    if not isinstance(path, str) or not path.startswith("/") or not isinstance(content, str):
        return None, None
    try:
        return path, content.encode("utf-8")
    except UnicodeEncodeError:
        return None, None


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80]


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
