"""Total readers of JSON values: a value of the wrong type reads as absent, nothing raises.

For data that may be malformed: a transcript read back from a saved notebook (any key may be
missing, of the wrong type, or from an older version) or a part built by hand.
"""

from __future__ import annotations

import math
from typing import Any

#: Integers past this are no count or line number of anything real: read as absent.
_BIG = 2**63


def text(x: Any) -> str:
    """A string (NULs dropped), a number as its string, anything else as ""."""
    if isinstance(x, str):
        return x.replace("\x00", "")
    if isinstance(x, int | float) and not isinstance(x, bool):
        try:
            return str(x)
        except ValueError:  # an int too long to print
            return ""
    return ""


def opt_text(x: Any) -> str | None:
    """`text(x)`, or None when that is empty."""
    s = text(x)
    return s or None


def number(x: Any) -> float | None:
    """A finite int or float (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    try:
        value = float(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def integer(x: Any) -> int | None:
    """An int (or a float that is one) below 2^63 in size, else None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x if abs(x) < _BIG else None
    if isinstance(x, float) and math.isfinite(x) and x.is_integer() and abs(x) < _BIG:
        return int(x)
    return None


def mapping(x: Any) -> dict[Any, Any]:
    """A dict, or an empty one."""
    return x if isinstance(x, dict) else {}


def dicts(x: Any) -> list[dict[Any, Any]]:
    """The dict items of a list (or tuple); anything else is empty."""
    if not isinstance(x, list | tuple):
        return []
    return [item for item in x if isinstance(item, dict)]
