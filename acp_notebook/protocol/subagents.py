"""Subagents: the child sessions an agent exposes (ACP v1, stable 2026-11-20, for a client that
opted in with `clientCapabilities.subagents`), folded into the turn of their parent.

The agent announces a child with a `subagent_update` on the parent (`sessionId` names the child;
`title`, `description`, `capabilities`, `state` patch: omitted = unchanged, null = cleared), then
sends the child's messages, thoughts, plans and tool calls as ordinary `session/update`s with the
child's `sessionId`, and asks permission for the child's tool calls with the child's
`sessionId`. Each child is a `SubagentPart` in the parent's turn (a sub-turn card) whose parts a
fold of its own writes: the same fold as a session's (a `SessionFold`, made by `make_fold`),
with part ids of its own (`s3.m1`: the live view keys parts and buttons by id) and smaller
limits. A child may announce children of its own (to `MAX_DEPTH`); every descendant is found by
id in one index, so the client routes any child's update and request to its top-level session.

A child reused in a later turn gets a new card in that turn (its work of that turn). A child that
advertises `capabilities.cancel` can be stopped with `session/cancel` on its id: `cancellable`
lists them for the Stop button. Updates for a child never announced are not this module's: the
client counts them as updates for an unknown session.

Bounded: children per turn (`Limits.subagents`), in all (`MAX_CHILDREN`), depth, and each
child's own fold by its limits; strings clipped. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from .coerce import text
from .limits import MAX_ID_CHARS
from .notes import NotFolded
from .state import MessagePart, Part, SubagentPart, ToolCallPart, Usage

#: How deep children may nest (a child's child's child…); deeper announcements are dropped.
MAX_DEPTH = 3
#: Children one session may announce in all (its turns together): the routing index's bound.
MAX_CHILDREN = 1_000
_TITLE_CHARS = 500
_DESCRIPTION_CHARS = 4_000


class _Record(Protocol):
    parts: list[Part]
    dropped: dict[str, int]


class _Facts(Protocol):
    @property
    def usage(self) -> Usage | None: ...


class ChildFold(Protocol):
    """A child's fold (`SessionFold`): what this module needs of it."""

    @property
    def facts(self) -> _Facts: ...

    def apply(self, update: Any) -> None: ...

    def begin_turn(self, turn_id: str, prompt: list[dict[str, Any]]) -> _Record: ...

    def mark_cancelled(self) -> None: ...


F = TypeVar("F", bound=ChildFold)

#: Makes a child's fold: (its id prefix, the children it is one of, what it tells of each
#: change in it).
MakeFold = Callable[[str, "Subagents[F]", Callable[[object], None]], F]


class SubagentHost(Protocol):
    """The fold a child is announced on (`SessionFold`): what this module needs of it."""

    def new_id(self, prefix: str) -> str: ...

    def add_part(self, part: SubagentPart, kind: str) -> bool: ...

    def updated_in(self, turn_id: str, part: SubagentPart) -> None: ...

    def target_turn_id(self) -> str: ...

    def count_parts(self, kind: str) -> int: ...

    def drop(self, kind: str, n: int = 1) -> None: ...


@dataclass(slots=True, eq=False)
class Child(Generic[F]):
    """One announced child: its card in the turn it last worked in, and the fold writing it."""

    part: SubagentPart
    fold: F
    home: str  # the id of the parent's record its card is in
    owner: Subagents[F]  # the children it is one of (of the session it was announced on)


