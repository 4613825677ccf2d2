"""What `%agent status` and `%agent sessions` show: escaped documents built from any values.

The facts come from the agent (modes, config options, commands, titles, usage): every value is
shown as text through `views`, and each list is cut at `MAX_ITEMS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..display import views
from ..display.views import Code, Doc, Strong, Value


def key(value: Any) -> str:
    return value if isinstance(value, str) else views.text(value)


MAX_ITEMS = 50  # modes, options or commands listed; an agent may send thousands


def status_doc(facts: dict[str, Any], mask: Callable[[str], str] = str) -> Doc:
    """The `%agent status` display of `_status_facts`; any values give a display, never an error."""
    info = _dict(facts.get("agent_info"))
    agent_name = info.get("title") or info.get("name")
    about = [
        " (",
        Value(agent_name),
        *((" ", Value(info.get("version"))) if info.get("version") else ()),
        ")",
    ]
    doc = Doc(mask).para(
        Strong(facts.get("session")),
        " — agent ",
        Code(facts.get("agent")),
        *(about if agent_name else ()),
        ", pid ",
        Value(facts.get("pid")),
    )
    title = facts.get("title")
    doc.item("session ", Code(facts.get("session_id")), *((": ", Value(title)) if title else ()))
    modes = _list_of(facts.get("modes"))
    doc.item(
        "mode: ",
        Code(facts.get("mode") or "none"),
        *((" (of ", *_joined([Value(m) for m in modes]), ")") if modes else ()),
    )
    for option in _list_of(facts.get("config_options"))[:MAX_ITEMS]:
        option = _dict(option)
        doc.item(
            Value(option.get("name") or option.get("id")),
            " (",
            Code(option.get("id")),
            "): ",
            Code(option.get("currentValue")),
        )
    _more(doc, facts.get("config_options"), "config options")
    usage = facts.get("usage")
    if usage is not None:
        doc.item(*_usage_pieces(_dict(usage)))
    commands = _list_of(facts.get("commands"))
    if commands:
        doc.item("commands: ", *_joined([Code(f"/{views.text(c)}") for c in commands[:MAX_ITEMS]]))
        _more(doc, commands, "commands")
    servers = _list_of(facts.get("mcp_servers"))
    doc.item("MCP servers: ", *(_joined([Code(s) for s in servers]) if servers else ["none"]))
    doc.item(
        "turns: ",
        Value(facts.get("turns")),
        " (one running)" if facts.get("running") is True else "",
    )
    return doc


def _usage_pieces(usage: dict[Any, Any]) -> list[Any]:
    used, size = usage.get("used"), usage.get("size")
    pct = views.percent(used, size)
    pieces: list[Any] = ["context: ", views.number(used), " / ", views.number(size), " tokens"]
    if pct:
        pieces.append(f" ({pct})")
    cost = usage.get("cost")
    if isinstance(cost, dict) and cost.get("amount") is not None:
        pieces += [", cost ", views.money(cost.get("amount"), cost.get("currency"))]
    return pieces


def _dict(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _list_of(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _joined(pieces: list[Any]) -> list[Any]:
    out: list[Any] = []
    for i, piece in enumerate(pieces[:MAX_ITEMS]):
        out += [", ", piece] if i else [piece]
    if len(pieces) > MAX_ITEMS:
        out.append(f", … {len(pieces) - MAX_ITEMS} more")
    return out


def _more(doc: Doc, items: Any, what: str) -> None:
    extra = len(_list_of(items)) - MAX_ITEMS
    if extra > 0:
        doc.item(f"… {extra} more {what}")


def sessions_doc(
    agent: str,
    sessions: list[Any],
    mask: Callable[[str], str] = str,
    where: str | None = None,
    more: bool = False,
) -> Doc:
    """The `%agent sessions` display: a table of what `session/list` returned, any values.
    `where`: the directory they were listed for (None: every directory); `more`: cut at -n."""
    doc = Doc(mask)
    place: list[Any] = [" in ", Code(where)] if where else [" in any directory"]
    if not sessions:
        return doc.para(Code(agent), " has no stored sessions", *place, ".")
    rows = []
    for s in sessions:
        s = _dict(s)
        rows.append(
            [
                Code(s.get("sessionId")),
                Value(s.get("title")),
                Value(s.get("updatedAt")),
                Code(s.get("cwd")),
            ]
        )
    doc.para("Sessions of ", Code(agent), *place, ":").table(
        ["id", "title", "updated", "cwd"], rows
    )
    if more:
        doc.para(f"The first {len(rows)} are shown: more with -n N (the agent pages them).")
    return doc
