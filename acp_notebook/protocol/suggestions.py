"""Prompt suggestions: the prompts the agent predicts the user will send next (ACP v1, unstable
`prompt_suggestions_update`, sent only to a client that opted in with
`clientCapabilities.session.promptSuggestions`).

Each update replaces the session's current list (`suggestions: [{prompt: ContentBlock[]}]`, most
likely first; an empty list withdraws them). They are not part of the conversation: the turn keeps
the last list it got as one part (shown under the answer, as buttons that put the prompt into a
new `%%agent` cell or the chat's input), replaced in place by a later update.

A suggestion is kept as its text: its text blocks joined, a `resource_link` as its URI (what a
person can type into a cell); one with neither is left out. Bounded: `MAX_SUGGESTIONS` a list
(the rest counted), `SUGGESTION_CHARS` each, `MAX_BLOCKS` blocks read of each. Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .coerce import text
from .notes import NotFolded

#: Suggestions one list keeps (an agent offers a few; the rest are counted as dropped).
MAX_SUGGESTIONS = 8
#: Characters of one suggestion kept (a prompt to send, not a document).
SUGGESTION_CHARS = 2_000
#: Content blocks of one suggestion read.
MAX_BLOCKS = 20


@dataclass(slots=True, eq=False)
class SuggestionsPart:
    """The agent's current prompt suggestions, most likely first (empty: withdrawn)."""

    part_id: str
    suggestions: list[str] = field(default_factory=list)

    kind = "suggestions"

    def to_json(self) -> dict[str, Any]:
        return {"type": "suggestions", "id": self.part_id, "suggestions": list(self.suggestions)}

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> SuggestionsPart:
        raw = d.get("suggestions")
        items = raw[:MAX_SUGGESTIONS] if isinstance(raw, list) else []
        kept = [s[:SUGGESTION_CHARS] for s in items if type(s) is str and s.strip()]
        return cls(text(d.get("id")), kept)


class SuggestionsHost(Protocol):
    """What folding suggestions needs of the fold (its `PartWriter`)."""

    def new_id(self, prefix: str) -> str: ...

    def add_part(self, part: SuggestionsPart, kind: str) -> bool: ...

    def updated(self, part: SuggestionsPart) -> None: ...

    def last_part(self, kind: str) -> Any: ...

    def drop(self, kind: str, n: int = 1) -> None: ...


def prompt_text(prompt: Any) -> str:
    """A suggestion's prompt (content blocks) as the text a person would type; "" if none."""
    if not isinstance(prompt, list):
        return ""
    pieces: list[str] = []
    for block in prompt[:MAX_BLOCKS]:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and type(block.get("text")) is str:
            pieces.append(block["text"][:SUGGESTION_CHARS])
        elif block.get("type") == "resource_link" and type(block.get("uri")) is str:
            pieces.append(block["uri"][:SUGGESTION_CHARS])
    return "".join(pieces).strip()[:SUGGESTION_CHARS]


def fold_suggestions(host: SuggestionsHost, update: dict[str, Any]) -> None:
    raw = update.get("suggestions")
    if not isinstance(raw, list):
        raise NotFolded("suggestions must be a list")
    kept: list[str] = []
    for n, item in enumerate(raw):
        if len(kept) == MAX_SUGGESTIONS:  # the rest counted, never read: a list may be huge
            host.drop("suggestions", len(raw) - n)
            break
        said = prompt_text(item.get("prompt")) if isinstance(item, dict) else ""
        if said and said not in kept:
            kept.append(said)
    part = host.last_part("suggestions")
    if isinstance(part, SuggestionsPart):
        part.suggestions = kept  # the list replaces the last one, where it was shown
        host.updated(part)
    elif kept:
        host.add_part(SuggestionsPart(host.new_id("g"), kept), "suggestions")
