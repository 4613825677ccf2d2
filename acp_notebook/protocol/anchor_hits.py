"""Where the redactor's anchors occur in a long text, searching a grown text only where it grew.

A live view masks the transcript of a streaming turn at every redraw, and its answer is the text
of the redraw before with more at the end. Finding each anchor (`str.find` over the whole text,
once per anchor) made every redraw cost the length of the answer times the number of anchors:
4 MB took 7 to 15 ms per key in the environment, at up to 25 redraws a second. The positions
found in a text stay right for any text that starts with it: only the end, from the last
`len(anchor) - 1` characters of the old text on, is searched again. The result is the same list
of positions as a search of the whole text (tests/test_redact.py compares them).
"""

from __future__ import annotations

#: Texts remembered with their positions: a transcript grows in a few places at once (the
#: answer, the thoughts, a terminal's output), and each is looked up among these.
SEEN = 4


class AnchorHits:
    """The positions of `anchors` in texts, remembering the last `SEEN` texts searched."""

    def __init__(self, anchors: tuple[str, ...]) -> None:
        self.anchors = anchors
        # (text, sorted positions of every anchor in it); replaced whole, never mutated, so a
        # call from another thread (a log record masked there) sees a consistent list.
        self._seen: list[tuple[str, list[int]]] = []

    def find(self, value: str) -> list[int]:
        """Every position where an anchor starts in `value` (sorted; one per anchor found)."""
        seen = self._seen
        base: tuple[str, list[int]] | None = None
        for entry in seen:
            if len(entry[0]) <= len(value) and value.startswith(entry[0]):
                base = entry
                break
        start, hits = (len(base[0]), list(base[1])) if base is not None else (0, [])
        for anchor in self.anchors:
            # A hit of the old text ends in it; a new one ends past it, so starts at most
            # len(anchor) - 1 characters before its end.
            at = value.find(anchor, max(0, start - len(anchor) + 1))
            while at != -1:
                hits.append(at)
                at = value.find(anchor, at + 1)
        hits.sort()
        self._seen = [(value, hits), *(e for e in seen if e is not base)][:SEEN]
        return hits
