"""The live view of one turn in a widget front-end: one `anywidget` per turn, patched in place.

The kernel sends what changed (`turn_diff`) as custom messages, at once after a quiet spell,
at most `max_rate` a second under a stream (`c.AcpNotebook.view_update_rate`, 60: a chunk waits
8 ms for its message on average); the page (static/turn_view.js) patches only those parts, so
an expanded card stays expanded and the scroll stays put. Stop, the state, the elapsed time
(counted by the page), permission buttons inside their request's card, usage, cost and model
live in the view.

At the end the view shows the final state, then its output is replaced in one display update by
the turn's static record (Markdown, HTML, text, transcript), drawn with the cards the reader
opened still open: the saved notebook reads without a kernel or the extension, and the page does
not jump. The widget is closed then, so nothing of it is saved.

Before the turn exists (an agent can take many seconds to start) a `StartingView` shows the same
widget at once, "starting agent…" with the clock and Stop; the `TurnView` of the turn takes it
over, or, when no turn came of it (Stop, a failure), a line of ours replaces it.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anywidget
import ipywidgets
import traitlets
from IPython.display import DisplayHandle

from ..client.serving.permissions import PermissionRequest
from ..client.session import Session
from ..client.transcript import final_transcript
from ..client.turn import TurnHandle
from ..display import publish, reprs
from ..display.live import LiveView
from ..display.live_turn import MaskedText
from ..display.views import text
from ..protocol.mutations import Mutation, PartUpdated, TurnStarted
from ..protocol.redact import Redactor
from ..protocol.session_facts import session_model
from ..protocol.suggestions import SuggestionsPart
from ..protocol.turn import Transcript, TurnResult, read_turn
from ..render import highlight
from ..render.style import CSS
from .controls import option_label, option_tip
from .elicit_form import PendingForms
from .loop import KernelLoop
from .turn_diff import TurnDiff

STATIC = Path(__file__).parent / "static"
#: The files of the turn view's ES module, in order.
ESM = ("plain_text.js", "notify.js", "turn_view.js")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def compact_js(source: str) -> str:
    """`source` without its comment lines, blank lines and indentation: what the page needs of
    it, a third smaller. Our own files only, which spread no template literal over lines."""
    lines = (line.strip() for line in source.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//"))


# One module: the helpers both pages' modules use (plain_text.js) and the view's notices
# (notify.js) go before the view's own text.
MODULE = compact_js("\n".join((STATIC / f).read_text(encoding="utf-8") for f in ESM))
STYLE = CSS + highlight.CSS + (STATIC / "turn_view.css").read_text(encoding="utf-8")
#: The version of the module and stylesheet: the page keeps one copy of each version.
MODULE_KEY = hashlib.sha256(f"{MODULE}\0{STYLE}".encode()).hexdigest()[:16]

#: Redraws of a finished turn's record for suggestions sent after it (each redraws it whole).
MAX_LATE_REDRAWS = 20


class TurnWidget(anywidget.AnyWidget):
    """The page's side of a `TurnView`; its ES module and stylesheet ship in the package.

    Its `_esm` is a loader of 2.2 KB (static/loader.js), not the view's 43 KB of module and
    stylesheet, which anywidget would send with the state of every widget, a turn each: the
    page asks for them (a "module" message) once a page, and keeps them by `MODULE_KEY`."""

    _esm = compact_js((STATIC / "loader.js").read_text(encoding="utf-8")).replace(
        "__ACPNB_KEY__", MODULE_KEY
    )
    _css = ""  # the loader adds the stylesheet to the page, once
    #: In the view's text/plain: how the page finds its output when the kernel went away.
    token = traitlets.Unicode("").tag(sync=True)
    #: The layout of every turn view (they set none of theirs): a widget's own is a widget too,
    #: 1.7 KB more a turn on the wire, and one more comm the page keeps, never closed.
    _layout: ClassVar[ipywidgets.Layout | None] = None

    def __init__(self, token: str = "") -> None:
        layout = TurnWidget._layout
        if layout is None or layout.comm is None:  # none yet, or closed (`Widget.close_all`)
            layout = TurnWidget._layout = ipywidgets.Layout()
        # The token with the widget's state, not in a message of its own after it.
        super().__init__(token=token, layout=layout)
        self._kernel = KernelLoop()
        self.on_msg(self._asked)

    def _asked(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "module":
            # From the kernel's loop, as every message of the view (widgets/loop.py).
            self._kernel.call(self.send, {"key": MODULE_KEY, "module": MODULE, "css": STYLE})


def _new_token() -> str:
    return f"acpnb-view-{uuid.uuid4().hex}"


def _widget_bundle(widget: TurnWidget) -> dict[str, Any]:
    return {
        "text/plain": f"(the live view of a turn: {widget.token})",
        WIDGET_VIEW: {"version_major": 2, "version_minor": 1, "model_id": widget.model_id},
    }


class StartingView:
    """The view of a turn whose agent and session are still starting: shown at once, it says
    "starting agent…" with the page's clock and Stop, which calls `on_stop` (on the kernel's
    loop) once. A `TurnView(..., start=this)` takes its widget and place over; `end` replaces
    it when no turn came of it."""

    def __init__(self, on_stop: Callable[[], object]) -> None:
        self.on_stop = on_stop
        self.widget = TurnWidget(token=_new_token())
        self.loop = KernelLoop()
        self.started = time.monotonic()
        #: Stop was pressed: the cell must not send its prompt, even if the start just ended.
        self.stopping = False
        self.widget.on_msg(self._on_page)
        self.handle = publish.show(_widget_bundle(self.widget), display_id=True)
        self._send()

    def _on_page(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict):  # maybe on a subshell's thread: see widgets/loop.py
            self.loop.call(self._page_said, content)

    def _page_said(self, content: dict[str, Any]) -> None:
        kind = content.get("type")
        if kind == "stop" and not self.stopping:
            self.stopping = True
            self.on_stop()
        if kind in ("sync", "stop"):
            self._send()

    def _send(self) -> None:
        head = {"state": "stopping" if self.stopping else "starting", "turn": ""}
        self.widget.send({"ops": [], "head": head, "elapsed": time.monotonic() - self.started})

    def hand_over(self) -> None:
        """A `TurnView` draws in this widget from now on."""
        self.widget.on_msg(self._on_page, remove=True)

    def end(self, bundle: dict[str, Any]) -> None:
        """No turn came of it: `bundle` (ours, static) in place of the view, which is closed."""
        self.hand_over()
        if self.handle is not None:
            publish.update(self.handle, bundle)
        self.widget.close()


class TurnView(LiveView):
    """A `LiveView` drawn by a `TurnWidget` instead of redrawn HTML (see the module docstring)."""

    def __init__(
        self,
        session: Session,
        turn: TurnHandle,
        *,
        on_stop: Any,
        max_rate: float = 60.0,
        note: str = "",
        redactor: Redactor | None = None,
        permission_timeout: float = 0,
        start: StartingView | None = None,
        next_cell: str = "%%agent",
    ) -> None:
        super().__init__(
            session,
            turn,
            max_rate=max_rate,
            note=note,
            redactor=redactor,
            permission_timeout=permission_timeout,
        )
        self.on_stop = on_stop
        #: The first line of the cell a prompt suggestion is put in (the page puts it there).
        self.next_cell = next_cell
        self.widget = start.widget if start is not None else TurnWidget(token=_new_token())
        self.diff = TurnDiff()
        self.messages = 0  # custom messages sent to the page, for the benchmark and tests
        self.started = start.started if start is not None else time.monotonic()
        self.state = "waiting"
        self.pending: dict[str, list[dict[str, str]]] = {}
        #: The tool call (its `toolCallId`) each pending request asks about.
        self.asked: dict[str, str] = {}
        self.choices: dict[str, asyncio.Future[str | None]] = {}
        self.head: dict[str, Any] = {}
        self.final: Transcript | None = None
        self.view_handle: DisplayHandle | None = start.handle if start is not None else None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.opened: frozenset[str] = frozenset()
        self._opened_seq = 0
        #: The agent's questions (elicitation/create) waiting for an answer in this view.
        self.forms = PendingForms(self._dirty.set, self.redactor.text)
        self.forms.timeout = permission_timeout
        if start is not None:
            start.hand_over()
        self.widget.on_msg(self._on_page)

    def start(self) -> None:
        self.turn.permission_handler = self._ask
        self.turn.elicitation_handler = self.forms.ask
        if self.view_handle is None:  # else shown since the agent started (StartingView)
            self.view_handle = publish.show(_widget_bundle(self.widget), display_id=True)
        self.loop = asyncio.get_running_loop()
        self._task = self.loop.create_task(self._render_loop())
        self._dirty.set()  # "waiting for the agent" now, not at its first update

    # -- the page -------------------------------------------------------------------------------

    def _on_page(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # The kernel may hand a widget's messages to another thread (a subshell): the turn's
        # futures and events belong to the loop that started the view.
        if isinstance(content, dict) and self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._page_said, content)

    def _page_said(self, content: dict[str, Any]) -> None:
        kind = content.get("type")
        if kind == "sync":  # a view (re)connected: everything, from the start
            turn = self._transcript()
            self._send(self.diff.snapshot(turn, self._texts()), turn, force=True)
        elif kind == "stop" and self.turn.result is None and not self.turn.cancel_requested:
            self.on_stop()
            self._dirty.set()
        elif kind == "opened" and isinstance(content.get("ids"), list):
            # Which parts' cards the reader opened: the record keeps them open. The page numbers
            # these lists; messages on different subshells can arrive out of order.
            seq = content.get("seq")
            seq = seq if type(seq) is int else 0
            if seq >= self._opened_seq:
                self._opened_seq = seq
                self.opened = frozenset(str(i) for i in content["ids"][:10_000])
        elif kind == "answer":
            self.forms.answered(content)
        elif kind == "choose":
            future = self.choices.get(str(content.get("id")))
            option = str(content.get("option"))
            allowed = {o["id"] for o in self.pending.get(str(content.get("id")), [])}
            if future is not None and not future.done() and option in allowed:
                future.set_result(option)

    async def _ask(self, request: PermissionRequest) -> str | None:
        pid = request.part.part_id
        mask = self.redactor.text
        self.pending[pid] = [
            {
                "id": text(o.get("optionId"), 200),
                "label": option_label(o, mask),
                "kind": text(o.get("kind"), 40),
                "tip": option_tip(o.get("kind")),
            }
            for o in request.options
        ]
        self.asked[pid] = request.part.tool_call_id
        self.choices[pid] = asyncio.get_running_loop().create_future()
        self._dirty.set()
        try:
            # A page that connected once may be gone: nobody would click (see LiveView._ask).
            with anyio.move_on_after(self.permission_timeout or math.inf):
                return await self.choices[pid]
            raise TimeoutError(f"no answer within {self.permission_timeout:g} s")
        finally:
            self.pending.pop(pid, None)
            self.asked.pop(pid, None)
            self.choices.pop(pid, None)
            self._dirty.set()

    # -- the kernel's side ----------------------------------------------------------------------

    def _transcript(self) -> Transcript:
        """The turn as drawn now: masked where it changed since the last redraw (`live`)."""
        if self.final is not None:
            return self.final
        return self.live.transcript()

    def _texts(self) -> dict[str, MaskedText] | None:
        """Where a growing message's text is read (None once the turn's record is drawn)."""
        return self.live.texts if self.final is None else None

    def _changed(self) -> set[str]:
        """The parts whose drawing may have changed since the last redraw."""
        changed = set(self.live.changed)
        self.live.changed.clear()
        return changed

    def _state(self, turn: Transcript) -> str:
        result = self.turn.result
        if result is not None:
            if result.cancelled:
                return "cancelled"
            return "done" if result.success else "failed"
        if self.pending or self.forms:
            return "asking"
        if self.turn.cancel_requested:
            return "stopping"
        return "streaming" if turn.parts else "waiting"

    def _head(self, turn: Transcript) -> dict[str, Any]:
        return {
            "state": self._state(turn),
            "model": self.redactor.text(session_model(self.session.config_options) or ""),
            "pending": self._pending(turn),
            "forms": self.forms.for_page(),
            "duration": turn.duration if self.final is not None else None,
            "turn": self.turn.id,  # the record that replaces the view carries it (copy buttons)
            "next": self.next_cell,
        }

    def _pending(self, turn: Transcript) -> list[dict[str, Any]]:
        """The requests waiting for a click: their options, and the card of the tool call each
        asks about (`call`, a part id, or ""), which the page opens whole meanwhile."""
        cards = {c.tool_call_id: c.part_id for c in turn.tool_calls}
        return [
            {"id": k, "options": v, "call": cards.get(self.asked.get(k, ""), "")}
            for k, v in self.pending.items()
        ]

    def _send(self, ops: list[dict[str, Any]], turn: Transcript, *, force: bool = False) -> None:
        head = self._head(turn)
        if head != self.head or force:
            # The head (and the clock with it) only when it changed: a message a chunk or two
            # long is a few hundred bytes, the head near 200 of them.
            self.head = head
            message = {"ops": ops, "head": head, "elapsed": time.monotonic() - self.started}
        elif ops:
            message = {"ops": ops}
        else:
            return
        self.widget.send(message)
        self.messages += 1

    async def _render_loop(self, pause: float = 0.0) -> None:
        # `start` draws nothing here (the widget's first state comes from the loop): no pause.
        while not self._finished():
            await self._dirty.wait()
            if self._finished():
                break
            self._redrawing()
            # The redraw's CPU time, not its wall time: on a loaded machine a redraw preempted
            # for 80 ms paused the view 240 ms (three times its cost), text waiting meanwhile.
            started = time.thread_time()
            turn = self._transcript()
            self._send(self.diff.update(turn, self._texts(), self._changed()), turn)
            await asyncio.sleep(self._pause(time.thread_time() - started))  # as LiveView's

    def finish(self, result: TurnResult, *, keep_record: bool, raised: bool = False) -> None:
        """The final state in place, then the static record in place of the view (one display
        update); without `keep_record` the cell's value shows no second copy of it; with
        `raised`, the record does not repeat the error the cell raises below (`LiveView`)."""
        self._done = True
        self._dirty.set()
        self._unsubscribe()
        transcript = self.redactor.obj(final_transcript(result, self.note))
        if raised:
            transcript["raised"] = True
        # The page's clock ran from the cell's start (`started`: the agent starting, the session
        # opening); the turn's duration from its prompt. The record says the difference.
        transcript["startup"] = round(
            max(0.0, time.monotonic() - self.started - result.duration), 3
        )
        texts = self.live.texts
        self.live.sync()  # a key that joined since the last redraw: no text is taken as held
        self.final = read_turn(transcript)
        self._send(self.diff.update(self.final, texts), self.final, force=True)
        self.live.release()
        bundle = publish.turn(transcript, redactor=self.redactor, open_parts=self.opened)
        if self.view_handle is not None:
            publish.update(self.view_handle, bundle)
            self._await_suggestions(transcript)
        if not keep_record:
            reprs.shown_in_place(result)
        self.widget.close()

    def _await_suggestions(self, transcript: dict[str, Any]) -> None:
        """An agent may predict the next prompt once it has answered: prompt suggestions that
        come after the turn, before the session's next turn starts, join this record (drawn
        again in its place, the page puts a clicked one into a new cell as during the turn)."""
        handle = self.view_handle
        drawn: list[Any] = []  # the lists drawn: the same one is not drawn again

        def heard(mutation: Mutation) -> None:
            if isinstance(mutation, TurnStarted):
                stop()
            elif (
                isinstance(mutation, PartUpdated)
                and isinstance(mutation.part, SuggestionsPart)
                and mutation.turn_id != self.turn.id
                and handle is not None
            ):
                late = self.redactor.obj(mutation.part.to_json())
                if drawn and late.get("suggestions") == drawn[-1]:
                    return
                drawn.append(late.get("suggestions"))
                if len(drawn) > MAX_LATE_REDRAWS:  # an agent that never stops: the record stays
                    stop()
                    return
                kept = [p for p in transcript.get("parts", []) if p.get("type") != "suggestions"]
                transcript["parts"] = [*kept, late]
                bundle = publish.turn(transcript, redactor=self.redactor, open_parts=self.opened)
                publish.update(handle, bundle)

        stop = self.session.subscribe(heard)
