"""The chat's static record: its finished turns' records in one output, one stylesheet for all.

Each turn's record is the bundle a cell keeps (`publish.turn`: Markdown, HTML, text, transcript)
of a transcript that opens with the user's message. The chat's record joins them, so a notebook
reopened without a kernel, nbconvert or a viewer shows the conversation. The HTML carries the
turn stylesheet once, not once per turn; the Markdown and text views, which draw only the agent's
side of a turn, get the user's message before each turn; the transcripts are kept as a list under
the chat's own MIME type (a cell's turn type holds one turn, and tools that replay cells read it).
"""

from __future__ import annotations

from typing import Any

from ..render import MIME_TRANSCRIPT
from ..render.mdwrite import plain
from ..render.style import MATH_OFF, STYLE

MIME_CHAT = "application/vnd.acp-notebook.chat+json"
#: The class of the record's HTML; the live chat hides its record output (static/chat.css).
RECORD_CLASS = "acpnb-chat-record"


def chat_record(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """One bundle for the records of `turns` (each a turn's bundle), in order."""
    html = "".join(str(t.get("text/html", "")).replace(STYLE, "") for t in turns)
    markdown, lines = [], []
    for t in turns:
        said = user_text(t.get(MIME_TRANSCRIPT))
        markdown += [f"**You:** {plain(said)}", str(t.get("text/markdown", "")), "---"]
        lines += [f"You: {said}", str(t.get("text/plain", ""))]
    return {
        "text/html": f'<div class="{RECORD_CLASS} {MATH_OFF}">{STYLE if turns else ""}{html}</div>',
        "text/markdown": "\n\n".join(markdown[:-1]),
        "text/plain": "\n\n".join(lines) or "(no message yet)",
        MIME_CHAT: {"turns": [t.get(MIME_TRANSCRIPT, {}) for t in turns]},
    }


def user_text(transcript: Any) -> str:
    """The user's message that opens a chat turn's transcript (see chat_turn.user_part)."""
    parts = transcript.get("parts") if isinstance(transcript, dict) else None
    first = parts[0] if isinstance(parts, list) and parts else None
    if isinstance(first, dict) and first.get("role") == "user":
        return str(first.get("text", ""))
    return ""
