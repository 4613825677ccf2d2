"""A chat with a session, as a widget: type, send, watch the turn stream, stop it.

`%agent chat` shows one (it is that cell's value). It talks to the same session as the cells
(`--session`), so a conversation can move between cells and the chat. Each turn is drawn with the
same renderer as a cell's record, the user's message first, redrawn at most `max_rate` times a
second. Enter sends, Shift+Enter is a newline (`chat_input.py`); clicks and messages are handled
on the kernel's loop, whatever thread they arrive in (`loop.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from ..client.session import Session
from ..client.transcript import final_transcript, live_transcript
from ..client.turn import TurnHandle
from ..notebook.views import Code, Strong, Value, html_span, money, number, percent, text
from ..protocol.mutations import Mutation, SessionChanged
from ..protocol.redact import Redactor
from ..protocol.state import Usage
from ..render import render_bundle
from .chat_input import ChatInput
from .controls import PermissionPrompts
from .loop import KernelLoop


class ChatWidget:
    def __init__(
        self, session: Session, *, redactor: Redactor | None = None, max_rate: float = 10.0
    ) -> None:
        self.session = session
        self.redactor = redactor or Redactor()
        self.min_interval = 1.0 / max_rate
        self.log = w.VBox(layout=w.Layout(max_height="480px", overflow_y="auto"))
        self.log.add_class("acpnb-chat-log")  # the input's front-end follows it (chat_input.js)
        self.input = ChatInput(layout=w.Layout(width="100%"))
        self.stop_button = w.Button(
            description="Stop",
            icon="stop",
            button_style="danger",
            disabled=True,
            layout=w.Layout(width="90px", flex="none"),
        )
        self.status = w.HTML()
        self.prompts = PermissionPrompts(self.redactor)
        self._row = w.HBox([self.input, self.stop_button], layout=w.Layout(align_items="flex-end"))
        self.box = w.VBox([self.log, self.prompts.box, self._row, self.status])
        self.box.add_class("acpnb-chat")
        self._views: dict[str, w.HTML] = {}
        self._final: set[str] = set()
        self._closed = False
        self._turns: dict[str, TurnHandle] = {}
        self._dirty = asyncio.Event()
        self._unsubscribe = session.subscribe(self._on_mutation)
        # Clicks and messages may arrive in another thread (loop.py): their work runs here.
        self.kernel = KernelLoop()
        self.input.on_submit(lambda text: self.kernel.spawn(lambda: self._send_clicked(text)))
        self.stop_button.on_click(lambda _b: self.kernel.spawn(self.session.stop))
        self.kernel.spawn(self._render_loop)
        self._set_status()

    async def _send_clicked(self, text: str) -> None:
        # A message has no caller to raise to: show what went wrong where the user looks.
        try:
            await self.send(text)
        except Exception as exc:
            self.status.value = html_span(
                Strong("Could not send:"), " ", Value(self.redactor.text(str(exc)))
            )

    async def send(self, text: str | None = None) -> TurnHandle | None:
        """Send the input box's text (or `text`) as a prompt; returns the turn it joined."""
        text = self.input.value if text is None else text
        if not text.strip():
            self.status.value = html_span("Nothing to send.")
            return None
        self.input.value = ""
        turn = await self.session.prompt(text, permission_handler=self.prompts.ask)
        if turn.id not in self._views:
            view = w.HTML()
            self._views[turn.id] = view
            self._turns[turn.id] = turn
            self.log.children = (*self.log.children, view)
        self.stop_button.disabled = False
        self._dirty.set()
        try:
            await turn.finished
        finally:
            self.stop_button.disabled = self.session.running is None
            if not self.closed():
                self._redraw()  # the turn is drawn final when send() returns
        return turn

    def _on_mutation(self, mutation: Mutation) -> None:
        if (
            isinstance(mutation, SessionChanged)
            or getattr(mutation, "turn_id", None) in self._views
        ):
            self._dirty.set()

    async def _render_loop(self) -> None:
        while not self.closed():
            await self._dirty.wait()
            self._dirty.clear()
            if self.closed():  # close() sets it while we waited
                return
            self._redraw()
            await asyncio.sleep(self.min_interval)

    def _redraw(self) -> None:
        record = self.session.turn_record
        for turn_id, view in self._views.items():
            turn = self._turns[turn_id]
            if turn.result is not None:
                if turn_id in self._final:
                    continue
                transcript = final_transcript(turn.result)
                self._final.add(turn_id)
            elif record is not None and record.turn_id == turn_id:
                transcript = live_transcript(self.session, record, turn)
            else:
                transcript = live_transcript(self.session, None, turn)
            live = turn.result is None
            # The user's message opens the turn (a cell shows it in its source, a chat nowhere).
            transcript["parts"] = [_user_part(turn.prompt), *transcript["parts"]]
            bundle = render_bundle(self.redactor.obj(transcript, live=live), live=live)
            # The HTML widget typesets math in its value: an agent's `$` stays text.
            shown = self.redactor.text(bundle["text/html"])
            view.value = f'<div class="mathjax_ignore">{shown}</div>'
        self._set_status()

    def _set_status(self) -> None:
        self.status.value = status_html(
            self.session.id,
            self.session.mode,
            self.session.usage,
            self.session.running is not None,
            self.redactor.text,
        )

    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        self._dirty.set()
        self._unsubscribe()
        self.prompts.close()
        for view in self._views.values():
            view.close()
        for widget in (
            self.log,
            self.input,
            self.stop_button,
            self.status,
            self._row,
            self.box,
        ):
            widget.close()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.box)


def _user_part(prompt: list[dict[str, Any]]) -> dict[str, Any]:
    """The prompt as a user message part (what the renderer draws as "You"): its text blocks
    joined, its other blocks (files, images) shown as blocks."""
    texts = [
        b["text"] for b in prompt if b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    others = [b for b in prompt if b.get("type") != "text"]
    return {
        "type": "message",
        "id": "prompt",
        "role": "user",
        "text": "\n\n".join(texts),
        "blocks": others,
    }


def status_html(
    session_id: Any, mode: Any, usage: Usage | None, running: bool, mask: Callable[[str], str] = str
) -> str:
    """The chat's status line (innerHTML): every value from the agent masked (before it is cut
    short, or a cut key would not be recognised) and escaped, numbers total."""
    parts: list[Any] = ["session ", Code(session_id)]
    if mode:
        parts += [" · mode ", Code(mode)]
    if usage is not None:
        pct = percent(usage.used, usage.size)
        parts += [
            f" · context {number(usage.used)}/{number(usage.size)}" + (f" ({pct})" if pct else "")
        ]
        if usage.cost_amount is not None:
            currency = mask(text(usage.cost_currency, 10_000))
            parts += [" · cost ", Value(money(usage.cost_amount, currency))]
    if running:
        parts += [" · ", Strong("running…")]
    return f"<small>{html_span(*parts, mask=mask)}</small>"
