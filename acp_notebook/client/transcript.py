"""The transcript of a turn still running (or replayed), with what its session knows: the shape
of `TurnResult.to_json()`, written by `protocol/turn.py`'s `turn_json`.

Renderers take this one shape (masked first, see `display.publish`) and read it back into the
fold's own parts (`protocol.turn.read_turn`), so a live turn, a finished one and a turn read
back from a saved notebook are the same objects, drawn by the same code.
"""

from __future__ import annotations

from typing import Any

from ..protocol.session_facts import session_model
from ..protocol.turn import TurnRecord, TurnResult, turn_json
from .session import Session
from .turn import TurnHandle


def live_transcript(
    session: Session, record: TurnRecord | None, turn: TurnHandle, note: str = ""
) -> dict[str, Any]:
    """The transcript of `turn`, still running (`record`: what the fold has of it so far)."""
    if record is None:  # nothing folded yet
        return turn_json(
            turn_id=turn.id,
            session_id=session.id,
            agent=session.client.agent_name,
            text="",
            thoughts="",
            plan=(),
            prompt=turn.prompt,
            terminals=[],
            parts=[],
            usage=session.usage,
            title=session.title,
            model=session_model(session.config_options),
            note=note,
        )
    out = record_transcript(record, session, prompt=turn.prompt, note=note)
    out["turnId"] = turn.id
    return out


def record_transcript(
    record: TurnRecord,
    session: Session,
    prompt: list[dict[str, Any]] | None = None,
    note: str = "",
) -> dict[str, Any]:
    """What a turn record holds, in transcript shape (a running or a replayed turn)."""
    out = record.to_json(
        agent=session.client.agent_name,
        terminals=session.terminal_views,
        session_id=session.id,
        usage=session.usage,
        prompt=prompt,
        title=session.title,
        note=note,
    )
    if model := session_model(session.config_options):
        out["model"] = model
    return out


def final_transcript(result: TurnResult, note: str = "") -> dict[str, Any]:
    return result.to_json(note)
