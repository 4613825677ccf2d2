"""The chat's message box, a small anywidget: Enter sends, Shift+Enter is a newline.

ipywidgets' Textarea inserts a newline on Enter and tells the kernel nothing; its Text sends on
Enter but holds one line. This box sends a `submit` message with the text on Enter (or its Send
button), never for an empty or blank text, and clears itself. Its front-end also keeps the
chat's log following new output until the user scrolls up (see chat_input.js).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

_HERE = Path(__file__).parent

CSS = """
.acpnb-chat-input{display:flex;gap:6px;align-items:flex-end;width:100%}
.acpnb-chat-input .acpnb-chat-text{flex:1;min-width:0;resize:vertical;font:inherit;
  padding:4px 6px;color:var(--jp-ui-font-color1,inherit);
  background:var(--jp-layout-color1,transparent);
  border:1px solid var(--jp-border-color1,rgba(127,127,127,.5));border-radius:3px}
.acpnb-chat-input .acpnb-chat-send{flex:none;width:auto;padding:0 14px}
.acpnb-chat-input .acpnb-chat-send:disabled{opacity:.45;cursor:default}
"""


class ChatInput(anywidget.AnyWidget):
    """A text box with a Send button; `on_submit(fn)` calls `fn(text)` for each message sent.

    The callback runs where the widget message arrives (a subshell's thread in JupyterLab):
    hand real work to the kernel's loop (`widgets.loop.KernelLoop`)."""

    _esm = _HERE / "chat_input.js"
    _css = CSS
    value = traitlets.Unicode("").tag(sync=True)
    placeholder = traitlets.Unicode("Message the agent… (Enter sends, Shift+Enter: new line)").tag(
        sync=True
    )
    disabled = traitlets.Bool(False).tag(sync=True)

    def on_submit(self, callback: Callable[[str], None]) -> None:
        def received(_widget: Any, content: Any, _buffers: Any) -> None:
            if not isinstance(content, dict) or content.get("event") != "submit":
                return
            text = content.get("text")
            if isinstance(text, str) and text.strip():
                callback(text)

        self.on_msg(received)
