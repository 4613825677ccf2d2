"""Permission choices as ipywidgets buttons (the chat's), and the words on every permission
button (`option_label`, the live turn view's too).

The record of a turn is a plain display (Markdown, HTML, text, JSON), so a saved or converted
notebook keeps it; these buttons are closed when the turn ends and leave nothing behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from ..client.permissions import PermissionRequest
from ..notebook.views import Strong, Value, html_span, text
from ..protocol.redact import Redactor

_STYLE = {
    "allow_once": "success",
    "allow_always": "info",
    "reject_once": "warning",
    "reject_always": "danger",
}


class PermissionPrompts:
    """One row of buttons per pending permission request; `ask()` waits for a click."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        self.box = w.VBox()
        # The title and the options' names come from the agent: a widget is saved with the
        # notebook (its state) and read by the page, so they are masked like any output.
        self.redactor = redactor or Redactor()

    async def ask(self, request: PermissionRequest) -> str | None:
        loop = asyncio.get_running_loop()  # where a click's choice is delivered (see loop.py)
        chosen: asyncio.Future[str | None] = loop.create_future()
        mask = self.redactor.text
        title = mask(text(request.part.title or request.part.tool_call_id, 10_000))
        buttons = []
        for option in request.options:
            kind = option.get("kind")
            button = w.Button(
                description=option_label(option, mask),
                button_style=_STYLE.get(kind, "") if isinstance(kind, str) else "",
                tooltip=text(kind, 40),
            )
            button.add_class("acpnb-permission-option")
            button.on_click(_chooser(loop, chosen, str(option.get("optionId"))))
            buttons.append(button)
        label = w.HTML(
            value=html_span(
                Strong("Permission requested"),
                " (",
                Value(mask(request.tool_kind)),
                "): ",
                Value(title),
            )
        )
        row = w.VBox([label, w.HBox(buttons)])
        row.add_class("acpnb-permission")
        self.box.children = (*self.box.children, row)
        try:
            return await chosen
        finally:
            self.box.children = tuple(c for c in self.box.children if c is not row)
            for widget in (*buttons, label, row):
                widget.close()

    def close(self) -> None:
        for child in self.box.children:
            child.close()
        self.box.close()


# What each kind of option does, in our words: the agent names the options, and a name may lie
# ("Reject" on an option that always allows).
_KIND_WORDS = {
    "allow_once": "Allow once",
    "allow_always": "Always allow",
    "reject_once": "Reject",
    "reject_always": "Always reject",
}


def option_label(option: dict[str, Any], mask: Callable[[str], str] = str) -> str:
    """A permission button's text (plain text: ipywidgets shows a Button's description as text).
    Our word for the option's kind, then the agent's name for it when that says something else."""
    kind = option.get("kind")
    words = _KIND_WORDS.get(kind, "") if isinstance(kind, str) else ""
    # Masked before it is cut to 60 characters: a cut key would no longer be recognised.
    name = text(mask(text(option.get("name") or option.get("optionId"), 10_000)), 60)
    if not words:
        return f"{name} (unknown kind)" if name else "(unnamed option)"
    if set(name.casefold().split()) <= set(words.casefold().split()):
        return words  # the agent's name says no more than ours ("Allow" for allow_once)
    return f"{words}: {name}"


def _chooser(
    loop: asyncio.AbstractEventLoop, chosen: asyncio.Future[str | None], option_id: str
) -> Callable[[Any], None]:
    def choose() -> None:
        if not chosen.done():
            chosen.set_result(option_id)

    def click(_button: Any) -> None:
        loop.call_soon_threadsafe(choose)  # a future is set on its loop: a click may run elsewhere

    return click
