"""Any value as indented JSON text for display; never raises, whatever the value holds."""

from __future__ import annotations

import json
import reprlib
from typing import Any

from .clip import JSON_CHARS, Clipped, chars

_repr = reprlib.Repr()
_repr.maxstring = 2000
_repr.maxother = 2000
_repr.maxlevel = 8


def dump(value: Any, limit: int = JSON_CHARS) -> Clipped:
    """`value` as indented JSON (a bounded repr if it is not JSON), clipped to `limit` chars."""
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=_repr.repr)
    except (ValueError, TypeError, RecursionError):
        try:
            text = _repr.repr(value)
        except Exception:  # a broken __repr__ in a hand-made transcript
            text = f"<{type(value).__name__}>"
    return chars(text, limit)
