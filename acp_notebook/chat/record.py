"""The chat's static record: its finished turns' records in one output, one stylesheet for all.

Each turn's record is the bundle a cell keeps (`publish.turn`: HTML, text, transcript) of a
transcript that opens with the user's message. The chat's record joins them, so a notebook
reopened without a kernel, nbconvert or a viewer shows the conversation. As a cell's record, it
holds no Markdown copy (no front-end shows it beside the HTML: it was a third copy of the text,
a fifth of the file) and the record's stylesheet once (`RECORD_STYLE`, each turn's copy taken
out), with the rule that hides a dead chat's widget output. The text
view, which draws only the agent's side of a turn, gets the user's message before each turn; the
transcripts are kept as a list under the chat's own MIME type (a cell's turn type holds one turn,
and tools that replay cells read it), each a line of compact JSON without what a reader has no
need of or rebuilds (`saved_turn`; `chat_turns` reads them back, and the older form too).

A turn adds one `piece` to the record, and the record is its pieces joined (`join`) by plain
concatenation, so a page can add a turn to the record it holds (static/input.js, `appendRecord`)
from that turn's piece alone: a long chat does not send its whole record again after each turn.

Where the record is kept up to date (`RecordKeeper`): in the page when it can, else by the
kernel. The record is an output of its own after the chat's. The kernel can only
replace an output whole (`update_display_data`), so updating it after each turn would send the
whole conversation again every turn: a long chat would cost the square of its length. A page that
holds the notebook (JupyterLab, Notebook 7: static/input.js, `keepRecord`) says it keeps the record
(`keep`, with how many turns its copy holds); from then on the kernel sends it each turn's piece
once, as a message to the chat's input widget, and the page adds it to the output it will save.
Without such a page (nbclient, papermill, `await chat.send(...)` in a script, a front-end
without a notebook model) the kernel updates the output whole, as before.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from IPython.display import DisplayHandle

from ..display import publish
from ..render import MIME_TRANSCRIPT
from ..render.style import MATH_OFF, RECORD_CSS, RECORD_STYLE

MIME_CHAT = "application/vnd.acp-notebook.chat+json"
#: The class of the record's HTML; the live chat hides its record output (static/chat.css).
RECORD_CLASS = "acpnb-chat-record"
#: How the pieces of the text view are joined (static/input.js joins them the same way).
PLAIN_JOIN = "\n\n"
EMPTY = "(no message yet)"
#: A turn's fields that are its session's: the record keeps them where they change from the turn
#: before (`saved_turn`), and `chat_turns` fills them back in.
SESSION_FIELDS = ("agent", "model", "sessionId", "title")
#: A rule of the record's stylesheet: the chat's widget output is hidden when it cannot be drawn
#: (its kernel is gone: "Error displaying widget: model not found"), so a notebook saved while the
#: chat was live shows the conversation alone when reopened. The live chat is drawn (it has
#: `acpnb-chat-live`) and hides the record instead (static/chat.css).
DEAD_CHAT = (
    ".jp-OutputArea-child:has(+.jp-OutputArea-child .acpnb-chat-record)"
    ":has(>.jupyter-widgets):not(:has(.acpnb-chat-live)){display:none}"
)


def html_start() -> str:
    """What the record's HTML opens with: then the pieces' HTML, then "</div>". Its one
    `<style>` holds the rule that hides a dead chat's widget output (`DEAD_CHAT`) and the
    record's stylesheet, once for all its turns (render/style.py)."""
    return f'<div class="{RECORD_CLASS} {MATH_OFF}"><style>{DEAD_CHAT}{RECORD_CSS}</style>'


def piece(turn: dict[str, Any], before: dict[str, Any] | None = None) -> dict[str, Any]:
    """What one turn (its record bundle) adds to the chat's record; `before` is the transcript
    of the turn before it in the record, if any (see `saved_turn`)."""
    transcript = turn.get(MIME_TRANSCRIPT)
    said = user_text(transcript)
    return {
        "html": _inner(str(turn.get("text/html", ""))),
        "plain": f"You: {said}\n\n{turn.get('text/plain', '')}",
        "transcript": saved_turn(transcript if isinstance(transcript, dict) else {}, before),
    }


def _inner(html: str) -> str:
    """A turn's record HTML as the chat's record holds it: without the record's stylesheet (the
    chat's has it once) and the classes that turn math off (the chat's root has them)."""
    html = html.replace(RECORD_STYLE, "")
    own = f"<div class='acpnb-turn {MATH_OFF}'"
    return "<div class=acpnb-turn" + html[len(own) :] if html.startswith(own) else html


