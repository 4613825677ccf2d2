"""Transcripts: the JSON shape of `TurnResult.to_json()`, for a turn running or finished.

Renderers take this one shape (masked first, see `notebook.publish`) and read it back into the
fold's own parts (`protocol.transcript.read_turn`), so a live turn, a finished one and a turn
read back from a saved notebook are the same objects, drawn by the same code.
"""

from __future__ import annotations

import time
from typing import Any

from ..protocol.result import TurnRecord, TurnResult
from ..protocol.state import MessagePart
from .session import Session
from .turn import TurnHandle


def live_transcript(
    session: Session, record: TurnRecord | None, turn: TurnHandle, note: str = ""
) -> dict[str, Any]:
    """The transcript shape of `TurnResult.to_json()`, built from a turn still running."""
    usage = session.usage
    out: dict[str, Any] = {
        "turnId": turn.id,
        "sessionId": session.id,
        "agent": session.client.agent_name,
        "success": None,
        "stopReason": None,
        "error": None,
        "usage": usage.to_json() if usage else None,
        "prompt": turn.prompt,
        "parts": [],
        "plan": [],
        "terminals": [],
        "text": "",
        "thoughts": "",
    }
    if record is not None:
        out.update(record_transcript(record, session))
        out["turnId"] = turn.id
    if session.title:
        out["title"] = session.title
    if note:
        out["note"] = note
    return out


def record_transcript(record: TurnRecord, session: Session) -> dict[str, Any]:
    """What a turn record holds, in transcript shape (a running or a replayed turn)."""
    views = session.terminal_views
    dropped = {"dropped": dict(record.dropped)} if record.dropped else {}
    parts = [p.to_json() for p in record.parts]
    return {
        **dropped,
        "turnId": record.turn_id,
        "agent": session.client.agent_name,
        "parts": parts,
        "plan": [e.to_json() for e in record.plan.entries] if record.plan else [],
        "text": _joined(record, parts, "agent"),
        "thoughts": _joined(record, parts, "thought"),
        "terminals": [views[t].to_json() for t in record.terminal_ids() if t in views],
        "duration": time.time() - record.started_at,
    }


def _joined(record: TurnRecord, parts: list[dict[str, Any]], role: str) -> str:
    """`record.joined(role)` from the texts the parts' JSON already read: reading a streaming
    message's text copies all of it, and a live view does this at every redraw."""
    return "\n\n".join(
        j["text"]
        for p, j in zip(record.parts, parts, strict=True)
        if isinstance(p, MessagePart) and p.role == role and j["text"]
    )


def final_transcript(result: TurnResult, note: str = "") -> dict[str, Any]:
    out = result.to_json()
    if note:
        out["note"] = note
    return out
