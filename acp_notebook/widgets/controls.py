"""The words on every permission button (`option_label`, `option_tip`): the live turn view's (and
the chat's, which shows turns in the same view). The buttons themselves are drawn by the page
(static/turn_view.js), inside the card of their request.

A button reads as the agent named its option (the ACP spec: an option's `name` is the label to
show the user). A name may lie ("Reject" on an option that always allows), so unless its words
say what the option's kind does, our words for the kind follow it: "Reject (allows always)".
The kind is also the button's colour and its tooltip.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

from ..notebook.views import text

# A button of an option without a name (nor id): our word for the kind alone.
_KIND_WORDS = {
    "allow_once": "Allow once",
    "allow_always": "Always allow",
    "reject_once": "Reject",
    "reject_always": "Always reject",
}
# What each kind does, after a name that does not say it.
_KIND_NOTES = {
    "allow_once": "allows once",
    "allow_always": "allows always",
    "reject_once": "rejects once",
    "reject_always": "rejects always",
}
_KIND_TIPS = {
    "allow_once": "Allows this tool call, this once (allow_once)",
    "allow_always": "Allows this tool call, and such calls from now on (allow_always)",
    "reject_once": "Rejects this tool call, this once (reject_once)",
    "reject_always": "Rejects this tool call, and such calls from now on (reject_always)",
}

# The words a name is read by (casefolded, NFKC). Only English ones: a name in words we do not
# know says nothing we can check, so it gets ours after it.
_ALLOW = frozenset(
    "allow allowed allows approve approved accept yes ok okay permit grant confirm proceed "
    "continue run go apply execute trust".split()
)
_REJECT = frozenset(
    "reject rejected deny denied decline refuse no never cancel block stop skip abort "
    "disallow forbid dismiss".split()
)
# A negation before an allow word makes it a reject ("Don't allow", "Never Allow This Tool").
_NOT = frozenset("no not never don't dont cannot can't won't doesn't".split())
_ALWAYS = frozenset(
    "always never forever permanently permanent session remember again all every future "
    "anymore".split()
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def option_label(option: dict[str, Any], mask: Callable[[str], str] = str) -> str:
    """A permission button's text (plain text: ipywidgets shows a Button's description as text):
    the agent's name for the option, then our words for its kind where the name does not say
    them ("Reject (allows always)", "Option A (allows once)")."""
    kind = option.get("kind")
    kind = kind if isinstance(kind, str) else ""
    # Masked before it is cut to 60 characters: a cut key would no longer be recognised. Read
    # as cut: the words judged are the words shown.
    name = text(mask(text(option.get("name") or option.get("optionId"), 10_000)), 60)
    if kind not in _KIND_NOTES:
        return f"{name} (unknown kind)" if name else "(unnamed option)"
    if not name:
        return _KIND_WORDS[kind]
    return name if name_says(name, kind) else f"{name} ({_KIND_NOTES[kind]})"


def option_tip(kind: Any) -> str:
    """A permission button's tooltip: what its kind does, in our words."""
    if isinstance(kind, str) and kind in _KIND_TIPS:
        return _KIND_TIPS[kind]
    return "An option of a kind ACP does not define: what it does is the agent's to say"


def name_says(name: str, kind: str) -> bool:
    """Whether an option's name says what its kind does: an allow (or reject) word and none of
    the other side's, and for an `*_always` kind an "always"-like word too."""
    words = _WORD.findall(unicodedata.normalize("NFKC", name).casefold().replace("’", "'"))
    allows = rejects = False
    for i, word in enumerate(words):
        if word in _ALLOW:
            negated = any(w in _NOT for w in words[max(0, i - 2) : i])
            allows, rejects = allows or not negated, rejects or negated
        elif word in _REJECT:
            rejects = True
    if kind.startswith("allow_"):
        says = allows and not rejects
    else:
        says = rejects and not allows
    if kind.endswith("_always"):
        says = says and any(w in _ALWAYS for w in words)
    return says
