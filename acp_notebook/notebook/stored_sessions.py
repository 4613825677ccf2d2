"""Named sessions kept across kernel restarts: `.acp_notebook/sessions.json` in the workspace.

The file maps (notebook, session name, agent name) to the agent's session id, so that the first
use of a name after a restart can ask the agent to resume it (`session/resume`, else
`session/load`), and to the session's story (its cells' fork points, `cell_forks.py`). It is
ours, but it sits in a directory the agent can write with its own tools:
it is read as hostile input. A file that is too large, not JSON, of the wrong shape, a symlink or
not a regular file gives one clear warning and is started afresh; an entry that is not well
formed is dropped. It never raises into a cell. Writes go to a temporary file (mode 0600,
`O_EXCL|O_NOFOLLOW`) renamed over the old one, so a crash or a concurrent reader never sees half
a file; each read-modify-write holds `sessions.lock` (`flock`), so two kernels of one workspace
writing at once keep both their entries. At most `MAX_ENTRIES` entries are kept (the most
recently used). Everything happens beneath one descriptor of `.acp_notebook`, opened without
following a link: checked to be no link and then used by path, the folder swapped for a link
meanwhile had the kernel write its file where the link led.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import secrets
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..display import publish, views
from ..display.views import Code, Doc
from ..errors import CapabilityError, ProtocolError, RequestError
from .cell_forks import Point, Story

if TYPE_CHECKING:
    from ..client.client import Client
    from ..client.host import SessionHost
    from ..client.session import Session
    from .runtime import Runtime

log = logging.getLogger("acp_notebook")

DIRNAME = ".acp_notebook"
FILENAME = "sessions.json"
#: The lock held around each read-modify-write of `FILENAME` (its content is never read).
LOCKNAME = "sessions.lock"
#: How long a write waits for another process's lock before it gives up, saying so. A write
#: holds it milliseconds, but the agent can take it too, for ever: the kernel never waits for it
#: on its loop (`Memory.keep` tries once, then hands the write to a thread that waits this long).
LOCK_WAIT = 2.0
NO_NOTEBOOK = "(no notebook)"
MAX_FILE_BYTES = 1024 * 1024
MAX_ENTRIES = 500
MAX_FIELD = 1000  # characters of a notebook path, session name, agent name or session id
_VERSION = 1
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Stored:
    """One remembered session."""

    notebook: str
    name: str
    agent: str
    session_id: str
    updated: float
    story: tuple[Point, ...] = ()  # its cells and their fork points (`cell_forks.py`)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "notebook": self.notebook,
            "session": self.name,
            "agent": self.agent,
            "sessionId": self.session_id,
            "updated": self.updated,
        }
        if self.story:
            out["story"] = Story(self.story).to_json()
        return out

    @classmethod
    def from_json(cls, value: Any) -> Stored | None:
        """An entry, or None for anything not well formed (it is dropped, not fatal)."""
        if not isinstance(value, dict):
            return None
        fields = [value.get(k) for k in ("notebook", "session", "agent", "sessionId")]
        strings = [f for f in fields if isinstance(f, str) and 0 < len(f) <= MAX_FIELD]
        if len(strings) != len(fields):
            return None
        updated = value.get("updated")
        if not isinstance(updated, int | float) or isinstance(updated, bool):
            updated = 0.0
        notebook, name, agent, sid = strings
        story = tuple(Story.from_json(value.get("story")).points)
        return cls(notebook, name, agent, sid, float(updated), story)


def notebook_key(user_ns: Mapping[str, Any]) -> str:
    """Which notebook this kernel runs, when something says so; else `NO_NOTEBOOK`.

    jupyter-server sets JPY_SESSION_NAME (ipykernel copies it to `__session__`); VS Code sets
    `__vsc_ipynb_file__`. nbclient, papermill and `jupyter execute` say nothing: their notebooks
    in one workspace share the key."""
    for value in (
        os.environ.get("JPY_SESSION_NAME"),
        user_ns.get("__session__"),
        user_ns.get("__vsc_ipynb_file__"),
    ):
        if isinstance(value, str) and value and len(value) <= MAX_FIELD:
            return os.path.abspath(value)
    return NO_NOTEBOOK


class SessionStore:
    """The sessions file of one workspace directory.

    `problems` collects what was wrong with the file (for the caller to show once); reading and
    writing never raise for a bad file or a failed write."""

    def __init__(self, workspace: str | os.PathLike[str]) -> None:
        self.directory = Path(workspace) / DIRNAME
        self.path = self.directory / FILENAME
        self.problems: list[str] = []
        #: The last `put` found the lock held by another process for its whole wait.
        self.busy = False

    def entries(self) -> list[Stored]:
        """Every well-formed entry of the file (none if it is missing or unreadable)."""
        raw = self._read()
        if raw is None:
            return []
        data: Any
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return self._bad("it is not valid JSON")
        sessions = data.get("sessions") if isinstance(data, dict) else None
        if not isinstance(sessions, list):
            return self._bad("it does not hold a list of sessions")
        found = [Stored.from_json(item) for item in sessions[: MAX_ENTRIES * 2]]
        return [s for s in found if s is not None]

    def get(self, notebook: str, name: str, agent: str) -> str | None:
        entry = self.find(notebook, name, agent)
        return entry.session_id if entry is not None else None

    def find(self, notebook: str, name: str, agent: str) -> Stored | None:
        for entry in self.entries():
            if (entry.notebook, entry.name, entry.agent) == (notebook, name, agent):
                return entry
        return None

    def put(
        self,
        notebook: str,
        name: str,
        agent: str,
        session_id: str,
        wait: float | None = None,
        story: tuple[Point, ...] = (),
    ) -> None:
        """Remember (or replace) the id (and story) of this name; the oldest entries go past
        the bound. Waits at most `wait` seconds (None: `LOCK_WAIT`) for another process's lock;
        `busy` says it was held all that time (and nothing was written)."""
        entry = Stored(
            notebook, name[:MAX_FIELD], agent[:MAX_FIELD], session_id, time.time(), story
        )
        if not entry.session_id or len(entry.session_id) > MAX_FIELD:
            return  # an id we could not read back is not worth keeping
        key = (entry.notebook, entry.name, entry.agent)
        # Read, change and replace under the workspace's lock: two kernels of one workspace
        # writing at once each replaced the file with their own reading of it (230 of 300 kept).
        with self._locked(LOCK_WAIT if wait is None else wait) as locked:
            if not locked:
                return
            kept = [e for e in self.entries() if (e.notebook, e.name, e.agent) != key]
            kept.sort(key=lambda e: e.updated, reverse=True)
            self._write([entry, *kept[: MAX_ENTRIES - 1]])

    # -- the file --------------------------------------------------------------------------------

    def _bad(self, why: str) -> list[Stored]:
        self.problems.append(
            f"{self.path} was ignored ({why}); remembered sessions start afresh from here"
        )
        return []

    def _folder(self, create: bool) -> int | None:
        """`.acp_notebook`'s descriptor, opened (made, with `create`) beneath the workspace's
        without following a link; None when there is none. OSError when it is a link or no
        folder."""
        top = os.open(self.directory.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(DIRNAME, 0o700, dir_fd=top)
            try:
                return os.open(DIRNAME, _DIR_FLAGS, dir_fd=top)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise OSError(exc.errno, f"{DIRNAME} is a symlink or not a folder") from None
                raise
        finally:
            os.close(top)

    def _read(self) -> bytes | None:
        try:
            folder = self._folder(create=False)
            if folder is None:
                return None
            try:
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                fd = os.open(FILENAME, flags, dir_fd=folder)
            finally:
                os.close(folder)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._bad(f"it cannot be opened: {exc.strerror or exc}")
            return None
        with open(fd, "rb", closefd=True) as file:
            st = os.fstat(file.fileno())
            if not stat.S_ISREG(st.st_mode):
                self._bad("it is not a regular file")
                return None
            data = file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            self._bad(f"it is larger than {MAX_FILE_BYTES} bytes")
            return None
        return data

    @contextlib.contextmanager
    def _locked(self, wait: float) -> Iterator[bool]:
        """Hold the workspace's lock on the file (`LOCKNAME`, `flock`), waiting at most `wait`
        seconds; yields False, the problem noted, when it cannot be had (`busy`: it was held).

        The lock file is opened inside the directory (opened without following a symlink), not
        following a symlink itself, and only if it is a regular file: the agent can write here.
        A holder that dies releases it (the kernel closes its descriptors)."""
        fd = -1
        self.busy = False
        try:
            fd = self._open_lock()
            deadline = time.monotonic() + wait
            pause = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    # flock has no timeout: poll, backing off; a holder keeps it milliseconds.
                    if time.monotonic() >= deadline:
                        self.busy = True
                        raise OSError(f"another process has held it for {wait:g} s") from None
                    time.sleep(pause)
                    pause = min(pause * 2, 0.05)
        except OSError as exc:
            if fd >= 0:
                os.close(fd)
            why = exc.strerror or str(exc)
            self.problems.append(
                f"could not save {self.path}: cannot lock {self.directory / LOCKNAME} ({why})"
            )
            log.warning("acp_notebook: cannot lock %s: %s", self.directory / LOCKNAME, why)
            yield False
            return
        try:
            yield True
        finally:
            os.close(fd)  # releases the lock

    def _open_lock(self) -> int:
        try:
            directory = self._folder(create=True)
        except OSError as exc:
            raise OSError(f"{self.directory} is not a directory of ours ({exc.strerror})") from None
        if directory is None:
            raise OSError(errno.ENOENT, f"{self.directory} vanished")
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(LOCKNAME, flags, 0o600, dir_fd=directory)
        finally:
            os.close(directory)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"{LOCKNAME} is not a regular file")
        return fd

    def _write(self, entries: list[Stored]) -> None:
        body = _body(entries)
        while len(body) > MAX_FILE_BYTES and len(entries) > 1:
            # Never a file its reader refuses (stories make entries long): the oldest go.
            entries = entries[: max(1, len(entries) * 3 // 4)]
            body = _body(entries)
        tmp = f".sessions.{secrets.token_hex(8)}.tmp"
        folder = None
        try:
            folder = self._folder(create=True)
            if folder is None:
                raise OSError(errno.ENOENT, f"{self.directory} vanished")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o600, dir_fd=folder)
            with open(fd, "wb", closefd=True) as file:
                file.write(body)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, FILENAME, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as exc:
            if folder is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=folder)
            self.problems.append(f"could not save {self.path}: {exc}")
            log.warning("acp_notebook: could not save %s: %s", self.path, exc)
        finally:
            if folder is not None:
                os.close(folder)


def _body(entries: list[Stored]) -> bytes:
    return json.dumps(
        {"version": _VERSION, "sessions": [e.to_json() for e in entries]}, indent=1
    ).encode("utf-8")


# -- the kernel's side: resume a stored session on the first use of its name ------------------


@dataclass(frozen=True)
class _Entry:
    """What one write remembers of a name (a `Stored` before the store stamps its time)."""

    notebook: str
    name: str
    agent: str
    session_id: str
    story: tuple[Point, ...]

    def put(self, store: SessionStore, wait: float | None = None) -> None:
        store.put(self.notebook, self.name, self.agent, self.session_id, wait, self.story)


@dataclass
class _Kernel:
    """What one kernel (its `Runtime`) did with the file: names opened, ids written, warnings."""

    opened: set[tuple[str, str]] = field(default_factory=set)  # (agent, name)
    written: dict[tuple[str, str, str, str], _Entry] = field(default_factory=dict)
    warned: set[str] = field(default_factory=set)


_KERNELS: weakref.WeakKeyDictionary[Runtime, _Kernel] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Memory:
    """Remembering sessions for one notebook (None instead when `remember_sessions` is off)."""

    notebook: str

    @classmethod
    def of(cls, enabled: bool, user_ns: Mapping[str, Any]) -> Memory | None:
        return cls(notebook_key(user_ns)) if enabled else None

    async def open(
        self,
        runtime: Runtime,
        client: Client,
        agent: str,
        name: str,
        mcp_servers: list[dict[str, Any]] | None = None,
        system_prompt: str | None = None,
    ) -> tuple[Session | None, Story]:
        """The stored session of `name`, reopened (given `mcp_servers` and `system_prompt`,
        None: the client's), and its story, on its first use in this kernel; else None (the
        caller starts a new one). Says in one line what happened."""
        kernel = _KERNELS.setdefault(runtime, _Kernel())
        if (agent, name) in kernel.opened:
            return None, Story()
        kernel.opened.add((agent, name))
        store = SessionStore(client.cwd)
        stored = store.find(self.notebook, name, agent)
        self._warn(kernel, store)
        if stored is None:
            return None, Story()
        session, how = await _reopen(client, stored.session_id, mcp_servers, system_prompt)
        if how:
            publish.show(views.message(*how, mask=runtime.redactor.text))
        story = Story(stored.story)
        return session, story if session is not None else Story()

    def keep(
        self,
        runtime: Runtime,
        client: SessionHost,
        agent: str,
        name: str,
        session: Session,
        story: Story | None = None,
    ) -> None:
        """Remember the session's id and story (written only when they changed)."""
        kernel = _KERNELS.setdefault(runtime, _Kernel())
        kernel.opened.add((agent, name))
        key = (client.cwd, self.notebook, name, agent)
        points = tuple((story or Story()).points)
        entry = _Entry(self.notebook, name, agent, session.id, points)
        if kernel.written.get(key) == entry:
            return
        store = SessionStore(client.cwd)
        # Never waited for on the kernel's loop: the wait held every turn, widget and request
        # of the kernel (2 s per new session while the agent, whose shell can reach the
        # workspace, held the lock). Tried once; if held (or writes are still queued, which
        # must stay in order), a thread waits for it.
        if not _LATER.add(store, entry):
            entry.put(store, wait=0)
            if store.busy:
                store.problems.clear()  # not a problem yet: written once the lock is free
                _LATER.add(store, entry, start=True)
        kernel.written[key] = entry
        self._warn(kernel, store)

    @staticmethod
    def _warn(kernel: _Kernel, store: SessionStore) -> None:
        for problem in store.problems:
            if problem not in kernel.warned:
                kernel.warned.add(problem)
                log.warning("acp_notebook: %s", problem)
                publish.show(views.message("Warning: ", problem))
        store.problems.clear()


