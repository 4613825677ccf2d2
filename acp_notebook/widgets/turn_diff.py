"""What changed in a turn since the live view last sent it: the turn view's messages, pure.

The kernel sends a turn to its view as operations on parts keyed by id, never as a whole page:

    {"op": "part", "id", "after", "html"[, "md"[, "md_from"]]}   insert or replace one part's
                                              HTML (ours: escaped); "md": an answer's Markdown
                                              source, for its copy button, when the page does
                                              not have it ("md_from": only the rest after the
                                              first md_from characters the page holds)
    {"op": "stream", "id", "after", "role", "text"}   start (or restart) a streaming message
    {"op": "append", "id", "text"}            text appended to that streaming message
    {"op": "remove", "id"}                    a part that is gone
    {"op": "tail", "html"}                    the alerts and footer below the parts

`after` is the id of the part before it ("" for the first). A message still growing (the last
part of a live turn) is sent as plain text deltas, shown with `textContent`; once it stops
growing it is sent once as HTML from our Markdown renderer (raw HTML off). Every string here was
masked before (the caller hands a transcript read from a masked dict).
"""

from __future__ import annotations

from typing import Any

from ..protocol.state import MessagePart, Part
from ..protocol.turn import Transcript
from ..render.html import render_part, render_tail

#: The roles whose growing text is streamed as deltas (a user message arrives whole).
_STREAMED = {"agent", "thought"}


def _streams(part: Part, turn: Transcript, last: bool) -> bool:
    return (
        turn.live
        and last
        and isinstance(part, MessagePart)
        and part.role in _STREAMED
        and not part.blocks
    )


class TurnDiff:
    """Remembers what the view was sent; `update(turn)` returns the operations that bring it to
    `turn`, `snapshot(turn)` all of them (a view that (re)connects)."""

    def __init__(self) -> None:
        # part id -> ("text", text streamed) or ("html", html sent)
        self._sent: dict[str, tuple[str, str]] = {}
        self._tail: str | None = None
        # part id -> the answer text the page holds (streamed, or sent as "md")
        self._source: dict[str, str] = {}
        self.bytes = 0  # characters of text and HTML sent, for the benchmark

    def snapshot(self, turn: Transcript) -> list[dict[str, Any]]:
        self._sent.clear()
        self._source.clear()
        self._tail = None
        return [{"op": "reset"}, *self.update(turn)]

    def update(self, turn: Transcript) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        seen: set[str] = set()
        after = ""
        last = len(turn.parts) - 1
        for i, part in enumerate(turn.parts):
            pid = part.part_id
            if pid in seen:  # a malformed transcript: one id, two parts; the first one wins
                continue
            seen.add(pid)
            ops += self._part(part, turn, after, last=i == last)
            after = pid
        for pid in [p for p in self._sent if p not in seen]:
            del self._sent[pid]
            self._source.pop(pid, None)
            ops.append({"op": "remove", "id": pid})
        tail = render_tail(turn, running=False)
        if tail != self._tail:
            self._tail = tail
            ops.append({"op": "tail", "html": tail})
            self.bytes += len(tail)
        return ops

    def _part(
        self, part: Part, turn: Transcript, after: str, *, last: bool
    ) -> list[dict[str, Any]]:
        pid = part.part_id
        prev = self._sent.get(pid)
        if _streams(part, turn, last):
            assert isinstance(part, MessagePart)
            text = part.text
            self._sent[pid] = ("text", text)
            self._source[pid] = text
            if prev is not None and prev[0] == "text" and text.startswith(prev[1]):
                delta = text[len(prev[1]) :]
                self.bytes += len(delta)
                return [{"op": "append", "id": pid, "text": delta}] if delta else []
            self.bytes += len(text)
            return [{"op": "stream", "id": pid, "after": after, "role": part.role, "text": text}]
        html = render_part(part, turn, growing=turn.live and last)
        if prev == ("html", html):
            return []
        self._sent[pid] = ("html", html)
        self.bytes += len(html)
        op: dict[str, Any] = {"op": "part", "id": pid, "after": after, "html": html}
        if isinstance(part, MessagePart) and part.role == "agent":
            # Its copy button copies the Markdown: sent unless the page holds this very text,
            # and only what it lacks when the page holds its beginning (a growing answer would
            # otherwise be sent whole with every redraw).
            known = self._source.get(pid)
            if known != part.text:
                if known and part.text.startswith(known):
                    op["md"], op["md_from"] = part.text[len(known) :], len(known)
                else:
                    op["md"] = part.text
                self._source[pid] = part.text
                self.bytes += len(op["md"])
        return [op]
