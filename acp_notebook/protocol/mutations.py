"""What subscribers receive while a session runs.

Small frozen records, in the spirit of the turn-handle API this project follows:
`Delta` appends visible text, reasoning or raw tool input; `PartUpdated` carries the complete state
of one part (message, tool call, plan, permission request, unknown update); `TurnFinished` lines up
with `turn.finished`; `RequestWarning` reports a failed attempt (and whether another follows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .state import Part
    from .turn import TurnResult

Channel = Literal["text", "thought", "user", "tool_input", "terminal"]


# Not frozen: one is built per streamed chunk, and a frozen dataclass costs twice as much to
# build. Treat it as read-only all the same.
@dataclass(slots=True)
class Delta:
    """Text appended to a part: the answer, a thought, the user's own message, a tool call's raw
    input or a terminal's output, by `channel`."""

    #: The turn it belongs to; None for updates outside any turn (a `session/load` replay, say).
    turn_id: str | None
    #: The part the text is appended to.
    part_id: str
    #: `text` (the answer), `thought`, `user`, `tool_input` or `terminal`.
    channel: Channel
    #: The text appended.
    text: str


@dataclass(frozen=True, slots=True)
class PartUpdated:
    """The complete new state of one part of a turn (a message, tool call, plan, permission
    request, question or unknown update)."""

    #: The turn it belongs to; None for updates outside any turn.
    turn_id: str | None
    #: The part, complete, as it is now.
    part: Part


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A turn began to run: its input is about to go to the agent as `session/prompt`."""

    #: The turn's id (`TurnHandle.id`, `TurnResult.turn_id`).
    turn_id: str


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """A turn ended with this `result` (the same as `await turn.finished`)."""

    #: The turn's id.
    turn_id: str
    #: What the turn gave.
    result: TurnResult


@dataclass(frozen=True, slots=True)
class SessionChanged:
    """A session-wide snapshot changed: mode, config_options, commands, info, usage, session_id."""

    #: Which snapshot changed: `mode`, `config_options`, `commands`, `info`, `usage` or
    #: `session_id`.
    field: str


@dataclass(frozen=True, slots=True)
class RequestWarning:
    """A failed request to the agent (kind `model_request` for a turn's attempt)."""

    #: What failed, as the error says it.
    message: str
    #: What kind of request failed (`model_request`: an attempt at a turn).
    kind: str = "model_request"
    #: The turn of the attempt, if any.
    turn_id: str | None = None
    #: This attempt's number, from 1.
    attempt: int = 0
    #: How many attempts the turn may make in all.
    max_attempts: int = 0
    #: Whether another attempt follows.
    will_retry: bool = False


Mutation = Delta | PartUpdated | TurnStarted | TurnFinished | SessionChanged | RequestWarning
