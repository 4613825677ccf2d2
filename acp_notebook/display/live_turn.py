"""A running turn, masked, kept up to date from the fold's mutations: what the live views draw.

A redraw used to convert the whole turn to its JSON (`live_transcript`), mask all of it, read it
back into parts and, in the widget view, compare the answer with what the page held to find the
new text: every redraw cost the turn's length, twice in the widget view. Here the views' one
subscription hands every mutation of the turn to `LiveTurn.take`: a `Delta`'s text is queued for
its message, a `PartUpdated` (or a tool call's input growing) marks its part changed. At a redraw
only that is masked: a message's new text with what may still be a key's start before it
(`MaskedText`, through `Redactor.settle`), a changed part's JSON; the other parts are the masked
copies of the last redraw. So a redraw costs what changed since the last one, not the turn.

What it gives: `transcript()`, the turn as the widget view draws it (`Transcript`, with each
message still growing read through `MaskedText` instead of its text, see `texts`), and
`tail_transcript(n)`, the JSON of the turn's last parts, about `n` characters of them, as the
headless view draws it (`clip.live_tail`). Masking is as for the whole turn (`Redactor.obj` with
`live`): a key split across chunks is masked once it is whole and its start held back until then;
a key that joins the environment meanwhile has every text masked anew.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..client.session import Session
from ..client.turn import TurnHandle
from ..protocol.limits import count
from ..protocol.mutations import Delta, Mutation, PartUpdated
from ..protocol.redact import Redactor
from ..protocol.state import MessagePart, Part, PlanPart, ToolCallPart, part_from_json
from ..protocol.turn import (
    Transcript,
    TurnRecord,
    read_turn,
    rejected_calls_of,
    terminal_cards_of,
    turn_json,
)
from ..render.clip import live_tail

#: Characters of a message's masked end kept apart from the rest, with what was masked since the
#: last read: what a redraw reads of a long message (the headless view's tail, the widget view's
#: new text) comes from there, so a redraw never copies the whole message. Above the longest
#: tail a redraw draws (`LIVE_TAIL`). Unread text beyond `UNREAD` is let go (read from the
#: whole text then, once).
RECENT = 32_768
UNREAD = 1 << 20
#: Characters a turn holds (text and the rest, from its budget's counters) from which its views
#: hear every chunk. Below, a view listens to nothing while a redraw is due (the session then
#: builds no `Delta` for it: 0.5 us a chunk, 10 ms of CPU in a 20,000-chunk turn, a sixth of it)
#: and a redraw reads the parts (at most this much, copied and compared, masked only where they
#: changed: about 0.3 ms) to find what changed. So a redraw costs at most that, whatever the
#: turn's length.
LISTEN_FROM = 512 * 1024
#: The roles whose growing text the widget view streams as text (a user message arrives whole).
STREAMED = frozenset({"agent", "thought"})
_TEXT_CHANNELS = frozenset({"text", "thought", "user"})


class MaskedText:
    """A message's text, masked as it grows: each piece fed is masked once, when nothing
    appended later can change how (`Redactor.settle`); the end that may still be the start of a
    key stays raw, and is shown masked with that start held back (`live`)."""

    def __init__(self, redactor: Redactor, text: str = "") -> None:
        self.redactor = redactor
        #: Bumped when the masked text is rebuilt rather than grown: a reader that held a start
        #: of it must read it whole again.
        self.generation = 0
        self._settled = io.StringIO()
        self._settled_length = 0
        # The settled text's end as masked, piece by piece, from `_kept_from` on: its last
        # RECENT characters at least, and what was masked since the last read (`since`).
        self._kept: deque[str] = deque()
        self._kept_from = 0
        self._read_from = 0
        self._rest = ""  # raw, not settled yet
        self._fresh: list[str] = []  # fed since the last settle
        self._shown = ""  # `_rest` masked, its end held back
        self._stale = False
        #: Characters of raw text fed so far.
        self.fed = 0
        self.feed(text)

    def feed(self, text: str) -> None:
        if text:
            self._fresh.append(text)
            self._stale = True
            self.fed += len(text)

    def rebuild(self, text: str) -> None:
        """Start again from `text` (a key joined the environment, or the part was replaced)."""
        self._settled = io.StringIO()
        self._settled_length = self._kept_from = self._read_from = 0
        self._kept.clear()
        self._rest = self._shown = ""
        self._fresh = []
        self.fed = 0
        self.generation += 1
        self.feed(text)

    def _settle(self) -> None:
        if not self._stale:
            return
        rest = self._rest + "".join(self._fresh)
        self._fresh.clear()
        masked, self._rest = self.redactor.settle(rest)
        if masked:
            self._settled.write(masked)
            self._settled_length += len(masked)
            self._kept.append(masked)
            self._let_go()
        self._shown = self.redactor.text(self._rest, live=True)
        self._stale = False

    def _let_go(self) -> None:
        """Drop the kept pieces no read needs: before the last read and the last RECENT
        characters, or beyond UNREAD characters."""
        keep = min(self._read_from, self._settled_length - RECENT)
        keep = max(keep, self._settled_length - UNREAD)
        kept = self._kept
        while len(kept) > 1 and self._kept_from + len(kept[0]) <= keep:
            self._kept_from += len(kept.popleft())

    @property
    def length(self) -> int:
        self._settle()
        return self._settled_length + len(self._shown)

    def since(self, start: int) -> str:
        """The masked text from `start` on: from the kept pieces when `start` is in them."""
        self._settle()
        self._read_from = start
        self._let_go()
        if start >= self._kept_from:
            return "".join([*self._kept, self._shown])[start - self._kept_from :]
        return self.text()[start:]

    def tail(self, chars: int) -> tuple[int, str]:
        """`(before, end)`: the masked text's last `chars` characters and how many precede them."""
        before = max(0, self.length - chars)
        return before, self.since(before)

    def text(self) -> str:
        """All of it, masked (a copy of the whole text: for a message that stopped growing)."""
        self._settle()
        return self._settled.getvalue() + self._shown


