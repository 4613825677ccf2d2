"""What a headless live view may send: a share of what its turn holds, counted as it is sent.

Every redraw of `LiveView` re-sends what it draws (HTML and text), and the record at the end
sends the whole turn again: its HTML, its text and its transcript, about 1.5 times the bytes of
the transcript (`TurnResult.to_json()` as JSON). Issue 12 allows 2 times, whatever the pace:
redrawn 25 times a second, a slow answer (a real agent streams a few hundred characters a
second for a minute) sent 300 times its transcript, a one-second answer 2.4 times. So the live
updates of a turn (its first display, its redraws, each with its message's envelope) send at
most `LIVE_SHARE` of what the transcript holds at least so far (`Meter.held`), and a redraw
that does not fit draws less: the turn's last parts (`clip.live_tail`), down to
`LIVE_MIN_TAIL` characters, and none at all until that much fits. So the bound holds by
construction, for a turn of any pace or shape, and a slow answer is still redrawn at a steady
interval instead of ever less often: its newest 500 characters every 8 s at 400 characters a
second, every 3 s at 1,000 (`LIVE_MESSAGE` plus 2.6 characters sent per character drawn, over
`LIVE_SHARE` of twice the text).

O(1) per redraw: what the turn holds comes from its record's budget counters, not from a walk
over its text; what a redraw costs is the length of the strings it sends.
"""

from __future__ import annotations

from typing import Any

from ..protocol.limits import Limits
from ..protocol.result import TurnRecord

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


def chars(bundle: dict[str, Any]) -> int:
    """Characters a bundle sends: its strings (the drawn formats)."""
    return sum(len(v) for v in bundle.values() if isinstance(v, str))


class Meter:
    """The live updates of one turn against its `LIVE_SHARE`."""

    def __init__(self, limits: Limits, *, metered: bool = True) -> None:
        self.limits = limits
        self.metered = metered
        self.sent = 0  # characters of the live updates so far, envelopes included
        self.ratio = FIRST_RATIO  # characters the last redraw sent per character of its tail

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
        of the share is short, 0 for no redraw yet (less than `LIVE_MIN_TAIL` fits)."""
        if not self.metered:
            return LIVE_TAIL
        tail = int((self.left(record) - LIVE_MESSAGE) / self.ratio)
        return min(tail, LIVE_TAIL) if tail >= LIVE_MIN_TAIL else 0

    def shown(self, bundle: dict[str, Any]) -> None:
        """The first display: always sent, counted."""
        self.sent += chars(bundle) + LIVE_MESSAGE

    def spend(self, bundle: dict[str, Any], tail: int, record: TurnRecord | None) -> bool:
        """Count a redraw drawn with `tail` if it fits in what is left; False: it does not, it
        is not to be sent (the next, sized by what this one cost, waits for the turn to grow)."""
        cost = chars(bundle) + LIVE_MESSAGE
        if not self.metered:
            self.sent += cost
            return True
        self.ratio = max(LEAST_RATIO, (cost - LIVE_MESSAGE) / tail)
        if cost > self.left(record):
            return False
        self.sent += cost
        return True
