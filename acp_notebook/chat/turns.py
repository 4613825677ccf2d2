"""The chat's turns: the one that streams (`ChatTurnView`) and those of earlier chats (`PastView`).

A cell's turn view is a display of its own, replaced at the end by the turn's record. In the chat
the view is a child of the log instead: it opens with the user's message, patches its parts in
place while the turn streams (an opened card stays open), and at the end it stays, showing the
turn's final state. Its record (the same bundle a cell keeps, drawn with the cards the reader
opened) goes to the chat's static record (`record.py`).

The conversation a chat had on its session is kept for the next chat on that session:
`%agent chat -s X` run again (the cell re-run, or another cell) makes a new chat on the same
session: it continues the conversation, so it shows it first. Each finished turn of a chat is
kept here, by session, as what its view showed at the end (the final transcript, masked, and the
view's last state) and its record bundle; a new chat draws those turns in its log (`PastView`,
the same front-end as a live turn, with nothing left to click but copy and show-all) and starts
its static record with them, so the notebook keeps the whole conversation too.

Every turn a chat showed, its own or one a cell or another chat started on the session while it was
open (each once, by turn id), is kept for the session's life in this kernel (weakly: a closed and
dropped session goes), the last `KEPT` turns only: each new chat draws and records all it is given,
so an unbounded list would make every chat cell on a long session heavier than the last.
"""

from __future__ import annotations

import asyncio
import dataclasses
import urllib.parse
import urllib.request
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..client.session import Session
from ..client.transcript import final_transcript
from ..display import publish
from ..protocol.state import Part, part_from_json
from ..protocol.suggestions import SuggestionsPart
from ..protocol.turn import Transcript, TurnResult, read_turn
from ..protocol.turnstate import TurnState
from ..widgets.loop import KernelLoop
from ..widgets.turn_diff import TurnDiff
from ..widgets.turn_view import TurnView, TurnWidget


class ChatTurnView(TurnView):
    """A `TurnView` shown in the chat's log (`widget`), not as an output of its own."""

    #: The final transcript (masked, the user's message first), once the turn ended.
    recorded: dict[str, Any] | None = None
    #: Whether the agent's permission requests and questions are asked here. Not in a turn
    #: another cell or chat started: that one shows its own buttons, and taking its handler
    #: away would leave its view with a request nobody there can answer.
    answers: bool = True
    #: Called (on the page's message thread: hand it to the kernel's loop) when the reader takes
    #: back the message of a turn still queued; the chat gives it back to its input box.
    on_take_back: Callable[[], object] | None = None
    #: Called (on the kernel's loop) with a prompt suggestion the reader clicked, as the view
    #: drew it: the chat puts it in its input box.
    on_suggestion: Callable[[str], object] | None = None
    #: The user's message as drawn: (how many keys it was masked with, the part).
    _you_masked: tuple[int, Part] | None = None

    def start(self) -> None:
        if self.answers:
            self.turn.permission_handler = self._ask
            self.turn.elicitation_handler = self.forms.ask
        self.loop = asyncio.get_running_loop()
        self._task = self.loop.create_task(self._render_loop())

    def _transcript(self) -> Transcript:
        if self.final is not None:
            return self.final
        turn = self.live.transcript()
        return dataclasses.replace(turn, parts=(self._you(), *turn.parts))

    def _you(self) -> Part:
        """The user's message, masked: again only when a key joined (the prompt is fixed)."""
        secrets = len(self.redactor.secrets)
        if self._you_masked is None or self._you_masked[0] != secrets:
            you = self.redactor.obj(user_part(self.turn.prompt, self.session.cwd))
            self._you_masked = (secrets, part_from_json(you))
        return self._you_masked[1]

    def _state(self, turn: Transcript) -> str:
        if self.turn.state is TurnState.QUEUED and self.turn.result is None:
            return "queued"  # behind the running turn: the page offers to take it back
        state = super()._state(turn)
        # The user's message is a part from the start: nothing of the agent yet is "waiting".
        return "waiting" if state == "streaming" and len(turn.parts) < 2 else state

    def _head(self, turn: Transcript) -> dict[str, Any]:
        # The chat has one Stop, its own (a view's would make one more per turn, queued ones
        # too): the page draws none in the view.
        # A prompt suggestion goes to the chat's input box, not into a new cell (`suggest`).
        return {**super()._head(turn), "stop": False, "suggest": "input"}

    def _page_said(self, content: dict[str, Any]) -> None:
        if content.get("type") == "take_back":
            # Only while it is queued: started meanwhile, it is the running turn, which the
            # chat's Stop stops; the view shows that.
            if self.turn.state is TurnState.QUEUED and self.on_take_back is not None:
                self.on_take_back()
            self._dirty.set()
            return
        if content.get("type") == "suggest":
            said = content.get("text")
            if type(said) is str and said.strip() in self._suggested():
                if self.on_suggestion is not None:
                    self.on_suggestion(said.strip())
            return
        super()._page_said(content)

    def _suggested(self) -> set[str]:
        """The prompt suggestions the view shows now (masked, as drawn): a click names one."""
        parts = self._transcript().parts
        return {s.strip() for p in parts if isinstance(p, SuggestionsPart) for s in p.suggestions}

    def finish(self, result: TurnResult, *, keep_record: bool = True, raised: bool = False) -> None:
        """Show the final state in place; the view stays in the log (`record()` is its record).
        A chat raises no error below its turns: `raised` is not used."""
        self._done = True
        self._dirty.set()
        self._unsubscribe()
        transcript = final_transcript(result, self.note)
        you = user_part(self.turn.prompt, self.session.cwd)
        transcript["parts"] = [you, *transcript.get("parts", [])]
        transcript = self.redactor.obj(transcript)  # the user's message is masked too
        texts = self.live.texts
        self.live.sync()  # a key that joined since the last redraw: no text is taken as held
        self.final = read_turn(transcript)
        self.recorded = transcript
        self._send(self.diff.update(self.final, texts), self.final, force=True)
        self.live.release()

    def record(self) -> dict[str, Any]:
        """The finished turn's static record (HTML, text, transcript: a cell's), the cards the
        reader opened drawn open."""
        assert self.recorded is not None, "record() is for a finished turn"
        return publish.turn(self.recorded, redactor=self.redactor, open_parts=self.opened)