def saved_turn(transcript: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """A chat turn's transcript as the record keeps it: `lean`, without the session's fields
    that are the turn `before` it's (`SESSION_FIELDS`), as one line of compact JSON. nbformat
    writes a JSON value indented, a line for each key: five turns' transcripts were 14.4 KB of a
    38.9 KB file, and are 10.4 KB as compact strings (`chat_turns` reads both forms)."""
    out = lean(transcript)
    previous = before or {}
    for key in SESSION_FIELDS:
        if key in out and out[key] == previous.get(key):
            del out[key]
        elif key not in out and previous.get(key) is not None:
            out[key] = None  # says it has none: a missing one is the turn before's
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def lean(transcript: dict[str, Any]) -> dict[str, Any]:
    """A chat turn's transcript without what a reader has no need of: its `prompt` (the user's
    message, its first part, says it, an attached file as its workspace path, not this
    machine's), a top-level `plan` that is its last plan part's entries, the parts' message ids
    (the agent's, for joining the chunks of a message while it streams: the part is whole), nor
    empty values (`error: null`, `terminals: []`, a part's `blocks: []`: a reader takes a
    missing one as empty)."""
    out = {k: v for k, v in transcript.items() if k != "prompt" and v not in (None, [], {})}
    parts = out.get("parts")
    listed = parts if isinstance(parts, list) else []
    plans = [p for p in listed if isinstance(p, dict) and p.get("type") == "plan"]
    if "plan" in out and plans and plans[-1].get("entries") == out["plan"]:
        del out["plan"]
    if isinstance(parts, list):
        out["parts"] = [_lean_part(p) if isinstance(p, dict) else p for p in parts]
    return out


def _lean_part(part: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in part.items() if k != "messageId" and v not in (None, [], {})}


def chat_turns(data: Any) -> list[dict[str, Any]]:
    """The transcripts of a saved chat record's turns (its `MIME_CHAT` value), each whole again
    (the session's fields of the turn before filled in), for `read_turn`. It reads the compact
    form (`saved_turn`: a JSON string a turn) and the older one (a JSON object a turn). Total:
    a turn that is neither, or not valid JSON, reads as an empty transcript."""
    turns = data.get("turns") if isinstance(data, dict) else None
    out: list[dict[str, Any]] = []
    for saved in turns if isinstance(turns, list) else []:
        turn: Any = saved
        if isinstance(saved, str):
            try:
                turn = json.loads(saved)
            except (ValueError, RecursionError):
                turn = None
        turn = dict(turn) if isinstance(turn, dict) else {}
        for key in SESSION_FIELDS if out else ():
            if key not in turn and key in out[-1]:
                turn[key] = out[-1][key]
            elif key in turn and turn[key] is None:
                del turn[key]
        out.append(turn)
    return out


def join(pieces: list[dict[str, Any]]) -> dict[str, Any]:
    """The record bundle of these pieces, in order."""
    html = "".join(p["html"] for p in pieces)
    return {
        "text/html": f"{html_start()}{html}</div>",
        "text/plain": PLAIN_JOIN.join(p["plain"] for p in pieces) or EMPTY,
        MIME_CHAT: {"turns": [p["transcript"] for p in pieces]},
    }


def chat_record(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """One bundle for the records of `turns` (each a turn's bundle), in order."""
    pieces: list[dict[str, Any]] = []
    before: dict[str, Any] | None = None
    for turn in turns:
        pieces.append(piece(turn, before))
        before = _transcript(turn)
    return join(pieces)


def _transcript(turn: dict[str, Any]) -> dict[str, Any] | None:
    transcript = turn.get(MIME_TRANSCRIPT)
    return transcript if isinstance(transcript, dict) else None


def user_text(transcript: Any) -> str:
    """The user's message that opens a chat turn's transcript (see turns.user_part)."""
    parts = transcript.get("parts") if isinstance(transcript, dict) else None
    first = parts[0] if isinstance(parts, list) and parts else None
    if isinstance(first, dict) and first.get("role") == "user":
        return str(first.get("text", ""))
    return ""


class Page(Protocol):
    """Where the record's pieces go when a page keeps it: the chat's input widget."""

    def send(self, content: Any, /) -> None: ...


class RecordKeeper:
    """The chat's record: `show()` displays it, `add(turn)` adds a finished turn's record."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.pieces: list[dict[str, Any]] = []
        #: The transcript of the record's last turn (the next piece leaves out what it repeats).
        self.last: dict[str, Any] | None = None
        self.handle: DisplayHandle | None = None
        #: A page said it keeps the record: the kernel sends it pieces, not the whole record.
        self.kept = False
        self.sent = 0  # characters sent for the record after it was shown, for the tests

    def bundle(self) -> dict[str, Any]:
        return join(self.pieces)

    def show(self) -> None:
        self.handle = publish.show(self.bundle(), display_id=True)

    def add(self, turn: dict[str, Any]) -> None:
        self.pieces.append(piece(turn, self.last))
        self.last = _transcript(turn)
        if self.kept:
            self._send(len(self.pieces) - 1)
        else:
            self.update()

    def update(self) -> None:
        """The whole record in its output (once at the end, or where no page keeps it)."""
        if self.handle is not None:
            bundle = self.bundle()
            self.sent += sum(len(str(v)) for v in bundle.values())
            publish.update(self.handle, bundle)

    def page_keeps(self, have: Any) -> None:
        """A page keeps the record and holds its first `have` turns: it gets the rest."""
        self.kept = True
        have = have if type(have) is int and 0 <= have <= len(self.pieces) else 0
        if have < len(self.pieces):
            self._send(have)

    def _send(self, first: int) -> None:
        message: dict[str, Any] = {"event": "record", "from": first, "pieces": self.pieces[first:]}
        if first == 0:
            message["start"] = html_start()
        self.sent += sum(len(str(v)) for p in message["pieces"] for v in p.values())
        self.page.send(message)
