"""How turn results and handles show up when displayed (`Out[n]`, `display(result)`)."""

from __future__ import annotations

from typing import Any

from ..client.turn import TurnHandle
from ..protocol.redact import Redactor
from ..protocol.result import TurnResult
from ..render import render_bundle


def register(ipython: Any, redactor: Redactor) -> None:
    def result_bundle(result: TurnResult, *_: Any, **__: Any) -> dict[str, Any]:
        return render_bundle(redactor.obj(result.to_json()))

    def handle_bundle(turn: TurnHandle, *_: Any, **__: Any) -> dict[str, Any]:
        if turn.result is not None:
            return result_bundle(turn.result)
        return {"text/plain": f"<TurnHandle {turn.id}: running in the background; "
                              "`await h.finished` gives its result>"}

    formatter = ipython.display_formatter.mimebundle_formatter
    formatter.for_type(TurnResult, result_bundle)
    formatter.for_type(TurnHandle, handle_bundle)
