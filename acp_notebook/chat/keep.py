"""Where the chat's static record is kept up to date: in the page when it can, else by the kernel.

The record (`record.py`) is an output of its own after the chat's. The kernel can only
replace an output whole (`update_display_data`), so updating it after each turn would send the
whole conversation again every turn: a long chat would cost the square of its length. A page that
holds the notebook (JupyterLab, Notebook 7: static/input.js, `keepRecord`) says it keeps the record
(`keep`, with how many turns its copy holds); from then on the kernel sends it each turn's piece
once, as a message to the chat's input widget, and the page adds it to the output it will save.
Without such a page (nbclient, papermill, `await chat.send(...)` in a script, a front-end
without a notebook model) the kernel updates the output whole, as before.
"""

from __future__ import annotations

from typing import Any

from IPython.display import DisplayHandle

from ..display import publish
from .input import ChatInput
from .record import html_start, join, piece


class RecordKeeper:
    """The chat's record: `show()` displays it, `add(turn)` adds a finished turn's record."""

    def __init__(self, page: ChatInput) -> None:
        self.page = page
        self.pieces: list[dict[str, Any]] = []
        self.handle: DisplayHandle | None = None
        #: A page said it keeps the record: the kernel sends it pieces, not the whole record.
        self.kept = False
        self.sent = 0  # characters sent for the record after it was shown, for the tests

    def bundle(self) -> dict[str, Any]:
        return join(self.pieces)

    def show(self) -> None:
        self.handle = publish.show(self.bundle(), display_id=True)

    def add(self, turn: dict[str, Any]) -> None:
        self.pieces.append(piece(turn))
        if self.kept:
            self._send(len(self.pieces) - 1)
        else:
            self.update()

    def update(self) -> None:
        """The whole record in its output (once at the end, or where no page keeps it)."""
        if self.handle is not None:
            bundle = self.bundle()
            self.sent += sum(len(str(v)) for v in bundle.values())
            publish.update(self.handle, bundle)

    def page_keeps(self, have: Any) -> None:
        """A page keeps the record and holds its first `have` turns: it gets the rest."""
        self.kept = True
        have = have if type(have) is int and 0 <= have <= len(self.pieces) else 0
        if have < len(self.pieces):
            self._send(have)

    def _send(self, first: int) -> None:
        message: dict[str, Any] = {"event": "record", "from": first, "pieces": self.pieces[first:]}
        if first == 0:
            message["start"] = html_start()
        self.sent += sum(len(str(v)) for p in message["pieces"] for v in p.values())
        self.page.send(message)