class Subagents(Generic[F]):
    """The children announced on one session (or on one child: `depth` > 0)."""

    def __init__(
        self,
        host: SubagentHost,
        make_fold: MakeFold[F],
        per_turn: int,
        *,
        depth: int = 0,
        index: dict[str, Child[F]] | None = None,
        on_child: Callable[[str], None] | None = None,
    ) -> None:
        self._host = host
        self._make_fold = make_fold
        self._per_turn = per_turn
        self.depth = depth
        #: Every descendant of the top-level session, by id (shared by the nested ones).
        self.index: dict[str, Child[F]] = {} if index is None else index
        #: Told each child's id when it is first announced (the client routes it from then on).
        self.on_child = on_child

    def nested(self, host: SubagentHost, make_fold: MakeFold[F]) -> Subagents[F]:
        """The children of one of our children: one level deeper, the same index."""
        return Subagents(
            host,
            make_fold,
            self._per_turn,
            depth=self.depth + 1,
            index=self.index,
            on_child=self.on_child,
        )

    # -- the parent's subagent_update -------------------------------------------------------------

    def announce(self, update: dict[str, Any]) -> None:
        """A `subagent_update` on this session: a new child, or a patch of a known one."""
        child_id = update.get("sessionId")
        if type(child_id) is not str or not child_id or len(child_id) > MAX_ID_CHARS:
            raise NotFolded("sessionId must be a session id")
        child = self.index.get(child_id)
        if child is None:
            if self.depth >= MAX_DEPTH or len(self.index) >= MAX_CHILDREN:
                self._host.drop("subagents")
                return
            child = self._new_card(child_id, None)
            if child is None:
                return
            self.index[child_id] = child
            if self.on_child is not None:
                self.on_child(child_id)
        else:
            child = child.owner.current(child)  # announced again: still its first parent's
            if child is None:
                return
        patch(child.part, update)
        self._host.updated_in(child.home, child.part)

    def _new_card(self, child_id: str, old: SubagentPart | None) -> Child[F] | None:
        """A card for the child in this session's current record (None past the limits)."""
        if self.count_cards() >= self._per_turn:
            self._host.drop("subagents")
            return None
        prefix = self._host.new_id("s") + "."
        part = SubagentPart(prefix + "card", child_id)
        if old is not None:  # the same child in a new turn: what it is stays
            part.title, part.description = old.title, old.description
            part.state, part.stop_reason, part.can_cancel = (
                old.state,
                old.stop_reason,
                old.can_cancel,
            )
        if not self._host.add_part(part, "subagents"):
            return None
        holder: list[Child[F]] = []  # the child, once made: its fold tells it every change
        fold = self._make_fold(prefix, self, lambda _: self._child_changed(holder))
        record = fold.begin_turn(prefix + "turn", [])
        part.parts, part.dropped = record.parts, record.dropped
        holder.append(Child(part, fold, self._host.target_turn_id(), self))
        return holder[0]

    def _rehome(self, child: Child[F]) -> Child[F] | None:
        moved = self._new_card(child.part.session_id, child.part)
        if moved is not None:
            self.index[child.part.session_id] = moved
        return moved

    def count_cards(self) -> int:
        return self._host.count_parts("subagent")

    def _child_changed(self, made: list[Child[F]]) -> None:
        if not made:
            return  # its fold is being made
        child = made[0]
        child.part.usage = child.fold.facts.usage  # its cost, when it reports one
        self._host.updated_in(child.home, child.part)

    # -- the child's own updates ------------------------------------------------------------------

    def apply(self, child_id: str, update: Any) -> bool:
        """An update the agent sent for a child (or a deeper descendant); False if `child_id`
        was never announced (the caller counts it as an update for an unknown session)."""
        child = self.index.get(child_id)
        if child is None:
            return False
        here = child.owner.current(child)
        if here is not None:  # else no room for its card in this turn: counted there
            here.fold.apply(update)
        return True

    def current(self, child: Child[F]) -> Child[F] | None:
        """`child` (one of ours) with its card in this session's current record: itself, or,
        working again in a later turn, a new card there (None past that turn's limits)."""
        if child.home == self._host.target_turn_id():
            return child
        return self._rehome(child)

    def fold_of(self, child_id: Any) -> F | None:
        """The fold of a child (for its permission requests), None if it is not one."""
        child = self.index.get(child_id) if isinstance(child_id, str) else None
        return None if child is None else child.fold

    def name_of(self, child_id: str) -> str:
        """What the person is told the child is: its title, or its id."""
        child = self.index.get(child_id)
        title = child.part.title if child is not None else None
        return " ".join((title or child_id).split())[:_TITLE_CHARS]

    def cancellable(self) -> list[str]:
        """The children the client may stop (`capabilities.cancel`), each marked cancelled."""
        ids = [cid for cid, child in self.index.items() if child.part.can_cancel]
        for cid in ids:
            self.index[cid].fold.mark_cancelled()
        return ids


class MessageHost(Protocol):
    """What folding a message between sessions needs of the fold (its `PartWriter`)."""

    def new_id(self, prefix: str) -> str: ...

    def add_part(self, part: MessagePart, kind: str) -> bool: ...

    def updated(self, part: MessagePart) -> None: ...

    def find_part(self, kind: str, key: str) -> Any: ...

    def clip(self, value: str) -> str: ...


def fold_session_message(host: MessageHost, update: dict[str, Any]) -> None:
    """`session_message_chunk` (a block appended) or `session_message` (the message whole): a
    message between the parent and a child, kept as a message of role `session` (shown, not
    part of the answer). A whole message already shown is not shown again."""
    message_id = update.get("messageId")
    if type(message_id) is not str or not message_id:
        raise NotFolded("messageId must be a non-empty string")
    chunk = update.get("sessionUpdate") == "session_message_chunk"
    blocks = [update.get("content")] if chunk else update.get("content")
    if type(blocks) is not list:
        blocks = []
    key = host.clip(message_id)[:200]
    part = host.find_part("message", key)
    if isinstance(part, MessagePart) and part.role == "session":
        if not chunk:
            return
    else:
        part = MessagePart(host.new_id("m"), "session", key)
        if not host.add_part(part, "messages"):
            return
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text":
            room = _MESSAGE_CHARS - len(part.text)
            part.append(host.clip(text(block.get("text")))[: max(0, room)])
    host.updated(part)


