"""Run a call that must not block (on a FIFO, say) in a thread, bounded: a call still blocked
after a while is released and the test fails, instead of the test (or the kernel) hanging."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest


def raised_within(
    call: Callable[[], object], release: Callable[[], None], seconds: float = 10
) -> BaseException | None:
    """What `call` raised (None: nothing). Still running after `seconds`: `release` it (so its
    thread ends) and fail the test."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        release()
        thread.join(seconds)
        pytest.fail(f"{call} blocked where it must not")
    return raised[0] if raised else None


def open_fifo_ends(fifo: Path) -> Callable[[], None]:
    """A release for a call blocked opening `fifo`: opens each end once, without blocking (an
    open for writing waits for a reader, an open for reading for a writer)."""

    def release() -> None:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        finally:
            os.close(reader)

    return release


class CountedKey:
    """A dict or set key that counts its comparisons (`compared`): a repr that sorts a whole
    collection to show a few of its items compares millions of times."""

    compared = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        return self.n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountedKey) and self.n == other.n

    def __lt__(self, other: CountedKey) -> bool:
        CountedKey.compared += 1
        return self.n < other.n

    def __repr__(self) -> str:
        return f"k{self.n}"
