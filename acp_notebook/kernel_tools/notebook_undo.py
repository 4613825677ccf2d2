"""`%agent revert` for the notebook: what a turn's cell tools changed, and undoing it.

`notebook_edit` notes each cell a turn inserted or edited in the live notebook (through the
extension), with the source the agent left there. A revert of the turn, newest change first,
removes the cells it inserted and puts back the sources it replaced, through the same link to
the same notebook, and only where the cell still holds what the agent left: a cell changed
since (by the person, or a later turn) is refused and named, unless forced. A cell that is
running is never touched (the extension refuses it).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..errors import TurnStateError
from .notebook_link import REPLY_TIMEOUT, FrontEndError, Origin, link_for

if TYPE_CHECKING:
    from ..client.session import Session


@dataclass(frozen=True)
class CellChange:
    """One change of a turn: a cell `inserted` holding `after`, or `edited` from `before`."""

    action: Literal["inserted", "edited"]
    cell_id: str
    client: str | None  # the front-end connection of the turn's notebook (its link)
    after: str
    before: str = ""


@dataclass(frozen=True)
class CellReverted:
    """What a revert did to one cell: "removed", "restored", "already gone" or "refused"."""

    cell_id: str
    action: str
    reason: str = ""


#: Each session's changes by turn id, in the order they were made (turns and changes).
_CHANGES: weakref.WeakKeyDictionary[Session, dict[str, list[CellChange]]] = (
    weakref.WeakKeyDictionary()
)


#: Turns a session keeps for `%agent revert` (the oldest forgotten). A turn's own changes are
#: bounded by its parts: each is a card, and past the turn's limits nothing is inserted.
MAX_TURNS = 20


def note(session: Session, turn_id: str, change: CellChange) -> None:
    turns = _CHANGES.setdefault(session, {})
    turns.setdefault(turn_id, []).append(change)
    for gone in [t for t, changes in turns.items() if not changes]:
        del turns[gone]  # reverted
    while len(turns) > MAX_TURNS:
        del turns[next(iter(turns))]


def changed(session: Session, turn_id: str) -> bool:
    """Whether `turn_id` has changes of the notebook not reverted yet."""
    return bool(_CHANGES.get(session, {}).get(turn_id))


def last_turn(session: Session, files_turn: str | None) -> str | None:
    """The turn a revert without one undoes: the later of the last turn that changed cells and
    `files_turn` (the last that wrote files), by the session's history; a turn not in it yet
    (the one that just ended) is the latest."""
    turns = [t for t, changes in _CHANGES.get(session, {}).items() if changes]
    cells_turn = turns[-1] if turns else None
    if cells_turn is None or files_turn is None or cells_turn == files_turn:
        return cells_turn or files_turn
    order = {record.turn_id: i for i, record in enumerate(session.history)}
    latest = len(order)
    return max((cells_turn, files_turn), key=lambda t: order.get(t, latest))


async def revert(session: Session, turn_id: str, force: bool) -> list[CellReverted]:
    """Undo `turn_id`'s changes of the notebook, newest first; those refused are kept (a
    later revert tries them again), the others forgotten."""
    if session.running is not None:
        raise TurnStateError("a turn is running: stop it (or let it finish) before reverting")
    changes = _CHANGES.get(session, {}).get(turn_id, [])
    done: list[CellReverted] = []
    for change in reversed(list(changes)):
        outcome = await _revert(change, force)
        if outcome.action != "refused":
            changes.remove(change)
        done.append(outcome)
    return done


async def _revert(change: CellChange, force: bool) -> CellReverted:
    cell = change.cell_id
    link = link_for(Origin(change.client, None))
    if link is None:
        return CellReverted(cell, "refused", "the notebook's front-end is not linked any more")
    try:
        reply = await link.request("get", REPLY_TIMEOUT, cell=cell)
    except FrontEndError:
        if change.action == "inserted":
            return CellReverted(cell, "already gone")
        return CellReverted(cell, "refused", "it is not in the notebook any more")
    raw = reply.get("cell")
    now = raw.get("source") if isinstance(raw, dict) and not raw.get("truncated") else None
    if now != change.after and not force:
        return CellReverted(cell, "refused", f"it was changed since the agent {change.action} it")
    try:
        if change.action == "inserted":
            await link.request("delete", REPLY_TIMEOUT, cell=cell, expected=now, force=force)
            return CellReverted(cell, "removed")
        await link.request("edit", REPLY_TIMEOUT, cell=cell, source=change.before, expected=now)
    except FrontEndError as exc:
        return CellReverted(cell, "refused", str(exc)[:300])
    return CellReverted(cell, "restored")
