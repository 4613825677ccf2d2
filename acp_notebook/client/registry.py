"""The client's sessions by id, and the routing of `session/update` to them.

A new session's first updates may arrive before its id is registered (in the same read as the
session/new answer): they are kept, within limits, while a session is being opened, and handed
to it when it registers. Any other update for an unknown id is dropped and counted.

A subagent's session (a child the agent announced on one of ours, `protocol/subagents.py`) is
no session of the client's: its updates and requests go to the session it was announced on
(`adopt`), which folds them into the child's sub-turn card.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from ..errors import RpcError
from ..protocol import jsonrpc as rpc
from ..protocol import methods
from ..protocol.limits import Limits, count


class Routed(Protocol):
    """What the registry needs of a session (`Session` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def running(self) -> object | None: ...

    async def handle(self, method: str, params: Any) -> Any: ...

    def report(self, message: str, level: str = "error") -> None: ...

    def receive(self, update: Any) -> None: ...

    def receive_child(self, child_id: str, update: Any) -> None: ...


S = TypeVar("S", bound=Routed)


class SessionRegistry(Generic[S]):
    """Sessions by their agent-side id. `report(message)` tells about an agent's mistake."""

    def __init__(self, limits: Callable[[], Limits], report: Callable[[str], None]) -> None:
        self._limits = limits
        self._report = report
        self._sessions: dict[str, S] = {}
        self._children: dict[str, S] = {}  # a subagent's id -> the session it works for
        self._orphans: dict[str, list[Any]] = {}
        self._orphan_room = [0, 0]  # updates, characters left
        self._opening = 0
        self._ignored: dict[str, None] = {}  # ids the client forked and does not route (ignore)
        self.dropped_updates = 0

    def get(self, session_id: Any) -> S | None:
        return self._sessions.get(session_id) if isinstance(session_id, str) else None

    def all(self) -> list[S]:
        return list(self._sessions.values())

    def __len__(self) -> int:
        return len(self._sessions)

    def held(self) -> dict[str, int]:
        """How many updates are held for each id not registered yet (a session being opened)."""
        return {sid: len(updates) for sid, updates in self._orphans.items()}

    async def route_request(self, method: str, params: Any) -> Any:
        """A request from the agent: to the session it names, else a JSON-RPC error."""
        sid = params.get("sessionId") if isinstance(params, dict) else None
        session = self.get(sid) or self.parent_of(sid)
        if session is None:
            if method in _SESSION_METHODS:
                raise RpcError(rpc.INVALID_PARAMS, f"unknown session: {rpc.excerpt(repr(sid))}")
            raise RpcError(rpc.METHOD_NOT_FOUND, f"method not found: {method}")
        return await session.handle(method, params)

    def show_in_turns(self, message: str) -> bool:
        """Show `message` in every running turn; whether there was one."""
        shown = False
        for session in self._sessions.values():
            if session.running is not None:
                session.report(message)
                shown = True
        return shown

    def route_update(self, params: Any) -> None:
        """A `session/update` notification: to its session, kept for one opening, or dropped."""
        # Runs once per streamed chunk: `get` inlined, one Python call less per chunk.
        sid = params.get("sessionId") if isinstance(params, dict) else None
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is not None:
            session.receive(params.get("update"))
            return
        if isinstance(sid, str) and (parent := self._children.get(sid)) is not None:
            parent.receive_child(sid, params.get("update"))  # a subagent's: its card
            return
        if not isinstance(sid, str):
            self._report(f"session/update without a sessionId: {rpc.excerpt(repr(params))}")
            return
        if sid in self._ignored:
            return  # a fork kept as a point to fork from: nobody shows what it says
        # Kept only while a session is being opened. At any other time nobody will ever take
        # them: drop and count (an agent inventing ids kept 400 MB).
        update = params.get("update")
        if self._opening:
            size = count(update, self._limits().orphan_chars)
            room = self._orphan_room
            if room[0] > 0 and size <= room[1]:
                room[0] -= 1
                room[1] -= size
                self._orphans.setdefault(sid, []).append(update)
                return
        elif self._orphans:
            self._drop_orphans()
        self._drop_updates(1, sid)

    def _drop_updates(self, n: int, sid: str) -> None:
        if not self.dropped_updates:
            self._report(
                f"the agent sent updates for a session it did not open "
                f"({rpc.excerpt(sid, 80)}); they are dropped and counted in "
                f"client.dropped_updates"
            )
        self.dropped_updates += n

    def _drop_orphans(self) -> None:
        for sid, updates in self._orphans.items():
            self._drop_updates(len(updates), sid)
        self._orphans.clear()

    @contextlib.contextmanager
    def opening(self) -> Iterator[None]:
        """While a session/new or session/resume is in flight (its id is not registered yet)."""
        if not self._opening:
            limits = self._limits()
            self._drop_orphans()
            self._orphan_room = [limits.orphan_updates, limits.orphan_chars]
        self._opening += 1
        try:
            yield
        finally:
            # Its updates stay until the caller registers the session (no await in between);
            # the next update for an unknown id after that drops what is left.
            self._opening -= 1

    def register(self, session: S, old_id: str | None = None) -> None:
        """Route the session's id to it (and no longer `old_id`, the id it had before)."""
        if old_id is not None and self._sessions.get(old_id) is session:
            del self._sessions[old_id]
        self._sessions[session.id] = session
        for update in self._orphans.pop(session.id, ()):
            session.receive(update)
        if not self._opening:
            self._drop_orphans()

    def ignore(self, session_id: str) -> None:
        """Drop, quietly, the updates for `session_id` (held and to come): a session the client
        opened but does not use (a fork kept as a point to fork from later). Bounded: the
        oldest ids past `MAX_IGNORED` are forgotten (and their updates counted as dropped)."""
        self._orphans.pop(session_id, None)
        self._ignored[session_id] = None
        while len(self._ignored) > MAX_IGNORED:
            del self._ignored[next(iter(self._ignored))]

    def forget(self, session: S) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
        for child in [c for c, parent in self._children.items() if parent is session]:
            del self._children[child]

    def adopt(self, child_id: str, parent: S) -> None:
        """Route the subagent `child_id` to the session it was announced on (`parent`). An id
        that is a session of ours stays ours: a child cannot take a session over."""
        if child_id not in self._sessions and len(self._children) < MAX_CHILDREN:
            self._children.setdefault(child_id, parent)

    def parent_of(self, child_id: Any) -> S | None:
        """The session a subagent works for, None if `child_id` is no subagent's."""
        return self._children.get(child_id) if isinstance(child_id, str) else None


#: Ids of forks kept as points (`ignore`) whose updates are dropped quietly.
MAX_IGNORED = 1000

#: Subagents routed, for all the sessions together (each session bounds its own, too).
MAX_CHILDREN = 10_000

_SESSION_METHODS = frozenset(
    {
        methods.REQUEST_PERMISSION,
        methods.FS_READ_TEXT_FILE,
        methods.FS_WRITE_TEXT_FILE,
        *methods.TERMINAL_METHODS,
    }
)
