"""The words on every permission button (`option_label`, `option_tip`): the live turn view's (and
the chat's, which shows turns in the same view). The buttons themselves are drawn by the page
(static/turn_view.js), inside the card of their request.

A button reads as the agent named its option (the ACP spec: an option's `name` is the label to
show the user). A name may lie ("Reject" on an option that always allows), so unless its words
say what the option's kind does, our words for the kind follow it: "Reject (allows always)".
The kind is also the button's colour and its tooltip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..display.views import text
from ..render import labels

# A button of an option without a name (nor id): our word for the kind alone.
_KIND_WORDS = {
    "allow_once": "Allow once",
    "allow_always": "Always allow",
    "reject_once": "Reject",
    "reject_always": "Always reject",
}
_KIND_TIPS = {
    "allow_once": "Allows this tool call, this once (allow_once)",
    "allow_always": "Allows this tool call, and such calls from now on (allow_always)",
    "reject_once": "Rejects this tool call, this once (reject_once)",
    "reject_always": "Rejects this tool call, and such calls from now on (reject_always)",
}


def option_label(option: dict[str, Any], mask: Callable[[str], str] = str) -> str:
    """A permission button's text (plain text: ipywidgets shows a Button's description as text):
    the agent's name for the option, then our words for its kind where the name does not say
    them ("Reject (allows always)", "Option A (allows once)")."""
    kind = option.get("kind")
    kind = kind if isinstance(kind, str) else ""
    # Masked before it is cut to 60 characters: a cut key would no longer be recognised. Read
    # as cut: the words judged are the words shown.
    name = text(mask(text(option.get("name") or option.get("optionId"), 10_000)), 60)
    if kind not in _KIND_WORDS:
        return f"{name} (unknown kind)" if name else "(unnamed option)"
    return labels.option_words(name, kind) if name else _KIND_WORDS[kind]


def option_tip(kind: Any) -> str:
    """A permission button's tooltip: what its kind does, in our words."""
    if isinstance(kind, str) and kind in _KIND_TIPS:
        return _KIND_TIPS[kind]
    return "An option of a kind ACP does not define: what it does is the agent's to say"
