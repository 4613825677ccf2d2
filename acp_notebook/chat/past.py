"""The conversation a chat had on its session, for the next chat on that session.

`%agent chat -s X` run again (the cell re-run, or another cell) makes a new chat on the same
session: it continues the conversation, so it shows it first. Each finished turn of a chat is
kept here, by session, as what its view showed at the end (the final transcript, masked, and the
view's last state) and its record bundle; a new chat draws those turns in its log (`PastView`,
the same front-end as a live turn, with nothing left to click but copy and show-all) and starts
its static record with them, so the notebook keeps the whole conversation too.

Every turn a chat showed, its own or one a cell or another chat started on the session while it
was open (each once, by turn id).
Kept for the session's life in this kernel (weakly: a closed and dropped session goes), the last
`KEPT` turns only: each new chat draws and records all it is given, so an unbounded list would
make every chat cell on a long session heavier than the last.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from ..client.session import Session
from ..protocol.turn import Transcript
from ..widgets.loop import KernelLoop
from ..widgets.turn_diff import TurnDiff
from ..widgets.turn_view import TurnWidget


@dataclass(frozen=True)
class PastTurn:
    """A chat's finished turn: what its view showed at the end, and its record bundle."""

    turn_id: str
    final: Transcript
    head: dict[str, Any]
    record: dict[str, Any]


_PAST: weakref.WeakKeyDictionary[Session, list[PastTurn]] = weakref.WeakKeyDictionary()
#: The earlier turns a new chat on the session shows and records, at most (the latest).
KEPT = 20


def past_turns(session: Session) -> list[PastTurn]:
    """The chats' finished turns on `session`, in the order they ended (a live list: a chat adds
    its turns to it as they end)."""
    return _PAST.setdefault(session, [])


def remember(session: Session, turn: PastTurn) -> None:
    """A chat's turn ended: the next chat on `session` shows it (the oldest beyond `KEPT` go)."""
    turns = past_turns(session)
    if any(t.turn_id == turn.turn_id for t in turns):
        return  # two chats open on the session both saw the turn: it is one turn
    turns.append(turn)
    del turns[:-KEPT]


class PastView:
    """A finished turn of an earlier chat, drawn as its view was when the turn ended."""

    def __init__(self, past: PastTurn) -> None:
        self.past = past
        self.widget = TurnWidget()
        self.kernel = KernelLoop()
        self.widget.on_msg(self._on_page)

    def _on_page(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # Maybe on a subshell's thread (widgets/loop.py): the widget sends from the kernel's loop.
        if isinstance(content, dict) and content.get("type") == "sync":
            self.kernel.call(self._draw)

    def _draw(self) -> None:
        ops = TurnDiff().snapshot(self.past.final)
        self.widget.send({"ops": ops, "head": self.past.head, "elapsed": 0})
