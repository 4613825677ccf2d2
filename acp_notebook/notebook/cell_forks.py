"""Forks per cell: a `%%agent` cell run again takes its earlier turn's place in the
conversation, instead of adding a turn after everything said since.

A named session's conversation is a story: the cells whose turns it holds, in order, each with
its point, a fork (`session/fork`, unstable) of the conversation as it stood before that cell's
turn. Before a cell's turn:

- a cell not in the story (its first run, or a cell dropped from it) goes on at the end: the
  session is forked as it stands (the cell's point), then prompted;
- a cell in the story runs on a new fork of its point: the conversation as it stood before its
  previous run. The cells after it leave the story (their turns are not in this conversation),
  and the fork is the session from now on: the next cell, whichever it is, continues from it.

So, as with variables in Jupyter, what counts is the order in which cells ran: re-run cell 2 of
5, then cell 3, and cell 3's turn comes after the new cell 2 (cell 3 had left the story, so it
goes on at the end); a notebook run again top to bottom gives each cell the same history it had
the first time, the earlier cells' new turns in place of their old ones. An agent that cannot
fork (no `sessionCapabilities.fork`) gets each turn appended, as before, and the cell says so
once. The story keeps the last `MAX_POINTS` cells; it is stored with the session's id
(`stored_sessions.py`) so that a kernel restarted on the same notebook keeps it. A point that
leaves the story is deleted where the agent can delete sessions: nothing forks from it again;
so is a fork a re-run made the named session, when a later re-run replaces it (the session the
kernel opened or resumed is closed then, not deleted: it may be a conversation of the user's).

Cells are known by the id the front-end sends (`cellId`: JupyterLab and Notebook do); a cell
run without one (nbclient, papermill) is appended.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..display import publish, views
from ..display.views import Code
from ..errors import CapabilityError, ProtocolError, RequestError

if TYPE_CHECKING:
    from ..client.client import Client
    from ..client.session import Session
    from ..protocol.redact import Redactor

log = logging.getLogger("acp_notebook")

#: Cells a session's story keeps (the oldest leave it: run again, they are appended).
MAX_POINTS = 50
#: Characters of a cell id or a point's session id that a story keeps (longer ones: none).
MAX_ID = 200


class Runtime(Protocol):
    """What the cell's story needs of the kernel's runtime (`runtime.Runtime`): to say once."""

    @property
    def redactor(self) -> Redactor: ...

    def first_time(self, notice: str) -> bool: ...


class NamedSession(Protocol):
    """A named session of the kernel (`runtime.NamedSession`), its story with it."""

    agent: str
    session: Session
    story: Story


@dataclass(frozen=True)
class Point:
    """A cell of the story and the fork made before its turn (None: none could be made)."""

    cell: str
    session_id: str | None


class Story:
    """The cells whose turns make a named session's conversation, in the order they ran."""

    def __init__(self, points: Iterable[Point] = ()) -> None:
        self.points = list(points)[-MAX_POINTS:]
        # The run (execute request) whose turn went on last, and its cell: a cell that prompts
        # again in the same run (a loop of turns in one cell) goes on after its own turn, it
        # does not replace it. Not stored: a run does not outlive its kernel.
        self.last_run: tuple[str, str] | None = None
        # The named session when it is a fork a re-run made (ours): the next re-run that
        # replaces it deletes it too. Not stored: after a restart the session is left alone.
        self.live_fork: str | None = None

    def same_run(self, cell: str, run: str | None) -> bool:
        """Whether `cell`'s turn is a further one of the run (`run`) whose turn went on last;
        remembers this run as the last."""
        last = self.points[-1].cell if self.points else None
        same = run is not None and self.last_run == (cell, run) and last == cell
        self.last_run = (cell, run) if run is not None else None
        return same

    def find(self, cell: str) -> int | None:
        return next((i for i, p in enumerate(self.points) if p.cell == cell), None)

    def rerun(self, at: int) -> list[str]:
        """The cell at `at` runs again from its point: those after it leave the story. Returns
        the points that left with them (no cell can fork from them any more)."""
        gone = self.points[at + 1 :]
        del self.points[at + 1 :]
        return _ids(gone)

    def append(self, cell: str, session_id: str | None) -> list[str]:
        """`cell`'s turn goes on at the end, `session_id` its point. Returns the points that
        left the story: the cell's earlier one, the oldest past the bound."""
        gone = [p for p in self.points if p.cell == cell]
        self.points = [p for p in self.points if p.cell != cell]
        self.points.append(Point(cell, session_id))
        gone += self.points[:-MAX_POINTS]
        del self.points[:-MAX_POINTS]
        return _ids(gone)

    def to_json(self) -> list[list[str | None]]:
        return [[p.cell, p.session_id] for p in self.points]

    @classmethod
    def from_json(cls, value: Any) -> Story:
        """A story read back (`sessions.json`, hostile): what is not well formed is left out."""
        points = []
        for item in value[-MAX_POINTS:] if isinstance(value, list) else []:
            if not isinstance(item, list) or len(item) != 2:
                continue
            cell, sid = item
            if _id(cell) and (sid is None or _id(sid)):
                points.append(Point(cell, sid))
        return cls(points)


