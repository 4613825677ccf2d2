"""What a headless live view may send: a share of what its turn holds, counted as it is sent.

Every redraw of `LiveView` re-sends what it draws (HTML and text), and the record at the end sends
the whole turn again: its HTML, its text and its transcript, about 1.5 times the bytes of the
transcript (`TurnResult.to_json()` as JSON). Issue 12 allows 2 times, whatever the pace: redrawn 25
times a second, a slow answer (a real agent streams a few hundred characters a second for a minute)
sent 300 times its transcript, a one-second answer 2.4 times. So the live updates of a turn (its
first display, its redraws, each with its message's envelope) send at most `LIVE_SHARE` of what the
transcript holds at least so far (`Meter.held`), and a redraw that does not fit draws less: the
turn's last parts (`clip.live_tail`), down to `LIVE_MIN_TAIL` characters, and none at all until
that much fits. So the bound holds by construction, for a turn of any pace or shape (but for a
stale view's few redraws, below), and a slow answer is still redrawn at a steady interval instead
of ever less often: its newest 500 characters every 8 s at 400 characters a second, every 3 s at
1,000 (`LIVE_MESSAGE` plus 2.6 characters sent per character drawn, over `LIVE_SHARE` of twice the
text).

A view that has had nothing it could draw for `LIVE_STALE` seconds draws its turn's end
anyway (`LIVE_MIN_TAIL`), and waits twice as long before the next such redraw, up to
`LIVE_STALE_MAX`: what an agent said before a long silence (a short "let me look", then a tool
running for a minute) shows within a second or two, not only at the end, and a turn of D
seconds sends at most about log2(D) + D / 60 of these small redraws beyond its share, each of
at most `LIVE_FORCED_MAX` characters (7 in a minute: under 33,000, about 2,000 each for a
message's end; none in a turn that keeps within its share). A last part longer than the tail is
drawn as a stand-in (`clip.live_tail`: a tool's card without its output); one that still draws
longer is not sent (it drew whole: a 200 KB tool card 14 times in ten minutes, 35 times its
transcript).

O(1) per redraw: what the turn holds comes from its record's budget counters, not from a walk
over its text; what a redraw costs is the length of the strings it sends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..protocol.limits import Limits
from ..protocol.turn import TurnRecord

#: Characters of the turn a redraw draws at most (its last parts): a screenful or two.
LIVE_TAIL = 16_000
#: The live updates of a turn send at most this share of `Meter.held` (in characters of their
#: strings, plus `LIVE_MESSAGE` each): at most 0.3 times the transcript, which with the record
#: (1.5 times) leaves room for the cell's other messages under 2 times.
LIVE_SHARE = 0.3
#: The least a redraw draws of a long turn (its end; a message cut there starts at a paragraph
#: break in its first half, so 250 to 500 characters of it): a redraw that cannot draw that
#: much waits. With 1,000, a slow answer (400 characters a second) was redrawn every 12 s.
LIVE_MIN_TAIL = 500
#: Characters of a display update's envelope (header, parent header, display id), about 600 as
#: the bench measures them: counted, so a small redraw is not taken for a free one.
LIVE_MESSAGE = 600
#: Characters sent per character of tail, before a redraw has measured it (HTML and text
#: each draw the tail once, and a little markup), and the least taken from a measure (a redraw
#: whose messages were all shorter than its tail drew less than its tail: its ratio says
#: nothing of the next, longer one).
FIRST_RATIO = 2.5
LEAST_RATIO = 2.0
#: Seconds a view may go without a redraw it could pay for before it draws anyway (see above),
#: doubled after each such redraw, up to `LIVE_STALE_MAX`.
LIVE_STALE = 1.0
LIVE_STALE_MAX = 60.0
#: Characters one of those redraws beyond the share sends at most, its message included: its
#: `LIVE_MIN_TAIL` characters drawn as HTML (each at most a character reference of 4 or 5) and
#: as text, with the card or note around them.
LIVE_FORCED_MAX = LIVE_MESSAGE + 8 * LIVE_MIN_TAIL


def chars(bundle: dict[str, Any]) -> int:
    """Characters a bundle sends: its strings (the drawn formats)."""
    return sum(len(v) for v in bundle.values() if isinstance(v, str))


class Meter:
    """The live updates of one turn against its `LIVE_SHARE`."""

    def __init__(
        self,
        limits: Limits,
        *,
        metered: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.metered = metered
        self.clock = clock
        self.sent = 0  # characters of the live updates so far, envelopes included
        self.ratio = FIRST_RATIO  # characters the last redraw sent per character of its tail
        self.last = clock()  # when the last update was sent
        self.stale = LIVE_STALE  # seconds without one before a redraw is drawn anyway
        self.forced = False  # the redraw `tail` sized is one of those: beyond the share

    def held(self, record: TurnRecord | None) -> int:
        """Characters the turn's transcript holds at least: its message text twice (an answer
        and its thoughts are in their parts and in `text` and `thoughts`; a user echo, rare in
        a turn, only once) and everything else once (measured as JSON)."""
        if record is None:
            return 0
        budget = record.budget
        text = self.limits.text_chars - budget.text
        return 2 * text + self.limits.turn_chars - budget.chars

    def left(self, record: TurnRecord | None) -> float:
        return LIVE_SHARE * self.held(record) - self.sent

    def tail(self, record: TurnRecord | None) -> int:
        """How much of the turn the next redraw may draw: `LIVE_TAIL`, less when what is left
        of the share is short, 0 for no redraw yet (less than `LIVE_MIN_TAIL` fits, and the
        view has not been stale for long enough to draw that much anyway)."""
        self.forced = False
        if not self.metered:
            return LIVE_TAIL
        tail = int((self.left(record) - LIVE_MESSAGE) / self.ratio)
        if tail >= LIVE_MIN_TAIL:
            return min(tail, LIVE_TAIL)
        self.forced = self.clock() - self.last >= self.stale
        return LIVE_MIN_TAIL if self.forced else 0

    def shown(self, bundle: dict[str, Any]) -> None:
        """The first display: always sent, counted."""
        self.sent += chars(bundle) + LIVE_MESSAGE
        self.last = self.clock()

    def spend(self, bundle: dict[str, Any], tail: int, record: TurnRecord | None) -> bool:
        """Count a redraw drawn with `tail` if it fits in what is left (one beyond the share:
        in `LIVE_FORCED_MAX`); False: it does not, it is not to be sent (the next, sized by what
        this one cost, waits for the turn to grow)."""
        cost = chars(bundle) + LIVE_MESSAGE
        if self.metered:
            self.ratio = max(LEAST_RATIO, (cost - LIVE_MESSAGE) / tail)
            if self.forced:
                self.stale = min(2 * self.stale, LIVE_STALE_MAX)
                if cost > LIVE_FORCED_MAX:
                    # What the tail kept draws long (a card whose terminals it cannot see, a
                    # footer a hostile agent made long): not sent, and the next such try waits
                    # as long as after a redraw sent, so each costs at most one drawing.
                    self.last = self.clock()
                    return False
            elif cost > self.left(record):
                return False
        self.sent += cost
        self.last = self.clock()
        return True
