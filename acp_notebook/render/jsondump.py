"""Any value as indented JSON text for display; never raises, whatever the value holds."""

from __future__ import annotations

import json
import reprlib
from typing import Any

from ..protocol.limits import JSON_CHARS, cut_text
from .clip import Clipped

_repr = reprlib.Repr()
_repr.maxstring = 2000
_repr.maxother = 2000
_repr.maxlevel = 8


def dump(value: Any, limit: int = JSON_CHARS) -> Clipped:
    """`value` as JSON (a bounded repr if it is not JSON), clipped to `limit` characters.

    An object is shown one top-level key a line, each value compact: readable, and encoded by
    the C encoder (`indent` would switch json to its much slower pure-Python encoder).
    """
    try:
        if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
            text = (
                "{\n"
                + ",\n".join(f"  {_compact(k)}: {_compact(v)}" for k, v in value.items())
                + "\n}"
            )
        else:
            text = _compact(value)
    except (ValueError, TypeError, RecursionError):
        try:
            text = _repr.repr(value)
        except Exception:  # a broken __repr__ in a hand-made transcript
            text = f"<{type(value).__name__}>"
    return Clipped(*cut_text(text, limit))


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_repr.repr, separators=(", ", ": "))
