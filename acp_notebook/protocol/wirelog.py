"""The protocol log: the last JSON-RPC messages each way, kept as the wire carried them. Pure.

The connection records every line it reads and every message it writes; this costs one tuple
per read, so it is always on. What is kept is bounded: the last `size` reads each way, at most
`budget` characters in all, each message cut to `clip` (its length before the cut is kept).
Reading it (`entries`, `summary`) parses and clips on demand, never on the hot path. A `sink`
(e.g. a JSON-lines file, `client/wirefile.py`) sees every entry as it is recorded.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Direction = Literal["in", "out"]

_Batch = tuple[int, float, Sequence[str | bytes], list[int] | None, int]

DEFAULT_SIZE = 64  # reads (or sends) kept each way: at least that many messages
DEFAULT_CLIP = 16 * 1024  # characters kept of one message
DEFAULT_BUDGET = 128 * 1024  # characters kept each way, in all


@dataclass(frozen=True, slots=True)
class WireEntry:
    """One JSON-RPC message: `in` from the agent, `out` to it."""

    seq: int  # the order of its read or send, both ways counted together
    at: float  # time.time() when recorded
    direction: Direction
    text: str  # the line as carried, cut at the log's clip
    size: int  # its length before the cut

    @property
    def clipped(self) -> bool:
        return self.size > len(self.text)

    def message(self) -> Any:
        """The message parsed; a line that is not JSON (or was clipped) stays a string."""
        try:
            return json.loads(self.text)
        except (ValueError, RecursionError):
            return self.text

    def summary(self) -> str:
        """`→ #3 session/prompt`, `← #3 result`, `← session/update agent_message_chunk`."""
        arrow = "→" if self.direction == "out" else "←"
        msg = self.message()
        if not isinstance(msg, dict):
            return f"{arrow} (not JSON-RPC, {self.size} chars)"
        rid = msg.get("id")
        head = f"{arrow} #{_short(rid)} " if rid is not None else f"{arrow} "
        method = msg.get("method")
        if isinstance(method, str):
            params = msg.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            kind = update.get("sessionUpdate") if isinstance(update, dict) else None
            return head + _short(method) + (f" {_short(kind)}" if isinstance(kind, str) else "")
        return head + ("error" if "error" in msg else "result")


def _short(value: Any, n: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= n else text[: n - 1] + "…"


class WireLog:
    """The last messages each way: at most `size` reads (or sends) and `budget` characters each
    way; `sink` (if set) sees every entry.

    The reader records each read's lines as one batch (one tuple per read, not per message:
    recording stays a small fraction of the reader's time, `bench/bench_stream.py`) and the
    writer each message it sends. A line longer than `clip` is cut to it before it is kept;
    past the budget, the oldest batches go (the newest is always kept). Entries are built only
    when read.
    """

    def __init__(
        self,
        size: int = DEFAULT_SIZE,
        clip: int = DEFAULT_CLIP,
        sink: Callable[[WireEntry], None] | None = None,
        budget: int = DEFAULT_BUDGET,
    ) -> None:
        self.size = size
        self.clip = clip
        self.budget = budget
        self.sink = sink
        # One count across both ways orders the entries (two clock readings may be equal).
        self._order = itertools.count()
        self._kept: dict[Direction, deque[_Batch]] = {"in": deque(), "out": deque()}
        # Characters kept each way, shared by every recorder of that way (a client records
        # through a new connection after each agent restart, into the same log).
        self._held: dict[Direction, list[int]] = {"in": [0], "out": [0]}

    def recorder(self, direction: Direction) -> Callable[[Sequence[str | bytes]], None]:
        """A function recording one read's (or one send's) lines, bound once by its caller."""
        kept, clip, now, order = self._kept[direction], self.clip, time.time, self._order
        size, budget, held = self.size, self.budget, self._held[direction]

        def record(lines: Sequence[str | bytes]) -> None:
            sizes = None
            chars = sum(map(len, lines))
            if chars > clip and max(map(len, lines)) > clip:  # rare: a long line is cut
                sizes = [len(line) for line in lines]
                lines = [line[:clip] for line in lines]
                chars = sum(map(len, lines))
            batch = (next(order), now(), lines, sizes, chars)
            kept.append(batch)
            held[0] += chars
            while len(kept) > 1 and (held[0] > budget or len(kept) > size):
                held[0] -= kept.popleft()[4]
            if self.sink is not None:
                for entry in self._expand(direction, batch):
                    self.sink(entry)

        return record

    def record(self, direction: Direction, line: str | bytes) -> None:
        self.recorder(direction)([line])

    @staticmethod
    def _expand(direction: Direction, batch: _Batch) -> list[WireEntry]:
        order, at, lines, sizes, _ = batch
        out = []
        for i, line in enumerate(lines):
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
            text = text.rstrip("\n")
            size = sizes[i] if sizes is not None else len(text)
            if text.strip():
                out.append(WireEntry(order, at, direction, text, size))
        return out

    def entries(self, n: int | None = None, direction: Direction | None = None) -> list[WireEntry]:
        """The last `n` messages each way (or of one `direction`), in the order carried."""
        ways: tuple[Direction, ...] = (direction,) if direction else ("in", "out")
        picked: list[WireEntry] = []
        for way in ways:
            mine: list[WireEntry] = []
            for batch in reversed(self._kept[way]):
                mine[:0] = self._expand(way, batch)
                if n is not None and len(mine) >= n:
                    break
            picked += mine[-n:] if n else mine
        # Within a batch, entries keep their list order (sort is stable).
        picked.sort(key=lambda e: e.seq)
        return picked


def traceparent() -> str:
    """A W3C trace-context `traceparent` for a request: new trace and span ids, sampled."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def with_trace(params: Any, parent: str) -> Any:
    """`params` with `_meta.traceparent` set (a copy; an agent's own `_meta` keys are kept)."""
    if not isinstance(params, dict):
        return params
    meta = params.get("_meta")
    return {**params, "_meta": {**(meta if isinstance(meta, dict) else {}), "traceparent": parent}}
