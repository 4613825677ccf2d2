"""A structured turn's end: validate the answer, ask once more on an error, fail on a second.

The parsing and validation are pure (`protocol.structured`); this is the one await around them:
the re-ask is a second `session/prompt` in the same session and the same turn, so the turn's
record shows both answers and `turn.finished` resolves after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..errors import InvalidArgumentError
from ..protocol import content
from ..protocol.costs import CostLimit
from ..protocol.structured import OutputSpec, instructions, reask
from ..protocol.turn import SUCCESS_STOP_REASONS, TurnRecord, joined
from ..protocol.turnstate import TurnOutcome

#: How many times an answer that does not validate is sent back to the agent.
REASKS = 1


class Queued(Protocol):
    """The queued turn a prompt would join (a `TurnHandle`; not imported: it imports us)."""

    @property
    def output_spec(self) -> OutputSpec | None: ...


Ask = Callable[[list[dict[str, Any]]], Awaitable[TurnOutcome]]


def terms(
    output_type: Any,
    max_cost: float | CostLimit | None,
    queued: Queued | None,
    parts: list[content.Part],
) -> tuple[OutputSpec | None, CostLimit | None]:
    """`prompt()`'s `output_type` and `max_cost`, checked: a bad one raises before anything is
    sent, and a structured prompt does not share a queued turn (whose answer would be mixed).
    With a schema, its instructions join the prompt's `parts`."""
    spec = OutputSpec.of(output_type) if output_type is not None else None
    if queued is not None and (spec is not None or queued.output_spec is not None):
        raise InvalidArgumentError("a structured prompt cannot share a queued turn")
    limit = CostLimit.of(max_cost)
    if spec is not None:
        parts.append({"type": "text", "text": instructions(spec)})
    return spec, limit


async def settle(
    spec: OutputSpec,
    outcome: TurnOutcome,
    record: TurnRecord,
    ask: Ask,
    note: Callable[[str], object],
) -> TurnOutcome:
    """The outcome with the validated output, or with the validation error after the re-ask.

    `ask(blocks)` sends one more prompt in the turn; `note(text)` shows the client's words in
    the turn's record. A turn that failed or was cancelled is returned as it is: there is no
    answer to validate.
    """
    start = 0
    for asked in range(REASKS + 1):
        if outcome.error is not None or outcome.stop_reason not in SUCCESS_STOP_REASONS:
            return outcome
        try:
            checked = spec.check(_answer(record, start))
        except ValueError as exc:
            if asked == REASKS:
                return dataclasses.replace(
                    outcome, error=f"the answer does not match the schema {spec.name}: {exc}"
                )
            note(f"The answer does not match the schema {spec.name}: {exc}. Asking once more.")
            start = len(record.parts)
            outcome = await ask([{"type": "text", "text": reask(str(exc))}])
            continue
        return dataclasses.replace(outcome, output=checked.value, output_json=checked.json)
    return outcome  # not reached: the loop returns on its last round


def _answer(record: TurnRecord, start: int) -> str:
    """The agent's text since part `start` (the re-ask's answer, not the first one)."""
    return joined(record.parts[start:], "agent")
