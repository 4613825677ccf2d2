"""The words on every permission button (`option_label`): the live turn view's (and the chat's,
which shows turns in the same view). The buttons themselves are drawn by the page
(static/turn_view.js), inside the card of their request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..notebook.views import text

# What each kind of option does, in our words: the agent names the options, and a name may lie
# ("Reject" on an option that always allows).
_KIND_WORDS = {
    "allow_once": "Allow once",
    "allow_always": "Always allow",
    "reject_once": "Reject",
    "reject_always": "Always reject",
}


def option_label(option: dict[str, Any], mask: Callable[[str], str] = str) -> str:
    """A permission button's text (plain text: ipywidgets shows a Button's description as text).
    Our word for the option's kind, then the agent's name for it when that says something else."""
    kind = option.get("kind")
    words = _KIND_WORDS.get(kind, "") if isinstance(kind, str) else ""
    # Masked before it is cut to 60 characters: a cut key would no longer be recognised.
    name = text(mask(text(option.get("name") or option.get("optionId"), 10_000)), 60)
    if not words:
        return f"{name} (unknown kind)" if name else "(unnamed option)"
    if set(name.casefold().split()) <= set(words.casefold().split()):
        return words  # the agent's name says no more than ours ("Allow" for allow_once)
    return f"{words}: {name}"