class LiveTurn:
    """The masked state of one running turn (see the module docstring). Not thread-safe: fed
    and read on the session's loop."""

    def __init__(
        self,
        session: Session,
        turn: TurnHandle,
        redactor: Redactor,
        note: str = "",
        on_change: Callable[[Mutation], object] | None = None,
    ) -> None:
        self.session = session
        #: Called with each mutation but the `Delta`s that follow one while `heard` is set: the
        #: view's own subscriber (a redraw is due), spared a call per chunk.
        self.on_change = on_change
        #: Set at a `Delta` of the turn; the view clears it when a redraw starts.
        self.heard = False
        self.turn = turn
        self.turn_id = turn.id
        self.redactor = redactor
        self.note = note
        self._record: TurnRecord | None = None
        self.limits = session.client.options.limits
        #: Whether every mutation of the turn is heard (`LISTEN_FROM`): the view stays
        #: subscribed, and a redraw reads the changes from the mutations, not from the parts.
        self.listening = False
        #: Whether `take` is subscribed now (the view says): listening starts only then.
        self.subscribed = False
        self._raw: dict[str, dict[str, Any]] = {}  # each other part's JSON, as last masked
        self._secrets = -1  # how many keys the texts were masked with
        self._texts: dict[str, MaskedText] = {}
        self._pending: dict[str, list[str]] = {}  # Delta texts not fed yet, by part id
        self._dirty: set[str] = set()  # parts whose masked copy is stale
        self._sources: dict[str, Part] = {}  # the fold's part each copy was made from
        self._json: dict[str, dict[str, Any]] = {}  # masked JSON of the other parts
        self._parts: dict[str, Part] = {}  # their masked parts, read from it
        self._messages: dict[str, tuple[int, int, MessagePart]] = {}  # stopped-growing copies
        self._blocks: dict[str, list[dict[str, Any]]] = {}  # messages' blocks, masked
        self._prompt: tuple[Any, Any] = (None, None)  # (the prompt, masked)
        # What every tool card's drawing depends on besides the card: the terminals' output
        # (a card draws its terminal's) and which calls were refused (their status).
        self._context: tuple[Any, frozenset[str]] = (None, frozenset())
        #: Parts whose drawing may have changed since the last `transcript()` (for TurnDiff).
        self.changed: set[str] = set()

    # -- fed by the view's subscription ---------------------------------------------------------

    def take(self, mutation: Mutation) -> None:
        """Note what `mutation` changed (a mutation of another turn is ignored), then tell
        `on_change`. The view subscribes this: it runs once per streamed chunk, so the `Delta`
        of a chunk is one call, with nothing to tell once a redraw is due."""
        if type(mutation) is Delta:
            if mutation.turn_id != self.turn_id:
                return
            if mutation.channel in _TEXT_CHANNELS:
                pending = self._pending.get(mutation.part_id)
                if pending is None:
                    self._pending[mutation.part_id] = [mutation.text]
                else:
                    pending.append(mutation.text)
            elif mutation.channel == "tool_input":
                self._dirty.add(mutation.part_id)
            if self.heard:
                return
            self.heard = True
        elif type(mutation) is PartUpdated and mutation.turn_id == self.turn_id:
            self._dirty.add(mutation.part.part_id)
        if self.on_change is not None:
            self.on_change(mutation)

    # -- read at a redraw -----------------------------------------------------------------------

    def record(self) -> TurnRecord | None:
        record = self.session.turn_record
        return record if record is not None and record.turn_id == self.turn_id else None

    def sync(self) -> list[Part]:
        """Bring the masked copies up to the fold's parts; the fold's parts, in order."""
        record = self.record()
        if record is not self._record:  # a new attempt, or the first look: start over
            self._record = record
            self._forget()
        self.redactor.refresh()
        secrets = len(self.redactor.secrets)
        if secrets != self._secrets:  # a new key: every text is masked anew
            self._secrets = secrets
            for pid, masked in self._texts.items():
                source = self._sources.get(pid)
                if isinstance(source, MessagePart):
                    masked.rebuild(source.text)
            self._pending.clear()
            self._dirty.update(self._json)
            self._messages.clear()
            self._blocks.clear()
            self.changed.update(self._sources)
        parts = record.parts if record is not None else []
        if not self.listening:
            self._read_changes(parts)
            if self.subscribed and record is not None and self._held(record) >= LISTEN_FROM:
                self.listening = True  # the parts are read: from here on, the mutations
        for part in parts:
            pid = part.part_id
            if self._sources.get(pid) is not part:
                self._sources[pid] = part
                self._dirty.add(pid)
                self._texts.pop(pid, None)
            if isinstance(part, MessagePart):
                self._sync_message(pid, part)
            elif pid in self._dirty:
                self._dirty.discard(pid)
                raw = self._raw[pid] = part.to_json()
                masked = self.redactor.obj(raw, live=True)
                self._json[pid] = masked
                self._parts[pid] = part_from_json(masked)
                self.changed.add(pid)
        return parts

    def _held(self, record: TurnRecord) -> int:
        budget, limits = record.budget, self.limits
        return limits.text_chars - budget.text + limits.turn_chars - budget.chars

    def _read_changes(self, parts: list[Part]) -> None:
        """What changed since the last redraw, read from the parts themselves (the view did
        not hear the mutations): a message's text past what was fed, another part's JSON that
        differs from what was masked. Copies, compares; masks only what changed."""
        for part in parts:
            pid = part.part_id
            if self._sources.get(pid) is not part:
                continue  # new: read whole below
            if isinstance(part, MessagePart):
                self._pending.pop(pid, None)
                masked = self._texts.get(pid)
                text = part.text
                if masked is not None and len(text) != masked.fed:
                    if len(text) > masked.fed:
                        masked.feed(text[masked.fed :])
                    else:
                        masked.rebuild(text)
                    self.changed.add(pid)
                if part.blocks != self._raw.get(pid, {}).get("blocks", []):
                    self._dirty.add(pid)
            else:
                raw = part.to_json()
                if raw != self._raw.get(pid):
                    self._raw[pid] = raw
                    self._dirty.add(pid)

    def _sync_message(self, pid: str, part: MessagePart) -> None:
        text = self._texts.get(pid)
        pending = self._pending.pop(pid, None)
        if text is None:  # its whole text so far: the queued pieces are in it
            self._texts[pid] = MaskedText(self.redactor, part.text)
            self._dirty.discard(pid)
            self.changed.add(pid)
            return
        if pending:
            text.feed("".join(pending))
            self.changed.add(pid)
        if pid in self._dirty:  # its blocks, or its message id
            self._dirty.discard(pid)
            self.changed.add(pid)
            self._messages.pop(pid, None)
            self._blocks.pop(pid, None)

    def _forget(self) -> None:
        for table in (self._texts, self._pending, self._sources, self._json, self._parts):
            table.clear()
        self._raw.clear()
        self.listening = False
        self._messages.clear()
        self._blocks.clear()
        self._dirty.clear()

    def release(self) -> None:
        """Let go of the masked copies (the turn ended: its record is drawn from its result);
        a view kept afterwards (a chat's log) does not keep a second copy of its text."""
        self._record = None
        self._forget()
        self.changed.clear()

    def _masked_blocks(self, pid: str, part: MessagePart) -> list[dict[str, Any]]:
        if not part.blocks:
            return []
        blocks = self._blocks.get(pid)
        if blocks is None:
            self._raw[pid] = {"blocks": [dict(b) for b in part.blocks]}
            blocks = self._blocks[pid] = self.redactor.obj(part.blocks)
        return blocks

    def _message(self, pid: str, part: MessagePart, *, whole: bool) -> MessagePart:
        """A masked copy of a message: with its text when `whole`, else without it (a message
        still growing, which the widget view reads through `texts`)."""
        masked_text = self._texts[pid]
        if not whole:
            return MessagePart(pid, part.role, part.message_id, self._masked_blocks(pid, part))
        key = (masked_text.generation, masked_text.length)
        known = self._messages.get(pid)
        if known is not None and known[:2] == key:
            return known[2]
        copy = MessagePart(pid, part.role, part.message_id, self._masked_blocks(pid, part))
        copy.append(masked_text.text())
        self._messages[pid] = (*key, copy)
        return copy

    @property
    def texts(self) -> dict[str, MaskedText]:
        """The masked text of each message, by part id."""
        return self._texts

    def _top(self, record: TurnRecord | None, *, duration: bool) -> dict[str, Any]:
        """What `live_transcript` says of the turn besides its parts and texts, masked."""
        session = self.session
        usage = session.usage
        prompt = self.turn.prompt
        if self._prompt[0] is not prompt:
            self._prompt = (prompt, self.redactor.obj(prompt))
        views = session.terminal_views
        terminals = (
            [views[t].to_json() for t in record.terminal_ids() if t in views] if record else []
        )
        # The running transcript's keys, written where every transcript's are: its parts,
        # texts, plan and prompt are the caller's (the prompt masked once, kept above).
        top = turn_json(
            turn_id=self.turn_id,
            session_id=session.id,
            agent=session.client.agent_name,
            usage=usage,
            text="",
            thoughts="",
            plan=(),
            prompt=[],
            terminals=terminals,
            parts=[],
            dropped=record.dropped if record is not None else None,
            duration=time.time() - record.started_at if record is not None and duration else None,
            title=session.title,
            note=self.note,
        )
        masked: dict[str, Any] = self.redactor.obj(top, live=True)
        masked["prompt"] = self._prompt[1]
        return masked

    def transcript(self) -> Transcript:
        """The turn as the widget view draws it (without its duration: the page counts it). Its
        last part, when it is a message still growing (an answer or thoughts without blocks),
        holds no text: read it from `texts`."""
        parts = self.sync()
        masked: list[Part] = []
        last = len(parts) - 1
        for i, part in enumerate(parts):
            pid = part.part_id
            if isinstance(part, MessagePart):
                growing = i == last and part.role in STREAMED and not part.blocks
                masked.append(self._message(pid, part, whole=not growing))
            else:
                masked.append(self._parts[pid])
        top = self._top(self.record(), duration=False)  # the page counts the time itself
        base = read_turn(top, live=True)
        plans = [p for p in masked if isinstance(p, PlanPart)]
        turn = dataclasses.replace(
            base,
            parts=tuple(masked),
            plan=tuple(plans[-1].entries) if plans else (),
            terminal_cards=terminal_cards_of(masked),
            rejected_calls=rejected_calls_of(masked),
        )
        context = (top["terminals"], turn.rejected_calls)
        if context != self._context:
            self._context = context
            self.changed.update(p.part_id for p in masked if isinstance(p, ToolCallPart))
        return turn

    def tail_transcript(self, chars: int) -> dict[str, Any]:
        """The turn's last parts, about `chars` characters of them, as the headless view draws
        them (`clip.live_tail`): only they are read, and of a long message only its end."""
        parts = self.sync()
        given: list[dict[str, Any]] = []
        room = chars
        for part in reversed(parts):
            pid = part.part_id
            if isinstance(part, MessagePart):
                before, end = self._texts[pid].tail(max(chars, 0) + 1)
                entry = self._message(pid, part, whole=False).to_json()
                entry["text"] = end
                if before:
                    entry["before"] = before
                size = before + len(end)
            else:
                entry = self._json[pid]
                size = count(entry, room + 1)
            given.append(entry)
            room -= size
            if room < 0:  # this one does not fit whole: `live_tail` cuts it or stops before it
                break
        top = self._top(self.record(), duration=True)
        transcript = {**top, "parts": given[::-1]}
        return live_tail(transcript, chars, earlier=len(parts) - len(given))
