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
`record.py`): each turn is sent to it once, not the whole conversation again.

The workspace's files for `@path` (`list_files`, `resolve_in`), listed within bounds and confined.
The listing walks the session's workspace breadth-first, so a shallow file is never crowded out by a
deep tree: at most `limit` files, `depth` folders down, never into a hidden folder (`.git`, `.venv`,
...) or a heavy one (`node_modules`, `__pycache__`, ...), never through a symbolic link. A chosen
path comes back from the page, which is not trusted: `resolve_in` accepts it only if its names stay
inside the workspace. Whether it is a regular file inside once links are followed is checked where
it is read, on the descriptor that is read (`client.attachments`): checked here and read again by
path, a name the agent's shell swapped for a link meanwhile sent the agent a file from outside.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..errors import PromptError
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
        """`callback(have)` when the page says it keeps the chat's record (`record.py`) and
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


#: Folders never listed (besides every hidden one): caches, dependencies, build output.
SKIPPED = frozenset(
    {"node_modules", "__pycache__", "venv", "env", "build", "dist", "target", "site-packages"}
)
LIMIT = 2000
DEPTH = 6
FOLDERS = 5000  # folders read at most, however few files they hold
MAX_PATH_CHARS = 1000


def list_files(root: str | Path, *, limit: int = LIMIT, depth: int = DEPTH) -> list[str]:
    """Up to `limit` files under `root` (relative, with `/`), at most `depth` folders down and
    `FOLDERS` folders read, shallow ones first, the first `limit * 4` entries of each folder by
    name."""
    found: list[str] = []
    queue: deque[tuple[Path, int]] = deque([(Path(root), 0)])
    read = 0
    while queue and len(found) < limit and read < FOLDERS:
        folder, level = queue.popleft()
        read += 1
        try:
            with os.scandir(folder) as entries:
                # At most `limit * 4` entries read (in the folder's order), then sorted: all
                # of a folder of millions of files were held and sorted to keep as many.
                items = sorted(itertools.islice(entries, limit * 4), key=lambda e: e.name)
        except OSError:  # unreadable or vanished: the rest is still listed
            continue
        for entry in items:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if level + 1 < depth and entry.name not in SKIPPED:
                    queue.append((Path(entry.path), level + 1))
            elif entry.is_file(follow_symlinks=False) and len(found) < limit:
                found.append(Path(entry.path).relative_to(root).as_posix())
    return found


def resolve_in(root: str | Path, relative: str) -> Path:
    """The path `relative` names inside `root`, by its names alone (nothing on disk is looked
    at: the read checks the file it reads); PromptError for an absolute path, one whose `..`
    leads out, an empty or too long one."""
    if not relative or len(relative) > MAX_PATH_CHARS or "\x00" in relative:
        raise PromptError("not a file path of the workspace")
    base = os.path.abspath(root)
    if Path(relative).is_absolute():
        raise PromptError(f"not a path inside the workspace: {relative[:200]}")
    path = os.path.normpath(os.path.join(base, relative))
    if not (path == base or path.startswith(base.rstrip("/") + "/")):
        raise PromptError(f"not a path inside the workspace: {relative[:200]}")
    return Path(path)
