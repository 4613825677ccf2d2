"""What an elicitation handler is given and may answer (`ClientOptions.elicitation_handler`,
`session.elicitation_handler`, `turn.elicitation_handler`).

The handler gets the recorded `ElicitationPart` (its `mode`, `message`, `fields`, `url`, and
`link`: the URL as the browser reads it, `link.href` to open and `link.host` it opens, the same
as `host`) and answers one of:

- a mapping of field values: accept a form with them (checked and converted: `check_answer`);
- `"accept"`: accept a URL elicitation (the user went, or agreed to go, to the link);
- `None` or `"decline"`: decline; `"cancel"`: cancel.

A handler that raises declines (e.g. `TimeoutError` when nobody answered in time), and the
record says why. With no handler, every elicitation is declined. A link that would mislead
(user info, or read differently by browsers and by `urlsplit`: `protocol/weburl.py`) is declined
before any handler is asked, and the record says "refused" and why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ...errors import ElicitationError
from ...protocol.elicitation import ElicitationPart, check_answer

Answer = Mapping[str, Any] | str | None
ElicitationHandler = Callable[[ElicitationPart], Awaitable[Answer]]


def answer(part: ElicitationPart, given: Answer) -> tuple[str, dict[str, Any] | None]:
    """The wire action and content for what a handler returned."""
    if given is None or given == "decline":
        return "decline", None
    if given == "cancel":
        return "cancel", None
    if given == "accept":
        if part.mode == "form" and any(f.required for f in part.fields):
            raise ElicitationError("accepting this form needs its required fields")
        return "accept", None if part.mode == "url" else {}
    if isinstance(given, Mapping):
        if part.mode != "form":
            raise ElicitationError("a URL elicitation is accepted with 'accept', not values")
        return "accept", check_answer(part, dict(given))
    raise ElicitationError(f"an elicitation answer cannot be {type(given).__name__}")
