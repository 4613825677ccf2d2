"""A turn streaming into a cell: one display, updated through its display id, coalesced.

Mutations from the session only mark the view dirty; a render task redraws at most `max_rate`
times a second and always once more at the end. So a 20,000-chunk turn costs a few dozen display
messages, not 20,000.

This view is the one for front-ends without widgets (nbclient, papermill, `jupyter execute`,
`acp-notebook run`): each redraw draws a long message's last `LIVE_TAIL` characters only, so
the bytes a turn sends grow with its length, not with its length times its redraws (a 400 KB
answer was re-sent whole, as HTML and as text, ten times: 2.3 MB). The record at the end holds
all of it. And the redraws' bytes are bounded by the turn's (`LIVE_SHARE`): a turn of several
seconds, redrawn 25 times a second, sent 2.4 times its transcript's bytes.
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
from ..protocol.result import TurnRecord, TurnResult
from ..render import LIVE_FORMATS, MIME_TRANSCRIPT
from . import display, publish

#: Characters of each message a redraw draws (its end): a screenful or two, and much more.
LIVE_TAIL = 16_000
#: The live updates of a turn send at most this share of the characters the turn holds so far,
#: plus `LIVE_ALLOWANCE`, plus one redraw: with the record at the end (its HTML, its text and its
#: transcript, 1.5 times the transcript's bytes) a long turn sends under 2 times its transcript.
LIVE_SHARE = 0.25
#: Characters of live updates free of that rule: a few full redraws, or a short answer streamed
#: at the full rate for several seconds (a slow agent's answer, read as it comes).
LIVE_ALLOWANCE = 4 * LIVE_TAIL


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
        self.sent = 0  # characters of the live updates' text formats sent so far
        self._dirty = asyncio.Event()
        self._due = False  # a redraw is due: `_dirty` set by a mutation, not cleared since
        self._done = False
        self._handle: DisplayHandle | None = None
        self._subscription: Callable[[], None] | None = session.subscribe(self._on_mutation)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        pause = 0.0
        if self.show:
            started = time.perf_counter()
            bundle = self._bundle()
            self._handle = publish.show(bundle, display_id=True)
            self.updates += 1
            self.sent += _chars(bundle)
            pause = self._pause(time.perf_counter() - started)
        self._task = asyncio.get_running_loop().create_task(self._render_loop(pause))

    def _pause(self, cost: float) -> float:
        # Redrawing runs on the loop that also reads the agent: a large turn, costly to draw,
        # is redrawn less often, so drawing never takes more than a quarter of it.
        return max(self.min_interval, 3 * cost)

    def _over_budget(self) -> bool:
        """The live updates sent so far are all the turn's size allows (`LIVE_SHARE`): the next
        waits for the turn to grow. O(1): the record's budget counts what it holds."""
        if self.sent <= LIVE_ALLOWANCE:
            return False
        record = self._record()
        if record is None:
            return True
        limits = self.session.client.options.limits
        held = limits.text_chars - record.budget.text + limits.turn_chars - record.budget.chars
        return self.sent > LIVE_SHARE * held + LIVE_ALLOWANCE

    def _on_mutation(self, mutation: Mutation) -> None:
        if self._due:  # a session delivering a mutation to a copy of its subscribers
            return
        if (
            isinstance(mutation, SessionChanged)
            or getattr(mutation, "turn_id", None) == self.turn.id
        ):
            self._due = True
            self._dirty.set()
            # The redraw reads the whole state: until it does, no mutation can tell the view
            # more. Unsubscribed meanwhile, the session builds and delivers nothing per chunk
            # for it (with no other subscriber, not even the `Delta`): 0.4 us a chunk, 8 ms of
            # CPU in a 20,000-chunk turn, an eighth of it (`bench/bench_kernel.py`).
            self._unsubscribe()

    def _unsubscribe(self) -> None:
        if self._subscription is not None:
            self._subscription()
            self._subscription = None

    def _redrawing(self) -> None:
        """A redraw starts: what changes from here on makes the next one due."""
        self._dirty.clear()
        self._due = False
        if self._subscription is None and not self._done:
            self._subscription = self.session.subscribe(self._on_mutation)

    def _record(self) -> TurnRecord | None:
        record = self.session.turn_record
        return record if record is not None and record.turn_id == self.turn.id else None

    def _finished(self) -> bool:
        return self._done

    def _bundle(self) -> dict[str, Any]:
        transcript = live_transcript(self.session, self._record(), self.turn, self.note)
        formats: tuple[str, ...] = LIVE_FORMATS
        # Headless under `acp-notebook run`, which sets this: the runner reads the turn from
        # every update's transcript to print it as it streams (the saved notebook keeps only
        # the final record, which replaces these updates).
        if os.environ.get("ACP_NOTEBOOK_LIVE_TRANSCRIPT") == "1":
            formats = (*LIVE_FORMATS, MIME_TRANSCRIPT)
        # live: a text ending in the start of a key holds that end back until the next redraw.
        return publish.turn(
            transcript, live=True, formats=formats, redactor=self.redactor, tail=LIVE_TAIL
        )

    async def _render_loop(self, pause: float = 0.0) -> None:
        # The first display (`start`'s) is a draw like the others: the first chunks, which
        # come right after it, wait out the same pause, not a message of their own at once.
        if pause:
            await asyncio.sleep(pause)
        while not self._finished():
            await self._dirty.wait()
            if self._finished():  # finish() sets it while we waited
                break
            if self._over_budget():
                # Still due (and unsubscribed: nothing to hear until it is drawn); looked at
                # again a pause later, when the turn may have grown enough.
                await asyncio.sleep(self.min_interval)
                continue
            self._redrawing()
            cost = 0.0
            if self._handle is not None and self.turn.result is None:
                started = time.perf_counter()
                bundle = self._bundle()
                publish.update(self._handle, bundle)
                self.updates += 1
                self.sent += _chars(bundle)
                cost = time.perf_counter() - started
            await asyncio.sleep(self._pause(cost))

    def finish(self, result: TurnResult, *, keep_record: bool) -> None:
        """Final update: the static record, in the live display's place when there is one.

        Without `keep_record` the cell's value will show the record too: the live display
        becomes the record and the value's display adds nothing (`display.shown_in_place`), as
        the widget view does. A display cannot be removed once shown (only the whole cell's
        outputs can be cleared, with the other outputs before it), so emptying it and showing
        the record as the value left an empty output in every saved notebook. Not opening a
        live display when no front-end watches was the other way, but the kernel cannot tell
        nbclient from a front-end without widgets that shows the stream, and `acp-notebook run`
        reads the updates."""
        self._done = True
        self._dirty.set()
        self._unsubscribe()
        if self._handle is None and not keep_record:
            return
        record = publish.turn(final_transcript(result, self.note), redactor=self.redactor)
        if self._handle is None:
            publish.show(record)
            return
        publish.update(self._handle, record)
        self.updates += 1
        if not keep_record:
            display.shown_in_place(result)

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


def _chars(bundle: dict[str, Any]) -> int:
    # The drawn formats; a transcript in the bundle (`acp-notebook run`'s) is not measured.
    return sum(len(v) for v in bundle.values() if isinstance(v, str))