class _Later:
    """The writes that found the lock held, done in order by one thread, off the kernel's
    loop; a write that still fails after `LOCK_WAIT` is logged (the cell has moved on)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[tuple[SessionStore, _Entry]] = []
        self._idle = threading.Event()
        self._idle.set()

    def add(self, store: SessionStore, entry: _Entry, start: bool = False) -> bool:
        """Queue `entry` if writes are queued already, or with `start`; False if not queued."""
        with self._lock:
            if not self._queue and not start:
                return False
            self._queue.append((store, entry))
            if self._idle.is_set():
                self._idle.clear()
                threading.Thread(
                    target=self._run, name="acp_notebook-sessions", daemon=True
                ).start()
            return True

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._idle.set()
                    return
                store, entry = self._queue[0]
            try:
                entry.put(store)
            except Exception:  # never the thread's end: the queue behind it would stall
                log.exception("acp_notebook: could not save %s", store.path)
            for problem in store.problems:
                log.warning("acp_notebook: %s", problem)
            store.problems.clear()
            with self._lock:
                self._queue.pop(0)

    def wait(self, timeout: float) -> bool:
        """Whether every queued write was done (or given up) within `timeout` seconds."""
        return self._idle.wait(timeout)


_LATER = _Later()


def wait_for_writes(timeout: float) -> bool:
    """Whether the writes that waited for the lock are done (or given up) within `timeout`."""
    return _LATER.wait(timeout)


def short(session_id: str) -> str:
    return session_id if len(session_id) <= 12 else session_id[:12] + "…"


async def _reopen(
    client: Client,
    session_id: str,
    mcp_servers: list[dict[str, Any]] | None,
    system_prompt: str | None,
) -> tuple[Session | None, list[Any]]:
    """Resume, else load, else nothing; the session (None: start anew) and what to say."""
    sid = Code(short(session_id))
    before = " from before the restart"
    resume = client.session_capabilities.get("resume") is not None
    load = bool(client.agent_capabilities.get("loadSession"))
    if not resume and not load:  # nothing to try: nothing to say (a new session is the norm)
        log.debug("acp_notebook: agent %s cannot reopen session %s", client.agent_name, session_id)
        return None, []
    try:
        if resume:
            session = await client.resume_session(
                session_id, mcp_servers=mcp_servers, system_prompt=system_prompt
            )
            return session, ["Resumed session ", sid, f"{before}."]
        session = await client.load_session(
            session_id, mcp_servers=mcp_servers, system_prompt=system_prompt
        )
    except (RequestError, CapabilityError, ProtocolError) as exc:
        # One sentence in the cell; the agent's answer is in the kernel's log and `%agent log`.
        log.debug("acp_notebook: could not reopen session %s: %s", session_id, exc)
        return None, [
            "Session ",
            sid,
            f"{before} could not be continued: this is a new one (`%agent log` has the details).",
        ]
    turns = len(session.history)
    return session, ["Reloaded session ", sid, f"{before} ({turns} earlier turns replayed)."]


def sessions_doc(
    runtime: Runtime, workspace: str, memory: Memory | None, mask: Callable[[str], str]
) -> Doc | None:
    """`%agent sessions`' first part: the kernel's named sessions (live) and the stored ones of
    this notebook (resumed at the next use of their name); None if there are none."""
    rows: list[list[Any]] = []
    live = set()
    for name, entry in list(runtime.sessions.items()):
        live.add((name, entry.agent, entry.session.id))
        rows.append([Code(name), Code(entry.agent), Code(entry.session.id), "live in this kernel"])
    store = SessionStore(workspace) if memory is not None else None
    stored = (
        [e for e in store.entries() if e.notebook == memory.notebook] if store and memory else []
    )
    for e in stored[:MAX_ENTRIES]:
        if (e.name, e.agent, e.session_id) not in live:
            rows.append([Code(e.name), Code(e.agent), Code(e.session_id), "stored (not live)"])
    doc = Doc(mask)
    if store is not None:
        for problem in store.problems:
            doc.para("Warning: ", problem)
    if not rows:  # nothing to add to the agent's own list
        return doc if store is not None and store.problems else None
    where = f" ({store.path})" if store is not None else ""
    doc.para(f"Sessions of this kernel, and those stored for this notebook{where}:")
    for name, agent, sid, state in rows:  # a list, not a table: the agent's list is the table
        doc.item(name, " — agent ", agent, ", session ", sid, f": {state}")
    return doc
