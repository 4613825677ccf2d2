"""Permission decisions: a policy by tool kind, and a pluggable handler for asking someone.

The policy answers first. "ask" goes to the session's handler (a widget, a callback); with no
handler, nobody can be asked and the request fails closed: it is rejected, and the record says so.
Options are chosen by `kind`, never by id: agents name their option ids differently.

The request comes from the agent, which we do not trust, so `assess()` reads it first and the
policy may only *allow* an explicit, well-formed request of a known kind:

- the `toolCall` is an object with a string `toolCallId` that passes the schema; its `kind` is
  one of the spec's kinds, spelled exactly (`Execute`, `EXECUTE`, ` execute` are not `execute`:
  they count as unknown, and as `execute` where a rule would *reject* it);
- the kind was stated, in this request or by the tool call's earlier update (a kind nobody
  stated is unknown, not the spec's default `other`);
- every option is an object with a string `optionId` and `name` and one of the four option
  kinds, and no two share an id (a shared id could mean "allow" and "reject" at once); bad
  options are dropped, never offered, and so are options beyond the first `MAX_OPTIONS`.

Anything else is irregular: asked (rejected with nobody to ask), never allowed. What the content
shows outranks the name the agent chose: a diff is an edit, a terminal is an execute, whatever
the `kind` says; a kind that changed since the tool call's earlier update counts as both. The
policy decides on all the kinds a request is taken to be: rejected if any is denied, allowed only
if all are allowed. The title is free text and is not read for a kind: guessing from prose
would be a new way to be fooled; it is shown to whoever is asked. A second request for a tool
call already decided is decided afresh (no answer is remembered, not even an "always"), and the
kinds the call was ever stated as (by any update or request) still count: it cannot shed a
denied kind by asking again or by a `tool_call_update` relabelling it.
(Not irregular in itself: fast-agent names every request's tool call "pending".)
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ...errors import InvalidArgumentError
from ...protocol import schema
from ...protocol.state import PermissionPart, ToolCallPart

Decision = Literal["allow", "reject", "ask"]
TOOL_KINDS = frozenset(
    {
        "read",
        "edit",
        "delete",
        "move",
        "search",
        "execute",
        "think",
        "fetch",
        "switch_mode",
        "other",
    }
)
MAX_OPTIONS = 16  # the spec has four option kinds; agents offer a handful
OPTION_KINDS = frozenset({"allow_once", "allow_always", "reject_once", "reject_always"})
_WRITING_KINDS = frozenset({"edit", "delete", "move"})  # kinds a diff may honestly belong to


@dataclass(frozen=True)
class PermissionPolicy:
    """Which tool kinds are allowed or rejected without asking; `default` for the rest.

    `PermissionPolicy(allow={"read", "search"}, deny={"execute"}, default="ask")`.
    Kinds: read, edit, delete, move, search, execute, think, fetch, switch_mode, other; `"*"`
    stands for all of them.
    """

    #: Kinds allowed without asking.
    allow: frozenset[str] = field(default_factory=frozenset)
    #: Kinds always rejected; deny wins over allow.
    deny: frozenset[str] = field(default_factory=frozenset)
    #: Every other kind: `"ask"`, `"allow"` or `"reject"`.
    default: Decision = "ask"

    def __init__(
        self, allow: Iterable[str] = (), deny: Iterable[str] = (), default: Decision = "ask"
    ) -> None:
        allow_set, deny_set = _kinds(allow), _kinds(deny)
        if default not in ("allow", "reject", "ask"):
            raise InvalidArgumentError(
                f"default must be 'allow', 'reject' or 'ask', not {default!r}"
            )
        object.__setattr__(self, "allow", allow_set)
        object.__setattr__(self, "deny", deny_set)
        object.__setattr__(self, "default", default)

    def decide(self, tool_kind: str) -> Decision:
        """`"allow"`, `"reject"` or `"ask"` for a tool kind, by the lists alone (deny first)."""
        # Deny wins over allow: a kind named in both is refused.
        if tool_kind in self.deny or "*" in self.deny:
            return "reject"
        if tool_kind in self.allow or "*" in self.allow:
            return "allow"
        return self.default

    def judge(self, request: Assessment) -> Decision:
        """The decision for a whole request: reject if any of its kinds is rejected, allow only
        a regular request whose every kind is allowed, ask otherwise."""
        kinds = request.kinds or frozenset({"other"})  # unknown is "other" only to reject
        decisions = {self.decide(kind) for kind in kinds}
        if "reject" in decisions:
            return "reject"
        if request.problems or not request.kinds:
            return "ask"
        return "allow" if decisions == {"allow"} else "ask"


def _kinds(names: Iterable[str]) -> frozenset[str]:
    if isinstance(names, str):
        names = [n for n in names.replace(",", " ").split() if n]
    kinds = frozenset(names)
    unknown = kinds - TOOL_KINDS - {"*"}
    if unknown:
        raise InvalidArgumentError(
            f"unknown tool kind(s): {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(TOOL_KINDS))}, or *"
        )
    return kinds


def pick_option(options: list[dict[str, Any]], decision: Literal["allow", "reject"]) -> str | None:
    """The option id for a decision: the `_once` kind first, then `_always`; None if the agent
    offered neither (never an option of the other kind)."""
    for kind in (f"{decision}_once", f"{decision}_always"):
        for option in options:
            if option.get("kind") == kind and isinstance(option.get("optionId"), str):
                return str(option["optionId"])
    return None


@dataclass(frozen=True)
class Assessment:
    """What a permission request is taken to be, before any policy looks at it.

    `kinds`: every tool kind it may be (stated, earlier stated, or shown by its content); empty
    if none is known. `options`: the well-formed options, the only ones offered or answered.
    `problems`: why the policy may not allow it on its own (empty for a regular request).
    """

    call_id: str | None
    tool_call: dict[str, Any]
    kinds: frozenset[str]
    options: list[dict[str, Any]]
    problems: tuple[str, ...]

    @property
    def label(self) -> str:
        """The kinds for display: "edit", "execute+read", or "unknown"."""
        return "+".join(sorted(self.kinds)) or "unknown"


def assess(params: Any, earlier: ToolCallPart | None = None) -> Assessment:
    """Read a `session/request_permission` request's params (see the module docstring).

    `earlier`: the tool call as its earlier updates (and permission requests) left it.
    """
    problems: list[str] = []
    if not isinstance(params, dict):
        params = {}
        problems.append("the params are not an object")
    raw_call = params.get("toolCall")
    tool_call: dict[str, Any] = raw_call if isinstance(raw_call, dict) else {}
    if not isinstance(raw_call, dict):
        problems.append("toolCall is not an object")
    call_id = tool_call.get("toolCallId")
    if not isinstance(call_id, str) or not call_id:
        problems.append("toolCall has no toolCallId")
        call_id = None
    kinds = _stated_kinds(tool_call, earlier, problems)
    kinds |= _content_kinds(tool_call, earlier, kinds, problems)
    if tool_call:
        problems.extend(_field_problems(tool_call))
    options = _good_options(params.get("options"), problems)
    return Assessment(call_id, tool_call, frozenset(kinds), options, tuple(problems))


def _stated_kinds(
    tool_call: dict[str, Any], earlier: ToolCallPart | None, problems: list[str]
) -> set[str]:
    kinds: set[str] = set()
    # The fold's default for a tool call with no kind is "other": only another kind was stated.
    # Every kind stated before, not only the latest: relabelling a call (an update, or asking
    # again as another kind) must not shed a kind that a rule rejects or does not allow.
    if earlier is not None:
        kinds |= (earlier.stated_kinds | {earlier.tool_kind}) & (TOOL_KINDS - {"other"})
    if "kind" not in tool_call:
        if not kinds:
            problems.append("the tool call's kind was never stated")
        return kinds
    kind = tool_call["kind"]
    if isinstance(kind, str) and kind in TOOL_KINDS:
        kinds.add(kind)
        return kinds
    problems.append(f"unknown tool kind {kind!r}"[:200])
    lookalike = kind.strip().casefold() if isinstance(kind, str) else ""
    if lookalike in TOOL_KINDS:
        kinds.add(lookalike)  # so that a rule rejecting "execute" rejects "EXECUTE" too
    return kinds


def _content_kinds(
    tool_call: dict[str, Any], earlier: ToolCallPart | None, stated: set[str], problems: list[str]
) -> set[str]:
    content: list[Any] = []
    for items in (tool_call.get("content"), earlier.content if earlier is not None else None):
        if isinstance(items, list):
            content.extend(items)
    types = {item.get("type") for item in content if isinstance(item, dict)}
    if earlier is not None:
        types |= earlier.shown_types  # shown once, then replaced by an update: still shown
    kinds: set[str] = set()
    if "diff" in types and not stated & _WRITING_KINDS:
        kinds.add("edit")
        problems.append("the content shows a diff, the kind says otherwise")
    if "terminal" in types and "execute" not in stated:
        kinds.add("execute")
        problems.append("the content shows a terminal, the kind says otherwise")
    return kinds


_STATUSES = frozenset({"pending", "in_progress", "completed", "failed"})
_CONTENT_TYPES = frozenset({"content", "diff", "terminal"})


def _field_problems(tool_call: dict[str, Any]) -> list[str]:
    """The fields of the tool call that are not what the spec says. Checked here, strictly:
    the schema models are lenient on purpose (a bad field is dropped, so the rest of an update
    still shows), which would let a malformed request look like a regular one."""

    def bad(name: str, ok: Callable[[Any], bool]) -> bool:
        return tool_call.get(name) is not None and not ok(tool_call[name])

    checks: dict[str, Callable[[Any], bool]] = {
        "title": lambda v: isinstance(v, str),
        "status": lambda v: v in _STATUSES,
        "content": lambda v: (
            isinstance(v, list)
            and all(isinstance(i, dict) and i.get("type") in _CONTENT_TYPES for i in v)
        ),
        "locations": lambda v: (
            isinstance(v, list)
            and all(isinstance(i, dict) and isinstance(i.get("path"), str) for i in v)
        ),
    }
    problems = [
        f"toolCall field {name!r} is malformed" for name, ok in checks.items() if bad(name, ok)
    ]
    if not problems:
        try:
            schema.validate_tool_call_update(tool_call)
        except schema.ValidationError:
            problems.append("toolCall does not match the schema")
    return problems


def _good_options(raw: Any, problems: list[str]) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        problems.append("no options were offered")
        return []
    good = [
        o
        for o in raw
        if isinstance(o, dict)
        and isinstance(o.get("optionId"), str)
        and o["optionId"]
        and isinstance(o.get("name"), str)
        and o.get("kind") in OPTION_KINDS
    ]
    if len(good) < len(raw):
        problems.append(f"{len(raw) - len(good)} malformed option(s) dropped")
    counts = collections.Counter(o["optionId"] for o in good)
    shared = sorted(i for i, n in counts.items() if n > 1)
    if shared:
        problems.append(f"option ids offered twice, dropped: {', '.join(map(repr, shared))}"[:300])
        good = [o for o in good if counts[o["optionId"]] == 1]
    if len(good) > MAX_OPTIONS:  # one button each: thousands would stall the page and kernel
        problems.append(f"{len(good) - MAX_OPTIONS} options beyond the first {MAX_OPTIONS} dropped")
        good = good[:MAX_OPTIONS]
    return good


@dataclass(frozen=True)
class PermissionRequest:
    """What a permission handler is given: the recorded part and the tool call it is about.

    `tool_kind` is the assessed kind ("edit", "execute+read" when the content and the stated kind
    disagree, "unknown"); `problems` says why the policy did not decide (empty if it could have).
    """

    #: The request as the turn records it (title, options, and later its outcome).
    part: PermissionPart
    #: The assessed kind of the tool call.
    tool_kind: str
    #: The tool call the request is about, as the agent described it.
    tool_call: dict[str, Any]
    #: The session the request came from.
    session_id: str | None
    #: Why the policy did not decide (empty if it could have).
    problems: tuple[str, ...] = ()
    #: The subagent asking (a child session the agent exposed): its name, as the agent titled
    #: it (or its id). None when the session's agent asks for itself.
    subagent: str | None = None

    @property
    def options(self) -> list[dict[str, Any]]:
        """The options the agent offered, as it sent them (`optionId`, `name`, `kind`)."""
        return self.part.options


#: Returns the chosen option id, or None to reject. A handler that raises rejects too, and the
#: record says why (e.g. a TimeoutError when nobody answered in time).
PermissionHandler = Callable[[PermissionRequest], Awaitable[str | None]]
