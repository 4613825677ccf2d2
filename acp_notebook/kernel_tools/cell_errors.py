"""The last exception a cell raised, remembered by IPython's `post_run_cell` callback.

The callback runs after every cell of every kernel the extension is loaded into, from the
start, so this module imports nothing heavy; `cells.last_error` reads what it kept.
"""

from __future__ import annotations

import sys
from typing import Any

#: The last error a cell raised, as `note_cell` saw it (at most one).
REMEMBERED: list[BaseException] = []


def note_cell(result: Any) -> None:
    """IPython's `post_run_cell` callback: remember the cell's exception, unless it is a usage
    error (a mistyped `%%agent` line), which IPython also keeps as `sys.last_value` and which
    would hide the error the user wants the agent to see."""
    from IPython.core.error import UsageError

    error = getattr(result, "error_in_exec", None)
    if isinstance(error, BaseException) and not isinstance(error, UsageError):
        REMEMBERED[:] = [error]


def last_exception() -> BaseException | None:
    """The one `note_cell` remembered, else (the callback not installed) IPython's
    `sys.last_value`, a usage error excepted."""
    from IPython.core.error import UsageError

    exc = REMEMBERED[0] if REMEMBERED else getattr(sys, "last_value", None)
    if not isinstance(exc, BaseException) or isinstance(exc, UsageError):
        return None
    return exc
