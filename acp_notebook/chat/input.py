"""The chat's message box, a small anywidget: Enter sends, Shift+Enter is a newline, completion.

ipywidgets' Textarea inserts a newline on Enter and tells the kernel nothing; its Text sends on
Enter but holds one line. This box sends a `submit` message with the text on Enter (or its Send
button), never for an empty or blank text, and clears itself. Its front-end also keeps the
chat's log following new output until the user scrolls up (see static/input.js).

Completion: `/` at the start lists `commands` (the agent's, with their descriptions); `@` lists
`files` (the workspace's, asked for with a `files` message when the reader types `@`). Arrows
move, Enter or Tab choose, Escape closes. A chosen `@path` still in the text when it is sent goes
with the `submit` message, as `files`. When the kernel goes away the page drops the chat's own
output (found by `token`), so the notebook keeps the chat's static record, not a dead widget.
While the chat is live, the page also keeps that record up to date itself (`on_keep`,
`keep.py`): each turn is sent to it once, not the whole conversation again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..widgets.turn_view import STATIC as VIEW_STATIC
from .record import RECORD_CLASS

_HERE = Path(__file__).parent
MAX_FILES_SENT = 20  # `@` attachments of one message

CSS = (
    (_HERE / "static" / "chat.css")
    .read_text(encoding="utf-8")
    .replace("RECORD_CLASS", RECORD_CLASS)
)


class ChatInput(anywidget.AnyWidget):
    """A text box with a Send button; `on_submit(fn)` calls `fn(text, files)` for each message
    sent, `on_files(fn)` calls `fn()` when the page wants the workspace's files.

    The callbacks run where the widget message arrives (a subshell's thread in JupyterLab):
    hand real work to the kernel's loop (`widgets.loop.KernelLoop`)."""

    # One module per widget: the helpers it shares with the turn view (plain_text.js) go first.
    _esm = "\n".join(
        p.read_text(encoding="utf-8")
        for p in (VIEW_STATIC / "plain_text.js", _HERE / "static" / "input.js")
    )
    _css = CSS
    value = traitlets.Unicode("").tag(sync=True)
    placeholder = traitlets.Unicode(
        "Message the agent… (Enter sends, Shift+Enter: new line, / commands, @ files)"
    ).tag(sync=True)
    disabled = traitlets.Bool(False).tag(sync=True)
    #: The agent's commands: {"name", "description", "hint"}, every string masked and cut short.
    commands = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: Workspace files (relative paths) for `@`; empty until the page asks.
    files = traitlets.List(traitlets.Unicode()).tag(sync=True)
    #: In the chat output's metadata (`acp_notebook.chat`): how the page finds that output.
    token = traitlets.Unicode("").tag(sync=True)

    def on_submit(self, callback: Callable[[str, list[str]], None]) -> None:
        def received(_widget: Any, content: Any, _buffers: Any) -> None:
            if not isinstance(content, dict) or content.get("event") != "submit":
                return
            text = content.get("text")
            files = content.get("files")
            files = files if isinstance(files, list) else []
            chosen = [f for f in files if isinstance(f, str)][:MAX_FILES_SENT]
            if isinstance(text, str) and text.strip():
                callback(text, chosen)

        self.on_msg(received)

    def on_keep(self, callback: Callable[[Any], None]) -> None:
        """`callback(have)` when the page says it keeps the chat's record (`keep.py`) and
        holds `have` turns of it (unchecked: the page is not trusted)."""

        def received(_widget: Any, content: Any, _buffers: Any) -> None:
            if isinstance(content, dict) and content.get("event") == "keep":
                callback(content.get("have"))

        self.on_msg(received)

    def on_files(self, callback: Callable[[], None]) -> None:
        def received(_widget: Any, content: Any, _buffers: Any) -> None:
            if isinstance(content, dict) and content.get("event") == "files":
                callback()

        self.on_msg(received)