#: Characters of one message between sessions kept.
_MESSAGE_CHARS = 64 * 1024


def patch(part: SubagentPart, update: dict[str, Any]) -> None:
    """Apply a `subagent_update`'s fields: omitted = unchanged, null = cleared, a value of the
    wrong type = ignored (the schema's `default-on-error`)."""
    if "title" in update:
        part.title = _opt(update["title"], _TITLE_CHARS, part.title)
    if "description" in update:
        part.description = _opt(update["description"], _DESCRIPTION_CHARS, part.description)
    if "capabilities" in update:
        caps = update["capabilities"]
        if caps is None or isinstance(caps, dict):
            part.can_cancel = isinstance(caps, dict) and isinstance(caps.get("cancel"), dict)
    if "state" in update:
        state = update["state"]
        if state is None:
            part.state, part.stop_reason = None, None
        elif isinstance(state, dict) and type(state.get("state")) is str:
            part.state = state["state"][:40]
            reason = state.get("stopReason")
            part.stop_reason = reason[:40] if type(reason) is str else None


#: The draft's terminal states (`subagent_state_update`) as the stable `state` says them.
_DRAFT_STATES = {"completed": "end_turn", "failed": "error", "cancelled": "cancelled"}


def from_draft(update: dict[str, Any]) -> dict[str, Any]:
    """The `subagent_update` that says what an older adapter's draft update says.

    The draft of 2026-08 (schema.unstable.json, before the RFD's rework into one upsert) had
    `subagent_spawned` (`subagentSessionId`, `name`, `task`, `capabilities: {cancel: bool,
    close: bool}`) and `subagent_state_update` (`subagentSessionId`, `state`: completed, failed
    or cancelled). Both name the child the same way, so the child's own updates route to its
    card as a stable one's do. Anything else is `NotFolded` (kept as a raw part)."""
    child_id = update.get("subagentSessionId")
    if type(child_id) is not str or not child_id:
        raise NotFolded("subagentSessionId must be a session id")
    out: dict[str, Any] = {"sessionUpdate": "subagent_update", "sessionId": child_id}
    if update.get("sessionUpdate") == "subagent_state_update":
        state = update.get("state")  # hostile: a list or an object is no key of the table
        reason = _DRAFT_STATES.get(state) if type(state) is str else None
        if reason is None:
            raise NotFolded("state must be completed, failed or cancelled")
        out["state"] = {"state": "idle", "stopReason": reason}
        return out
    name, task = update.get("name"), update.get("task")
    if type(name) is str:
        out["title"] = name
    if type(task) is str:
        out["description"] = task
    caps = update.get("capabilities")
    if isinstance(caps, dict):
        out["capabilities"] = {"cancel": {}} if caps.get("cancel") is True else None
    out["state"] = {"state": "running"}
    return out


def _opt(value: Any, limit: int, old: str | None) -> str | None:
    if value is None:
        return None
    return text(value)[:limit] if type(value) is str else old


@dataclass(frozen=True, slots=True)
class SubagentResult:
    """What a child session did in the turn: `TurnResult.subagents`."""

    #: The child's session id (the agent's).
    session_id: str
    #: Its title, as the parent's agent named it.
    title: str | None
    #: What it was given to do, as the parent's agent described it.
    description: str | None
    #: Its work state as last reported (`running`, `idle`, `requires_action`, …).
    state: str | None
    #: Why it stopped (`end_turn`, `cancelled`, `error`…), if it said.
    stop_reason: str | None
    #: Its answer (its agent messages joined).
    text: str
    #: Its tool calls.
    tool_calls: tuple[ToolCallPart, ...]
    #: Everything its card shows (messages, tool calls, permissions, plans, its own children).
    parts: tuple[Part, ...]

    @classmethod
    def of(cls, part: SubagentPart) -> SubagentResult:
        return cls(
            part.session_id,
            part.title,
            part.description,
            part.state,
            part.stop_reason,
            "".join(p.text for p in part.parts if isinstance(p, MessagePart) and p.role == "agent"),
            tuple(p for p in part.parts if isinstance(p, ToolCallPart)),
            tuple(part.parts),
        )


def results(parts: Sequence[Part]) -> tuple[SubagentResult, ...]:
    """The children of a turn with these parts, in order."""
    return tuple(SubagentResult.of(p) for p in parts if isinstance(p, SubagentPart))