def _ids(points: list[Point]) -> list[str]:
    return [p.session_id for p in points if p.session_id is not None]


def _id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID


async def turn_session(
    runtime: Runtime, entry: NamedSession, client: Client, cell: str | None, run: str | None
) -> Session:
    """The session the turn of `cell` (in its run `run`) goes to: the named session (`entry`'s,
    of `client`), forked first (its story updated), or a fork of the cell's point (the named
    session from now on), or, for a further turn of the same run, the named session as it is."""
    session = entry.session
    if cell is None or not _id(cell):
        return session
    story = entry.story
    if story.same_run(cell, run):
        return session  # the same run's next turn: after its first, in the same story
    at = story.find(cell)
    if client.session_capabilities.get("fork") is None:
        if at is not None:
            _say_once(
                runtime,
                f"no fork {entry.agent}",
                "Agent ",
                Code(entry.agent),
                " cannot fork sessions: this cell's new turn is added after the whole "
                "conversation, its earlier turn stays in it.",
            )
        story.append(cell, None)
        return session
    if session.running is not None:  # a --background turn runs: this one queues behind it
        gone = story.append(cell, None)
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            await _forget(client, gone)
        return session
    point = story.points[at].session_id if at is not None else None
    if at is not None and point is not None:
        fork = await _run_again(runtime, entry, client, at, point)
        if fork is not None:
            return fork
    try:
        snapshot: str | None = await session.snapshot()
    except (RequestError, CapabilityError, ProtocolError) as exc:
        _cannot_fork(runtime, entry, exc)
        snapshot = None
    gone = story.append(cell, snapshot if snapshot is not None and _id(snapshot) else None)
    with anyio.CancelScope(shield=True), anyio.move_on_after(10):
        await _forget(client, gone)
    return session


async def _run_again(
    runtime: Runtime, entry: NamedSession, client: Client, at: int, point: str
) -> Session | None:
    """The cell at `at` of the story runs again: on a fork of its `point`, the named session
    from now on. None where the agent could not fork (the turn goes on at the end)."""
    session, story = entry.session, entry.story
    try:
        fork = await client.fork_session(
            point,
            session.cwd,
            mcp_servers=session.mcp_servers,
            additional_directories=session.additional_directories,
            system_prompt=session.system_prompt,
        )
    except (RequestError, CapabilityError, ProtocolError) as exc:
        _cannot_fork(runtime, entry, exc)
        return None
    gone = story.rerun(at)
    if story.live_fork == session.id:  # a fork of ours, not the session as opened
        gone.append(session.id)
    story.live_fork = fork.id
    entry.session = fork
    with anyio.CancelScope(shield=True), anyio.move_on_after(10):
        await session.close()  # the conversation it held is no longer the story
        await _forget(client, gone)
    return fork


async def _forget(client: Client, points: list[str]) -> None:
    """Delete the forks no cell can fork from any more, where the agent deletes sessions
    (`session/delete`): they are ours, made for the story, and would fill the agent's list of
    sessions, one per turn. Best effort: a point the agent cannot delete stays."""
    if client.session_capabilities.get("delete") is None:
        return
    for point in points:
        try:
            await client.delete_session(point)
        except (RequestError, CapabilityError, ProtocolError) as exc:
            log.debug("acp_notebook: could not delete fork %s: %s", point, exc)


def _cannot_fork(runtime: Runtime, entry: NamedSession, exc: Exception) -> None:
    log.debug("acp_notebook: could not fork session %s: %s", entry.session.id, exc)
    _say_once(
        runtime,
        f"fork failed {entry.agent}",
        "Agent ",
        Code(entry.agent),
        " could not fork the session (`%agent log` has its answer): this cell's turn is "
        "added after the whole conversation.",
    )


def _say_once(runtime: Runtime, key: str, *words: Any) -> None:
    if runtime.first_time(key):
        publish.show(views.message(*words, mask=runtime.redactor.text))
