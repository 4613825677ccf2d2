"""A turn streaming into a cell: one display, updated through its display id, coalesced.

Mutations from the session only mark the view dirty; a render task redraws at most `max_rate`
times a second and always once more at the end. So a 20,000-chunk turn costs a few dozen display
messages, not 20,000.

This view is the one for front-ends without widgets (nbclient, papermill, `jupyter execute`,
`acp-notebook run`): each redraw draws the turn's last `LIVE_TAIL` characters only (its last
parts, a long message's end), so the bytes a turn sends grow with its length, not with its
length times its redraws (a 400 KB answer was re-sent whole, as HTML and as text, ten times:
2.3 MB). The record at the end holds all of it. And the live updates' bytes are a share of the
turn's (`live_meter.py`): a redraw that does not fit draws less, or waits, so a turn of any pace
sends under 2 times its transcript's bytes (a slow answer, redrawn 25 times a second, sent 300
times), but for the few small redraws of a view that could draw nothing for a while (about
log2 of the turn's seconds of them) and the first display: a tiny turn's is over 2 times.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

from IPython.display import DisplayHandle

from ..client.session import Session
from ..client.transcript import final_transcript, live_transcript
from ..client.turn import TurnHandle
from ..protocol.mutations import Mutation, SessionChanged
from ..protocol.redact import Redactor
from ..protocol.turn import TurnRecord, TurnResult
from ..render import LIVE_FORMATS, MIME_TRANSCRIPT
from . import publish, reprs
from .live_meter import LIVE_TAIL, Meter
from .live_turn import LiveTurn

__all__ = ["LIVE_TAIL", "LiveView"]

#: Set by `acp-notebook run`: the live updates carry the turn's transcript (see `_bundle`).
LIVE_TRANSCRIPT_ENV = "ACP_NOTEBOOK_LIVE_TRANSCRIPT"

#: How much of each redraw's cost moves the smoothed one (`LiveView._pause`): a redraw costly
#: once moves the pause by a quarter of its cost, one costly every time sets it in a few redraws.
COST_SMOOTHING = 0.25


class LiveView:
    """Streams one turn into the current cell's output."""

    def __init__(
        self,
        session: Session,
        turn: TurnHandle,
        *,
        max_rate: float = 25.0,
        note: str = "",
        show: bool = True,
        redactor: Redactor | None = None,
        permission_timeout: float = 0,
    ) -> None:
        self.session = session
        self.permission_timeout = permission_timeout
        self.redactor = redactor or publish.REDACTOR
        self.turn = turn
        self.note = note
        self.show = show
        self.min_interval = 1.0 / max_rate
        self.updates = 0  # display messages sent, for the benchmark and tests
        self.runner = os.environ.get(LIVE_TRANSCRIPT_ENV) == "1"
        # Under `acp-notebook run` the updates are not metered: the runner, on this machine,
        # prints the turn from every update's transcript as it streams (run/execute.py), and
        # the saved notebook keeps only the record. A share of the bytes would print a slow
        # answer in bursts a dozen seconds apart; the bound is for the bytes that go to a
        # front-end, which this one reads whole anyway.
        self.meter = Meter(session.client.options.limits, metered=not self.runner)
        self._dirty = asyncio.Event()
        self._due = False  # a redraw is due: `_dirty` set by a mutation, not cleared since
        self._cost: float | None = None  # a redraw's cost, smoothed (`_pause`)
        self._done = False
        self._handle: DisplayHandle | None = None
        #: The turn, masked, kept up to date from the mutations (`live_turn.py`).
        self.live = LiveTurn(session, turn, self.redactor, note, on_change=self._on_mutation)
        self._subscription: Callable[[], None] | None = session.subscribe(self.live.take)
        self.live.subscribed = True
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        pause = 0.0
        if self.show:
            started = time.perf_counter()
            bundle = self._bundle()
            self._handle = publish.show(bundle, display_id=True)
            self.updates += 1
            self.meter.shown(bundle)
            pause = self._pause(time.perf_counter() - started)
        self._task = asyncio.get_running_loop().create_task(self._render_loop(pause))

    def _pause(self, cost: float) -> float:
        # Redrawing runs on the loop that also reads the agent: a large turn, costly to draw,
        # is redrawn less often, so drawing takes about a quarter of it at most. From the cost
        # of the last redraws, not of the last one: a one-off (the first code block's lexer
        # loaded, a garbage collection) stopped the view for three times its length, 130 ms
        # of text held back early in a stream of 1,000 chunks a second.
        if self._cost is None:
            self._cost = cost
        else:
            self._cost += COST_SMOOTHING * (cost - self._cost)
        return max(self.min_interval, 3 * self._cost)

    def _on_mutation(self, mutation: Mutation) -> None:
        """What `live.take` tells (each mutation but the chunks that follow one due)."""
        if self._due:
            return
        if (
            isinstance(mutation, SessionChanged)
            or getattr(mutation, "turn_id", None) == self.turn.id
        ):
            self._mark_due()

    def _mark_due(self) -> None:
        self._due = True
        self._dirty.set()
        # The redraw reads what changed: from the parts (a turn under `LISTEN_FROM`), and then
        # no mutation can tell the view more until it does. Unsubscribed meanwhile, the session
        # builds and delivers nothing per chunk for it (with no other subscriber, not even the
        # `Delta`): 0.5 us a chunk. A longer turn is read from its mutations, every one heard.
        if not self.live.listening:
            self._unsubscribe()

    def _unsubscribe(self) -> None:
        if self._subscription is not None:
            self._subscription()
            self._subscription = None
            self.live.subscribed = False

    def _redrawing(self) -> None:
        """A redraw starts: what changes from here on makes the next one due."""
        self._dirty.clear()
        self._due = False
        self.live.heard = False
        if self._subscription is None and not self._done:
            self._subscription = self.session.subscribe(self.live.take)
            self.live.subscribed = True

    def _record(self) -> TurnRecord | None:
        return self.live.record()

    def _finished(self) -> bool:
        return self._done

    def _bundle(self, tail: int = LIVE_TAIL) -> dict[str, Any]:
        # Headless under `acp-notebook run`, which sets this: the runner reads the turn from
        # every update's transcript to print it as it streams (the saved notebook keeps only
        # the final record, which replaces these updates): the whole turn, masked, each time.
        if self.runner:
            transcript = live_transcript(self.session, self._record(), self.turn, self.note)
            formats = (*LIVE_FORMATS, MIME_TRANSCRIPT)
            return publish.turn(
                transcript, live=True, formats=formats, redactor=self.redactor, tail=tail
            )
        # Its last parts only, masked where they changed since the last redraw; live: a text
        # ending in the start of a key holds that end back until the next redraw.
        drawn = self.live.tail_transcript(tail)
        return publish.turn(drawn, live=True, formats=LIVE_FORMATS, masked=True)

    async def _render_loop(self, pause: float = 0.0) -> None:
        # The first display (`start`'s) is a draw like the others: the first chunks, which
        # come right after it, wait out the same pause, not a message of their own at once.
        if pause:
            await asyncio.sleep(pause)
        while not self._finished():
            await self._dirty.wait()
            if self._finished():  # finish() sets it while we waited
                break
            if self._handle is None or self.turn.result is not None:
                self._redrawing()  # nothing to draw: listening again
                await asyncio.sleep(self.min_interval)
                continue
            started = time.perf_counter()
            self._redraw()
            await asyncio.sleep(self._pause(time.perf_counter() - started))

    def _redraw(self) -> None:
        """Draw the turn, if its share of bytes allows (`live_meter.py`): as much of each long
        message's end as it allows. Else it stays due (and unsubscribed: there is nothing to
        hear until it is drawn), looked at again a pause later, when the turn may have grown
        enough. O(1) when nothing fits: no drawing."""
        record = self._record()
        tail = self.meter.tail(record)
        if not tail:
            return
        self._redrawing()
        bundle = self._bundle(tail)
        if not self.meter.spend(bundle, tail, record):
            # Drawn, but over: not sent, so still due (the next, sized by what this one cost,
            # waits for the turn to grow).
            self._mark_due()
            return
        assert self._handle is not None
        publish.update(self._handle, bundle)
        self.updates += 1

    def finish(self, result: TurnResult, *, keep_record: bool, raised: bool = False) -> None:
        """Final update: the static record, in the live display's place when there is one.
        With `raised`, the cell raises the turn's error right below: the record says that the
        turn failed, not the error again (`Transcript.raised`); its transcript keeps the error.

        Without `keep_record` the cell's value will show the record too: the live display
        becomes the record and the value's display adds nothing (`reprs.shown_in_place`), as
        the widget view does. A display cannot be removed once shown (only the whole cell's
        outputs can be cleared, with the other outputs before it), so emptying it and showing
        the record as the value left an empty output in every saved notebook. Not opening a
        live display when no front-end watches was the other way, but the kernel cannot tell
        nbclient from a front-end without widgets that shows the stream, and `acp-notebook run`
        reads the updates."""
        self._done = True
        self._dirty.set()
        self._unsubscribe()
        self.live.release()
        if self._handle is None and not keep_record:
            return
        transcript = final_transcript(result, self.note)
        if raised:
            transcript["raised"] = True
        record = publish.turn(transcript, redactor=self.redactor)
        if self._handle is None:
            publish.show(record)
            return
        publish.update(self._handle, record)
        self.updates += 1
        if not keep_record:
            reprs.shown_in_place(result)

    async def aclose(self) -> None:
        """Stop the render task. It has nothing left to draw (`finish` drew the end): it is
        cancelled, not awaited out of its pause between redraws, which is up to three times the
        last redraw's cost (a cell ended 0.1 to 0.4 s after its turn on a large answer)."""
        self._done = True
        self._dirty.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
