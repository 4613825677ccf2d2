"""How turn results and handles show up when displayed (`Out[n]`, `display(result)`)."""

from __future__ import annotations

from typing import Any

from ..client.turn import TurnHandle
from ..protocol.result import TurnResult
from ..render import render_bundle


def result_bundle(result: TurnResult, *_: Any, **__: Any) -> dict[str, Any]:
    return render_bundle(result.to_json())


def handle_bundle(turn: TurnHandle, *_: Any, **__: Any) -> dict[str, Any]:
    if turn.result is not None:
        return result_bundle(turn.result)
    text = (f"<TurnHandle {turn.id}: running in the background; "
            "`await _.finished` gives its result>")
    return {"text/plain": text}


def register(ipython: Any) -> None:
    formatter = ipython.display_formatter.mimebundle_formatter
    formatter.for_type(TurnResult, result_bundle)
    formatter.for_type(TurnHandle, handle_bundle)
