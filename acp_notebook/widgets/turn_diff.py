"""What changed in a turn since the live view last sent it: the turn view's messages, pure.

The kernel sends a turn to its view as operations on parts keyed by id, never as a whole page:

    {"op": "part", "id", "after", "html"[, "md"[, "md_from"]]}   insert or replace one part's
                                              HTML (ours: escaped); "md": an answer's Markdown
                                              source, for its copy button, when the page does
                                              not have it ("md_from": only the rest after the
                                              first md_from characters the page holds)
    {"op": "stream", "id", "after", "role", "text"}   start (or restart) a streaming message
    {"op": "append", "id", "text"}            text appended to that streaming message
    {"op": "md", "id", "keep", "add", "freeze"}   that message's Markdown drawn: the page keeps
                                              the first `keep` characters of the HTML of its
                                              growing end, adds `add`, then fixes the first
                                              `freeze` characters of the result as finished
                                              blocks (never sent again) and draws the rest
    {"op": "settle", "id"[, "summary"][, "md"[, "md_from"]]}   that message stopped growing
                                              and its final HTML is what the page drew of its
                                              Markdown (an `md` operation before it brings the
                                              page there): the page keeps it, as a part
                                              ("summary": a thought's new summary line)
    {"op": "remove", "id"}                    a part that is gone
    {"op": "tail", "html"}                    the alerts and footer below the parts

`after` is the id of the part before it ("" for the first). A message still growing (the last
part of a live turn) is sent as plain text deltas (the page keeps them for its copy button) and
drawn from our Markdown renderer as it grows (`agentmd.MarkdownStream`): its finished blocks
once, its growing last block as what changed of its HTML (the common start kept: a growing
paragraph costs its new words and a closing tag). Once it stops growing, the page keeps what it
drew (`settle`) when that is its final HTML (raw HTML off), which it is when the text it drew is
the final one: a message's HTML crosses the wire once. Else it is sent once as HTML. Every string
here was masked before (the caller hands a masked transcript).

A live view hands the growing message's text apart (`texts`, `display/live_turn.py`'s
`MaskedText`): only its new end is read, never the whole answer; and the parts that changed since
its last update (`changed`): the others are not drawn again. So an update costs what changed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..display.live_turn import STREAMED, MaskedText
from ..protocol.state import MessagePart, Part
from ..protocol.turn import Transcript
from ..render.agentmd import MarkdownStream
from ..render.html import render_part, render_tail

#: Characters of a streamed text's end remembered, to check that the page's text is still the
#: start of the new one (a key completed at its end is masked: the page gets it anew).
_CHECK = 256


# A finished message's HTML around the HTML of its Markdown (render/html.py's `_message`): an
# answer's box, a thought's card with its summary. The page's streamed message holds the same box.
_ANSWER = re.compile(r"<div class=acpnb-answer>(.*)</div>", re.S)
_THOUGHT = re.compile(
    r"<details class=acpnb-thought><summary>(.*?)</summary><div>(.*)</div></details>", re.S
)


@dataclass
class _Drawn:
    """A streaming message's Markdown as the page holds it: its finished blocks' HTML (its
    length and digest: the HTML itself is the page's), then the HTML of its growing end."""

    stream: MarkdownStream = field(default_factory=MarkdownStream)
    held: str = ""
    frozen: int = 0
    digest: Any = field(default_factory=hashlib.sha256)

    def holds(self, html: str) -> bool:
        """Whether `html` starts with the finished blocks the page holds."""
        start = html[: self.frozen]
        return len(start) == self.frozen and hashlib.sha256(start.encode()).digest() == (
            self.digest.digest()
        )


def _streams(part: Part, turn: Transcript, last: bool) -> bool:
    return (
        turn.live
        and last
        and isinstance(part, MessagePart)
        and part.role in STREAMED
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
        # part id -> (generation, length, last _CHECK characters) of a text streamed from a
        # `MaskedText`, which is never held whole here
        self._streamed: dict[str, tuple[int, int, str]] = {}
        self._last = ""  # the id of the last part at the last update (drawn as growing)
        # part id -> the Markdown drawn of its streaming text, as the page holds it
        self._md: dict[str, _Drawn] = {}
        self.bytes = 0  # characters of text and HTML sent, for the benchmark

    def snapshot(
        self, turn: Transcript, texts: Mapping[str, MaskedText] | None = None
    ) -> list[dict[str, Any]]:
        self._sent.clear()
        self._source.clear()
        self._streamed.clear()
        self._md.clear()
        self._tail = None
        return [{"op": "reset"}, *self.update(turn, texts)]

    def update(
        self,
        turn: Transcript,
        texts: Mapping[str, MaskedText] | None = None,
        changed: Collection[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The operations that bring the page to `turn`. With `changed`, a part drawn before
        that is not in it, nor the last part then or now, is taken as drawn already."""
        ops: list[dict[str, Any]] = []
        seen: set[str] = set()
        after = ""
        last = len(turn.parts) - 1
        was_last, self._last = self._last, turn.parts[-1].part_id if turn.parts else ""
        for i, part in enumerate(turn.parts):
            pid = part.part_id
            if pid in seen:  # a malformed transcript: one id, two parts; the first one wins
                continue
            seen.add(pid)
            kept = changed is not None and pid not in changed and pid in self._sent
            if not (kept and i != last and pid != was_last):
                ops += self._part(part, turn, after, last=i == last, texts=texts)
            after = pid
        if len(self._sent) > len(seen):
            for pid in [p for p in self._sent if p not in seen]:
                del self._sent[pid]
                self._source.pop(pid, None)
                self._streamed.pop(pid, None)
                self._md.pop(pid, None)
                ops.append({"op": "remove", "id": pid})
        tail = render_tail(turn, running=False)
        if tail != self._tail:
            self._tail = tail
            ops.append({"op": "tail", "html": tail})
            self.bytes += len(tail)
        return ops

    def _part(
        self,
        part: Part,
        turn: Transcript,
        after: str,
        *,
        last: bool,
        texts: Mapping[str, MaskedText] | None,
    ) -> list[dict[str, Any]]:
        pid = part.part_id
        prev = self._sent.get(pid)
        source = texts.get(pid) if texts is not None else None
        if source is not None and _streams(part, turn, last):
            assert isinstance(part, MessagePart)
            return self._stream(
                part, source, after, streamed=prev is not None and prev[0] == "text"
            )
        held = self._streamed.pop(pid, None)
        if held is not None and (source is None or held[0] != source.generation):
            held = None  # masked anew since: the page's text is no start of this one
        if _streams(part, turn, last):
            assert isinstance(part, MessagePart)
            return self._stream_text(part, after, prev)
        if prev is not None and prev[0] == "text" and pid not in self._source:
            prev = None  # streamed from a `MaskedText`: what the page holds is not kept here
        drawn = self._md.pop(pid, None)
        html = render_part(part, turn, growing=turn.live and last)
        if prev == ("html", html):
            return []
        self._sent[pid] = ("html", html)
        ops = self._settle(pid, drawn, html) if drawn is not None else []
        if ops:
            op = ops[-1]
        else:
            self.bytes += len(html)
            op = {"op": "part", "id": pid, "after": after, "html": html}
            ops = [op]
        if isinstance(part, MessagePart) and part.role == "agent":
            # Its copy button copies the Markdown: sent unless the page holds this very text,
            # and only what it lacks when the page holds its beginning (a growing answer would
            # otherwise be sent whole with every redraw).
            known = self._source.get(pid)
            if known != part.text:
                if known and part.text.startswith(known):
                    op["md"], op["md_from"] = part.text[len(known) :], len(known)
                elif held is not None and part.text[: held[1]].endswith(held[2]):
                    op["md"], op["md_from"] = part.text[held[1] :], held[1]
                else:
                    op["md"] = part.text
                self._source[pid] = part.text
                self.bytes += len(op["md"])
        return ops

    def _settle(self, pid: str, drawn: _Drawn, html: str) -> list[dict[str, Any]]:
        """A message that stopped growing, whose final `html` is its Markdown as the page
        drew it, but for its end: what brings the page's end there, and `settle`. None when
        the page holds other finished blocks (a key masked since, a part of another kind)."""
        thought = _THOUGHT.fullmatch(html)
        answer = None if thought else _ANSWER.fullmatch(html)
        inner = thought.group(2) if thought else answer.group(1) if answer else None
        if inner is None or not drawn.holds(inner):
            return []
        end = inner[drawn.frozen :]
        keep = _common_start(drawn.held, end)
        self.bytes += len(end) - keep
        settle: dict[str, Any] = {"op": "settle", "id": pid}
        if thought:
            settle["summary"] = thought.group(1)
        if end == drawn.held:
            return [settle]
        return [{"op": "md", "id": pid, "keep": keep, "add": end[keep:], "freeze": 0}, settle]

    def _stream_text(
        self, part: MessagePart, after: str, prev: tuple[str, str] | None
    ) -> list[dict[str, Any]]:
        """A growing message read from the part (no `MaskedText`): held whole here."""
        pid, text = part.part_id, part.text
        self._sent[pid] = ("text", text)
        self._source[pid] = text
        if prev is not None and prev[0] == "text" and text.startswith(prev[1]):
            delta = text[len(prev[1]) :]
            self.bytes += len(delta)
            if not delta:
                return []
            op = {"op": "append", "id": pid, "text": delta}
        else:
            self.bytes += len(text)
            self._md.pop(pid, None)
            op = {"op": "stream", "id": pid, "after": after, "role": part.role, "text": text}
        return [op, *self._markdown(pid, lambda done: text[done:])]

    def _stream(
        self, part: MessagePart, source: MaskedText, after: str, *, streamed: bool
    ) -> list[dict[str, Any]]:
        """A growing message read from its `MaskedText`: what the page lacks of it, its end
        checked to still be what the page holds (else the whole text again)."""
        pid = part.part_id
        known = self._streamed.get(pid)
        self._source.pop(pid, None)  # the page's text is known by its length and end
        self._sent[pid] = ("text", "")
        if streamed and known is not None and known[0] == source.generation:
            _, length, end = known
            new = source.since(length - len(end))
            if new.startswith(end):
                delta = new[len(end) :]
                self._streamed[pid] = (source.generation, length + len(delta), new[-_CHECK:])
                self.bytes += len(delta)
                if not delta:
                    return []
                return [
                    {"op": "append", "id": pid, "text": delta},
                    *self._markdown(pid, source.since),
                ]
        text = source.text()
        self._streamed[pid] = (source.generation, len(text), text[-_CHECK:])
        self.bytes += len(text)
        self._md.pop(pid, None)
        return [
            {"op": "stream", "id": pid, "after": after, "role": part.role, "text": text},
            *self._markdown(pid, lambda done: text[done:]),
        ]

    def _markdown(self, pid: str, since: Callable[[int], str]) -> list[dict[str, Any]]:
        """The operation that draws a streaming message's Markdown as it is now: the blocks
        that finished since the last one, once, and what changed of its growing end's HTML.
        `since(n)` reads the message's text from its `n`th character on."""
        drawn = self._md.setdefault(pid, _Drawn())
        blocks, tail = drawn.stream.feed(since(drawn.stream.done))
        frozen = "".join(blocks)
        held, drawn.held = drawn.held, tail
        drawn.frozen += len(frozen)
        drawn.digest.update(frozen.encode())
        html = frozen + tail
        if html == held and not frozen:
            return []
        # A block that finished without changing the HTML (the growing end drew it so) is
        # still fixed on the page: its end is counted from there on.
        keep = _common_start(held, html)
        self.bytes += len(html) - keep
        return [{"op": "md", "id": pid, "keep": keep, "add": html[keep:], "freeze": len(frozen)}]


def _common_start(a: str, b: str) -> int:
    """How many characters `a` and `b` start with in common (slices compared in C, halving)."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while low < high:  # a[:low] == b[:low], a[:high + 1] != b[:high + 1]
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low
