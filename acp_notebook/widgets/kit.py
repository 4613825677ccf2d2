"""The widget views, as the `%%agent` flow and `%agent chat` ask for them.

The notebook layer never imports this package (tests/unit/test_layers.py): it types what it needs as
`notebook.host.Widgets`, and the magics hand it a `WidgetKit` (`AcpNotebook.widgets`), so a
change here cannot tie the notebook to ipywidgets, nor the widgets to the `%%agent` flow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..chat.widget import ChatWidget
from ..protocol.redact import Redactor
from .turn_view import StartingView, TurnView

if TYPE_CHECKING:
    from ..client.session import Session
    from ..client.turn import TurnHandle


class WidgetKit:
    """`notebook.host.Widgets`, implemented with this package's views."""

    def starting(self) -> StartingView:
        return StartingView(on_stop=lambda: None)  # the cell sets on_stop before awaiting

    def turn_view(
        self,
        session: Session,
        turn: TurnHandle,
        *,
        on_stop: Callable[[], object],
        max_rate: float,
        redactor: Redactor,
        permission_timeout: float,
        start: object | None,  # the notebook's `Starting`: what `starting` made
        next_cell: str = "%%agent",
    ) -> TurnView:
        if start is not None and not isinstance(start, StartingView):
            raise TypeError(f"a TurnView takes over a StartingView, not {type(start).__name__}")
        return TurnView(
            session,
            turn,
            on_stop=on_stop,
            max_rate=max_rate,
            redactor=redactor,
            permission_timeout=permission_timeout,
            start=start,
            next_cell=next_cell,
        )

    def chat(self, session: Session, *, redactor: Redactor) -> Any:
        return ChatWidget(session, redactor=redactor)
