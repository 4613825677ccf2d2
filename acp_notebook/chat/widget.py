"""A chat with a session, as a widget: type, send, watch each turn stream, stop it.

`%agent chat` shows one (it is that cell's value). It talks to the same session as the cells
(`--session`), so a conversation can move between cells and the chat. Each turn is the per-turn live
view (`turns.py`, a `TurnView` in the log): the user's message first, parts patched in place,
permission buttons in their cards. Enter sends, Shift+Enter is a newline, `/` and `@` complete
commands and workspace files (`input.py`); the mode and config menus (`pickers.py`)
follow the session. Clicks and messages are handled on the kernel's loop, whatever thread they
arrive in (`../widgets/loop.py`). A message sent while a turn runs waits behind it; Stop gives such
a message back to the input box (`stop`), and one whose @files are still being read too. A new chat
on a session that had one (`%agent chat -s X` run again) opens with the conversation so far
(`turns.py`). A turn started elsewhere on the session while the chat is open (a `%%agent -s X` cell,
another chat) is shown and recorded too (`_follow`, on the session's `TurnStarted`), so the chat
holds the session's whole conversation, as Zed's thread.

The chat's output is followed by its static record (`record.py`), which gets each turn as it
ends (`record.py`: by the page when it can, so a turn costs what it adds): the live page hides
it; once the chat is closed or its kernel is gone, it is what the notebook shows, so a saved
notebook reads without a kernel.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import ipywidgets as w
from IPython.display import DisplayHandle

from ..client.session import Session
from ..client.turn import TurnHandle
from ..display import publish
from ..display.views import Code, Strong, Value, html_span, money, number, percent, text
from ..protocol.mutations import Mutation, PartUpdated, SessionChanged, TurnStarted
from ..protocol.redact import Redactor
from ..protocol.state import Usage
from ..protocol.suggestions import SuggestionsPart
from ..protocol.turn import TurnResult
from ..protocol.turnstate import TurnState
from ..widgets.loop import KernelLoop
from ..widgets.turn_view import WIDGET_VIEW
from .input import ChatInput, list_files, resolve_in
from .pickers import ChatPickers
from .record import RecordKeeper
from .turns import ChatTurnView, PastTurn, PastView, past_turns, remember

MAX_COMMANDS = 200
#: The chat's output as text: a live chat is drawn, so this is read only where it cannot be.
UNDRAWN = "(a chat with the agent, drawn only while its kernel runs; the conversation follows)"


class ChatWidget:
    def __init__(
        self, session: Session, *, redactor: Redactor | None = None, max_rate: float = 10.0
    ) -> None:
        self.session = session
        self.redactor = redactor or Redactor()
        self.max_rate = max_rate
        self.log = w.VBox(layout=w.Layout(max_height="480px", overflow="auto"))
        self.log.add_class("acpnb-chat-log")  # the input's front-end follows it (static/input.js)
        self.input = ChatInput(layout=w.Layout(width="100%"))
        self.stop_button = w.Button(
            description="Stop",
            icon="stop",
            button_style="danger",
            disabled=True,
            layout=w.Layout(width="90px", flex="none"),
        )
        self.stop_button.add_class("acpnb-chat-stop")
        self.status = w.HTML()
        # Clicks and messages may arrive in another thread (widgets/loop.py): their work runs here.
        self.kernel = KernelLoop()
        self.pickers = ChatPickers(session, self.kernel, self.report, self.redactor.text)
        self._row = w.HBox([self.input, self.stop_button], layout=w.Layout(align_items="flex-end"))
        #: Prompt suggestions the agent sent after its turn ended (`offer`): above the box.
        self.suggestions = w.HBox(layout=w.Layout(flex_flow="row wrap"))
        self.suggestions.add_class("acpnb-chat-suggestions")
        self.box = w.VBox([self.log, self.pickers.box, self.suggestions, self._row, self.status])
        self.box.add_class("acpnb-chat")
        #: The turns shown, in order, by turn id.
        self.views: dict[str, ChatTurnView] = {}
        #: The finished turns' records, in order (the chat's static record joins them).
        self.records: list[dict[str, Any]] = []
        self.keeper = RecordKeeper(self.input)
        #: The session's conversation in earlier chats (`turns.py`): shown first, recorded.
        self._show_past(list(past_turns(session)))
        #: What the chat sent into each turn that has not started yet (turn id -> messages, each
        #: its text and attached files): Stop gives it back to the input box (`stop`).
        self.unsent: dict[str, list[tuple[str, list[str]]]] = {}
        self._withdrawn: set[str] = set()  # queued turns Stop took back: never shown as sent
        #: The messages whose files are still being read (not in a turn yet): Stop cancels them.
        self._loading: set[anyio.CancelScope] = set()
        self._closed = False
        self._handle: DisplayHandle | None = None
        self._unsubscribe = session.subscribe(self._on_mutation)
        if session.running is not None and self.kernel.loop is not None:
            # A turn started elsewhere (a cell, another chat): shown live from here on.
            self._follow(session.running)
        self.input.on_submit(
            lambda text, files: self.kernel.spawn(lambda: self._send_clicked(text, files))
        )
        self.input.on_files(lambda: self.kernel.spawn(self.list_files))
        self.input.on_keep(lambda have: self.kernel.call(self.keeper.page_keeps, have))
        self.stop_button.on_click(lambda _b: self.kernel.spawn(self.stop))
        self._set_commands()
        self._set_status()

    def report(self, message: str) -> None:
        """Show what went wrong where the user looks (masked, escaped)."""
        self.status.value = html_span(Strong("Error:"), " ", Value(self.redactor.text(message)))

    async def _send_clicked(self, text: str, files: list[str]) -> None:
        # A message has no caller to raise to: show what went wrong where the user looks.
        try:
            await self.send(text, files=files)
        except Exception as exc:
            self.status.value = html_span(
                Strong("Could not send:"), " ", Value(self.redactor.text(str(exc)))
            )
            if not self.input.value:  # the page cleared the box: the message is not lost
                self.input.value = text

    async def send(
        self, text: str | None = None, *, files: Sequence[str] = ()
    ) -> TurnHandle | None:
        """Send the input box's text (or `text`) as a prompt, with the workspace files `files`
        (paths relative to the session's folder) attached; returns the turn it joined (None:
        nothing to send, or Stop came while its files were read: it is back in the box)."""
        text = self.input.value if text is None else text
        if not text.strip():
            self.status.value = html_span("Nothing to send.")
            return None
        self.offer([])  # what was predicted for this prompt is answered by sending one
        attached = [{"type": "file", "url": str(resolve_in(self.session.cwd, f))} for f in files]
        self.input.value = ""
        self.input.send({"event": "follow"})  # the log shows the message, then the answer
        turn = await self._prompt(text, files, attached)
        if turn is None:  # stopped before it joined a turn: back in the box
            return None
        if turn.state is TurnState.QUEUED:  # behind a running turn: Stop may give it back
            self.unsent.setdefault(turn.id, []).append((text, list(files)))
        view = self.views.get(turn.id)
        if view is not None:  # the text joined a turn that is queued: its view is there
            await turn.finished
            return turn
        view = self._open_view(turn)
        self._set_status()
        try:
            result = await turn.finished
        finally:
            self._set_stop()
            self._set_status()
            self.unsent.pop(turn.id, None)
        if turn.id in self._withdrawn:  # never sent: its text is back in the input box
            self._withdrawn.discard(turn.id)
            view.finish(result)
            del self.views[turn.id]
            self.log.children = tuple(c for c in self.log.children if c is not view.widget)
            view.widget.close()
            return turn
        self._keep(view, result)
        return turn

    def _keep(self, view: ChatTurnView, result: TurnResult) -> None:
        # Even in a chat closed meanwhile: the view stops listening, the record gets the turn.
        view.finish(result)
        self.records.append(view.record())
        self.keeper.add(self.records[-1])
        if view.final is not None:  # the next chat on the session shows the turn too
            past = PastTurn(view.turn.id, view.final, dict(view.head), self.records[-1])
            remember(self.session, past)

    def offer(self, prompts: Sequence[str]) -> None:
        """Prompt suggestions as buttons above the box (none: cleared); one clicked fills it."""
        buttons = []
        for prompt in prompts:
            said = self.redactor.text(prompt)
            short = " ".join(said.split())
            button = w.Button(
                description=short if len(short) <= 80 else short[:79] + "…",
                tooltip=said[:1_000],
                layout=w.Layout(width="auto", max_width="100%"),
            )
            button.add_class("acpnb-chat-suggestion")
            button.on_click(lambda _b, said=said: self.kernel.call(self.suggested, said))
            buttons.append(button)
        self.suggestions.children = tuple(buttons)

    def suggested(self, prompt: str) -> None:
        """A prompt suggestion clicked in a turn's view: into the input box, to edit and send."""
        if not self._closed:
            self.input.value = prompt

    def _follow(self, turn: TurnHandle) -> None:
        """Show a turn the chat did not send (a `%%agent -s` cell's, another chat's) as its own
        are, and record it when it ends. Its asker keeps its permission buttons (`answers`);
        Stop here stops it all the same: it is the session's running turn."""
        if self._closed or turn.id in self.views or turn.done:
            return  # one view a turn: the chat's own is made in `send`, before the turn starts
        view = self._open_view(turn, answers=False)
        self.kernel.spawn(lambda: self._followed(view))

    def _open_view(self, turn: TurnHandle, *, answers: bool = True) -> ChatTurnView:
        """A live view of `turn` at the end of the log (its Stop stops it)."""
        view = ChatTurnView(
            self.session,
            turn,
            on_stop=lambda: self.kernel.spawn(lambda: self.stop(turn)),
            max_rate=self.max_rate,
            redactor=self.redactor,
        )
        view.answers = answers
        view.on_take_back = lambda: self.kernel.spawn(lambda: self.take_back(turn))
        view.on_suggestion = self.suggested
        self.views[turn.id] = view
        self.log.children = (*self.log.children, view.widget)
        view.start()
        self.stop_button.disabled = False
        return view

    async def _followed(self, view: ChatTurnView) -> None:
        try:
            result = await view.turn.finished
        finally:
            self._set_stop()
            self._set_status()
        self._keep(view, result)

    async def _prompt(
        self, text: str, files: Sequence[str], attached: list[dict[str, str]]
    ) -> TurnHandle | None:
        # Until prompt() returns, the message is in no turn (its files are being read): Stop
        # cancels this scope, so the message is not sent after the Stop (`stop`), but given back.
        loading = anyio.CancelScope()
        self._loading.add(loading)
        self.stop_button.disabled = False  # with no turn running, Stop takes this one back
        try:
            with loading:
                return await self.session.prompt([text, *attached])
        finally:
            self._loading.discard(loading)
            self._set_stop()
        self._give_back([(text, list(files))])  # reached only when Stop cancelled the scope
        return None

    def _set_stop(self) -> None:
        self.stop_button.disabled = self.session.running is None and not self._loading

    def _show_past(self, turns: list[PastTurn]) -> None:
        self.past_views = [PastView(t) for t in turns]
        self.log.children = tuple(v.widget for v in self.past_views)
        for past in turns:
            self.records.append(past.record)
            self.keeper.add(past.record)

    async def stop(self, turn: TurnHandle | None = None) -> None:
        """Stop (the chat's button, or a turn's own Stop with that `turn`): the running turn is
        cancelled. Messages queued behind it were never sent and are not lost: they go back to
        the input box, after what is typed there, to be edited, sent again or dropped, and their
        turn leaves the log. (Zed's agent panel keeps queued messages editable until they are
        sent; the chat has no queue of its own to show, and a Stop usually means "not this way",
        so it does not send them by itself.) A queued turn's own Stop takes back only it.

        A message whose @files are still being read is in no turn yet: it is stopped too (its
        prompt() cancelled, so it never joins a turn) and comes back once the read ends, as a
        queued one does; else it would be sent after the Stop, as a new turn. (Zed's Stop stops
        everything in flight.)"""
        queued = [v.turn for v in self.views.values() if v.turn.state is TurnState.QUEUED]
        if turn is not None and turn in queued:
            await self._take_back(turn)
            return
        for loading in tuple(self._loading):
            loading.cancel()
        for waiting in queued:
            await self._take_back(waiting)
        await self.session.stop()

    async def take_back(self, turn: TurnHandle) -> None:
        """The queued turn's own "take back": its messages go back to the input box, its view
        leaves the log (as at a Stop); a turn that has started meanwhile is left running."""
        if turn.state is TurnState.QUEUED and turn.id in self.views:
            await self._take_back(turn)

    async def _take_back(self, turn: TurnHandle) -> None:
        sent = self.unsent.pop(turn.id, [])
        self._withdrawn.add(turn.id)
        await turn.cancel()  # a queued turn ends at once: it never reached the agent
        self._give_back(sent)

    def _give_back(self, sent: list[tuple[str, list[str]]]) -> None:
        if not sent:
            return
        typed = self.input.value.rstrip()
        said = "\n\n".join(text for text, _ in sent)
        self.input.value = f"{typed}\n\n{said}" if typed.strip() else said
        files = [f for _, chosen in sent for f in chosen]
        if files:  # the page attaches them again if their @path is still there when sent
            self.input.send({"event": "attach", "files": files})

    async def list_files(self) -> list[str]:
        """The workspace's files for `@` completion (bounded: `input.list_files`)."""
        files = await asyncio.to_thread(list_files, self.session.cwd)
        self.input.files = files
        return files

    def record(self) -> dict[str, Any]:
        """The conversation so far as a static bundle (HTML, Markdown, text, transcripts)."""
        return self.keeper.bundle()

    def _on_mutation(self, mutation: Mutation) -> None:
        if self._closed:
            return
        if isinstance(mutation, TurnStarted):  # the session runs one turn at a time: this one
            running = self.session.running
            if running is not None and running.id == mutation.turn_id:
                self._follow(running)
            self._set_status()
            return
        if isinstance(mutation, PartUpdated) and isinstance(mutation.part, SuggestionsPart):
            # A turn's own are in its view; those sent after it ended (an agent predicts once it
            # has answered) are offered above the box.
            if mutation.turn_id not in self.views:
                self.offer(mutation.part.suggestions)
            return
        if not isinstance(mutation, SessionChanged):
            return
        if mutation.field in ("mode", "config_options"):
            self.pickers.refresh()
        elif mutation.field == "commands":
            self._set_commands()
        self._set_status()

    def _set_commands(self) -> None:
        mask = self.redactor.text
        commands = []
        for c in self.session.commands[:MAX_COMMANDS]:
            given = c.get("input")
            hint: dict[str, Any] = given if isinstance(given, dict) else {}
            name = text(c.get("name"), 80)
            if name:
                about = mask(text(c.get("description"), 200))
                commands.append(
                    {
                        "name": mask(name),
                        "description": about,
                        "hint": mask(text(hint.get("hint"), 80)),
                    }
                )
        self.input.commands = commands

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
        """Close the chat: its output becomes a line, and the static record after it stays."""
        if self._closed:
            return
        self._closed = True
        self._unsubscribe()
        if self._handle is not None:
            publish.update(
                self._handle, {"text/plain": "(the chat is closed; the conversation follows)"}
            )
        self.keeper.update()
        self.pickers.close()
        for past in self.past_views:
            past.widget.close()
        for view in self.views.values():
            view.widget.close()
        for widget in (self.log, self.input, self.stop_button, self.status, self._row, self.box):
            widget.close()

    def _ipython_display_(self) -> None:
        token = f"acpnb-chat-{uuid.uuid4().hex}"
        self.input.token = token
        bundle = {
            # What shows where the widget cannot be drawn and no stylesheet hides the output: an
            # untrusted notebook (JupyterLab draws no widget there, and strips the record's
            # styles), a viewer. The page finds the output by its token, in its metadata.
            "text/plain": UNDRAWN,
            WIDGET_VIEW: {"version_major": 2, "version_minor": 1, "model_id": self.box.model_id},
        }
        self._handle = publish.show(
            bundle, display_id=True, metadata={"acp_notebook": {"chat": token}}
        )
        self.keeper.show()


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
