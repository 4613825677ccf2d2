"""Permission decisions: a policy by tool kind, and a pluggable handler for asking someone.

The policy answers first. "ask" goes to the session's handler (a widget, a callback); with no
handler, nobody can be asked and the request fails closed: it is rejected, and the record says so.
Options are chosen by `kind`, never by id: agents name their option ids differently.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..protocol.state import PermissionPart

Decision = Literal["allow", "reject", "ask"]
TOOL_KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch",
                        "switch_mode", "other"})


@dataclass(frozen=True)
class PermissionPolicy:
    """Which tool kinds are allowed or rejected without asking; `default` for the rest.

    `PermissionPolicy(allow={"read", "search"}, deny={"execute"}, default="ask")`.
    Kinds: read, edit, delete, move, search, execute, think, fetch, switch_mode, other; `"*"`
    stands for all of them.
    """

    allow: frozenset[str] = field(default_factory=frozenset)
    deny: frozenset[str] = field(default_factory=frozenset)
    default: Decision = "ask"

    def __init__(self, allow: Iterable[str] = (), deny: Iterable[str] = (),
                 default: Decision = "ask") -> None:
        allow_set, deny_set = _kinds(allow), _kinds(deny)
        if default not in ("allow", "reject", "ask"):
            raise ValueError(f"default must be 'allow', 'reject' or 'ask', not {default!r}")
        object.__setattr__(self, "allow", allow_set)
        object.__setattr__(self, "deny", deny_set)
        object.__setattr__(self, "default", default)

    def decide(self, tool_kind: str) -> Decision:
        # Deny wins over allow: a kind named in both is refused.
        if tool_kind in self.deny or "*" in self.deny:
            return "reject"
        if tool_kind in self.allow or "*" in self.allow:
            return "allow"
        return self.default


def _kinds(names: Iterable[str]) -> frozenset[str]:
    if isinstance(names, str):
        names = [n for n in names.replace(",", " ").split() if n]
    kinds = frozenset(names)
    unknown = kinds - TOOL_KINDS - {"*"}
    if unknown:
        raise ValueError(f"unknown tool kind(s): {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(sorted(TOOL_KINDS))}, or *")
    return kinds


def pick_option(options: list[dict[str, Any]], decision: Literal["allow", "reject"]) -> str | None:
    """The option id for a decision: the `_once` kind first, then `_always`."""
    for kind in (f"{decision}_once", f"{decision}_always"):
        for option in options:
            if option.get("kind") == kind and isinstance(option.get("optionId"), str):
                return str(option["optionId"])
    return None


@dataclass(frozen=True)
class PermissionRequest:
    """What a permission handler is given: the recorded part and the tool call it is about."""

    part: PermissionPart
    tool_kind: str
    tool_call: dict[str, Any]
    session_id: str | None

    @property
    def options(self) -> list[dict[str, Any]]:
        return self.part.options


#: Returns the chosen option id, or None to reject. A handler that raises rejects too, and the
#: record says why (e.g. a TimeoutError when nobody answered in time).
PermissionHandler = Callable[[PermissionRequest], Awaitable[str | None]]
