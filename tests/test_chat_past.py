"""The earlier turns a new chat on a session shows: the latest `KEPT`, in order."""

from __future__ import annotations

from typing import Any

from acp_notebook.chat.turns import KEPT, PastTurn, past_turns, remember


class _Session:  # what `past_turns` keys on: any weakly referenced session object
    pass


def _turn(i: int) -> PastTurn:
    empty: Any = {}
    return PastTurn(f"turn-{i}", empty, {}, {})


def test_a_long_session_keeps_only_its_latest_turns_for_the_next_chat() -> None:
    session: Any = _Session()
    for i in range(KEPT + 5):
        remember(session, _turn(i))
    assert [t.turn_id for t in past_turns(session)] == [f"turn-{i}" for i in range(5, KEPT + 5)]
    other: Any = _Session()
    assert past_turns(other) == []  # by session