def user_part(prompt: list[dict[str, Any]], cwd: str | Path) -> dict[str, Any]:
    """The prompt as a user message part (what the renderer draws as "You"): its text blocks
    joined, each attached file as its path in the workspace `cwd`. The agent got the file (its
    URI, its content); the chat shows and saves only which file it was: no path of this machine,
    no copy of the file in the notebook."""
    texts = [
        b["text"] for b in prompt if b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    others = [attached(b, cwd) for b in prompt if b.get("type") != "text"]
    return {
        "type": "message",
        "id": "prompt",
        "role": "user",
        "text": "\n\n".join(texts),
        "blocks": others,
    }


def attached(block: dict[str, Any], cwd: str | Path) -> dict[str, Any]:
    """A file block of the prompt as a resource named by its path relative to `cwd` (drawn
    "📎 path"), with no content; a file outside `cwd` by its name only."""
    inner = block.get("resource")
    source = inner if isinstance(inner, dict) else block
    uri, mime = source.get("uri"), source.get("mimeType")
    shown = block.get("type") if isinstance(block.get("type"), str) else "attachment"
    if isinstance(uri, str) and uri.startswith("file:"):
        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(uri).path))
        base = Path(cwd).resolve()
        shown = path.relative_to(base).as_posix() if path.is_relative_to(base) else path.name
    elif isinstance(uri, str):
        shown = uri  # a web link: nothing of this machine
    resource = {"uri": shown, **({"mimeType": mime} if isinstance(mime, str) else {})}
    return {"type": "resource", "resource": resource}


@dataclass(frozen=True)
class PastTurn:
    """A chat's finished turn: what its view showed at the end, and its record bundle."""

    turn_id: str
    final: Transcript
    head: dict[str, Any]
    record: dict[str, Any]


_PAST: weakref.WeakKeyDictionary[Session, list[PastTurn]] = weakref.WeakKeyDictionary()
#: The earlier turns a new chat on the session shows and records, at most (the latest).
KEPT = 20


def past_turns(session: Session) -> list[PastTurn]:
    """The chats' finished turns on `session`, in the order they ended (a live list: a chat adds
    its turns to it as they end)."""
    return _PAST.setdefault(session, [])


def remember(session: Session, turn: PastTurn) -> None:
    """A chat's turn ended: the next chat on `session` shows it (the oldest beyond `KEPT` go)."""
    turns = past_turns(session)
    if any(t.turn_id == turn.turn_id for t in turns):
        return  # two chats open on the session both saw the turn: it is one turn
    turns.append(turn)
    del turns[:-KEPT]


class PastView:
    """A finished turn of an earlier chat, drawn as its view was when the turn ended."""

    def __init__(self, past: PastTurn) -> None:
        self.past = past
        self.widget = TurnWidget()
        self.kernel = KernelLoop()
        self.widget.on_msg(self._on_page)

    def _on_page(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # Maybe on a subshell's thread (widgets/loop.py): the widget sends from the kernel's loop.
        if isinstance(content, dict) and content.get("type") == "sync":
            self.kernel.call(self._draw)

    def _draw(self) -> None:
        ops = TurnDiff().snapshot(self.past.final)
        self.widget.send({"ops": ops, "head": self.past.head, "elapsed": 0})
