"""The one way out of the kernel for what the extension shows: every bundle is masked here.

Displays and display updates (`show`, `update`), the exceptions a magic raises (`guarded`), the
extension's log records (`LogMask`, to the cell's stderr) and the plain-text reprs of its objects
(see `reprs.register`) all pass through `REDACTOR`, so a key cannot reach a cell or a saved
notebook by a path that forgot to mask. Renderers are pure and do not mask; the transcript they
draw is masked before rendering too (`REDACTOR.obj`), because a renderer may split a key (a
highlighted span, a wrapped line) where the mask of the finished bundle would no longer see it.

The redactor and the log filter live in `masking.py` (loading the extension installs the filter
without importing the renderers); `REDACTOR` is re-exported here, where the outputs use it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from IPython.display import DisplayHandle, display

from ..errors import TurnInterrupted
from ..protocol.redact import Redactor
from ..protocol.turn import compact
from ..render import MIME_TRANSCRIPT, RECORD_FORMATS, render_bundle
from ..render.clip import live_tail
from .masking import REDACTOR as REDACTOR

T = TypeVar("T")


class _Masked(dict[str, Any]):
    """A bundle rendered from a masked transcript (see `turn`): masking it again is not needed."""


def mask(bundle: dict[str, Any]) -> dict[str, Any]:
    """The bundle with every string of every MIME type masked."""
    if isinstance(bundle, _Masked):
        return bundle
    masked: dict[str, Any] = REDACTOR.obj(bundle)
    return masked


def turn(
    transcript: dict[str, Any],
    *,
    live: bool = False,
    formats: tuple[str, ...] = RECORD_FORMATS,
    redactor: Redactor = REDACTOR,
    open_parts: frozenset[str] = frozenset(),
    tail: int = 0,
    masked: bool = False,
) -> dict[str, Any]:
    """A turn's bundle: its transcript masked (`live`: holding back a text's end that could be
    the start of a key), then rendered. Every string of the bundle is drawn from that transcript,
    so `show` and `update` do not mask it a second time: a second pass over a large turn's HTML
    cost 8 ms a redraw, three times the rendering. With `tail`, the turn's last parts only are
    drawn, about `tail` characters of them (`clip.live_tail`); a transcript in the bundle stays
    whole, less the top-level text and thoughts its parts hold (`transcript.compact`). With
    `masked`, the transcript was masked by the caller (`live_turn.LiveTurn`, which masks only
    what changed), and is drawn as it is."""
    if not masked:
        transcript = redactor.obj(transcript, live=live)
    drawn = live_tail(transcript, tail) if tail else transcript
    bundle = render_bundle(drawn, live=live, formats=formats, open_parts=open_parts)
    if MIME_TRANSCRIPT in bundle:
        bundle[MIME_TRANSCRIPT] = compact(transcript)
    return _Masked(bundle)


def show(
    bundle: dict[str, Any], *, display_id: bool = False, metadata: dict[str, Any] | None = None
) -> DisplayHandle | None:
    """Display a raw mimebundle, masked (with the output's `metadata`, ours, not masked); with
    `display_id`, return its handle for `update`."""
    if display_id:
        handle: DisplayHandle | None = display(
            mask(bundle), raw=True, display_id=True, metadata=metadata
        )
        return handle
    display(mask(bundle), raw=True, metadata=metadata)
    return None


def update(handle: DisplayHandle, bundle: dict[str, Any]) -> None:
    handle.update(mask(bundle), raw=True)


def text(value: str) -> dict[str, str]:
    """A line of Markdown that is its own plain text."""
    return {"text/markdown": value, "text/plain": value}


async def guarded(work: Awaitable[T]) -> T:
    """Await a magic's work; an exception it raises leaves with its messages masked.

    The kernel's interrupt (a `CancelledError` in the cell's task, or a `KeyboardInterrupt`)
    leaves as `TurnInterrupted`: one line, where IPython would show a traceback through the
    extension's and anyio's frames that says nothing to the user."""
    try:
        return await work
    except BaseException as exc:
        mask_exception(exc)
        interrupt = isinstance(exc, KeyboardInterrupt | asyncio.CancelledError)
        if not interrupt or isinstance(exc, TurnInterrupted):  # the latter says more already
            raise
    # Raised outside the handler: no chained traceback for IPython to walk.
    raise TurnInterrupted("the cell was stopped by the kernel's interrupt")


def mask_exception(exc: BaseException) -> None:
    """Mask the string arguments of `exc` and of the exceptions chained to it, in place: they
    are what IPython shows (`str(exc)`, `_render_traceback_`)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        with contextlib.suppress(AttributeError, TypeError):  # an exception with odd args
            current.args = tuple(
                REDACTOR.text(a) if isinstance(a, str) else a for a in current.args
            )
        current = current.__cause__ or current.__context__
