"""What the `%agent` commands show: status, sessions, the wire log, a revert, the logins.

Each is an escaped document (`views.Doc`) built from any values: the facts come from the agent
(modes, config options, commands, titles, usage, the messages it sent, the paths and reasons of a
revert), so every value is shown as text through `views`, masked, and bounded: each list is cut
at `MAX_ITEMS`; `%agent log` clips long strings and cuts lists and nesting, each message drawn
as escaped preformatted text (`views.Doc.pre`); `%agent revert` shows each file's fate, the diff
of what changed on disk, and what checkpoints never cover.
"""

from __future__ import annotations

import datetime
import json
import shlex
from collections.abc import Callable
from typing import Any

from ..client import auth
from ..client.serving.checkpoints import RevertResult
from ..display import views
from ..display.views import Code, Doc, Strong, Value
from ..kernel_tools.notebook_undo import CellReverted
from ..protocol.limits import bounded, clip_text
from ..protocol.wirelog import WireEntry
from ..render.diff import unified


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
    _how_it_goes_on(doc, facts)
    return doc


def _how_it_goes_on(doc: Doc, facts: dict[str, Any]) -> None:
    """The status's last items: the system prompt, what a cell run again does, the turns."""
    prompt = facts.get("system_prompt")
    doc.item(
        "system prompt: ",
        *(["appended: ", Value(prompt)] if isinstance(prompt, str) and prompt else ["none"]),
    )
    if "forks" in facts:
        story = facts.get("story")
        doc.item(
            "cells run again: ",
            f"take their turn's place (forks; {story} cells in the story)"
            if facts.get("forks") is True
            else "added at the end (the agent cannot fork)",
        )
    doc.item(
        "turns: ",
        Value(facts.get("turns")),
        " (one running)" if facts.get("running") is True else "",
    )


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


STRING_CLIP = 200  # characters shown of one string value
ITEMS_CLIP = 20  # items shown of one list or object
DEPTH_CLIP = 8  # nesting shown
RAW_CLIP = 4000  # characters shown of one raw line
LOG_CHARS = 16_000  # characters of JSON shown of one message (as the wire log keeps)


def log_doc(
    agent: str, entries: list[WireEntry], n: int, raw: bool, mask: Callable[[str], str]
) -> Doc:
    doc = Doc(mask)
    if not entries:
        return doc.para("No JSON-RPC messages with agent ", Code(agent), " in this kernel yet.")
    doc.para(
        f"The last {n} JSON-RPC messages each way with agent ",
        Code(agent),
        ": ← from the agent, → to it; secrets masked, long values clipped"
        + (", each line as sent" if raw else "")
        + ".",
    )
    for entry in entries:
        doc.pre(f"{_head(entry)}\n{_body(entry, raw)}")
    return doc


def _head(entry: WireEntry) -> str:
    at = datetime.datetime.fromtimestamp(entry.at).strftime("%H:%M:%S.%f")[:-3]
    cut = f" ({entry.size:,} characters, clipped)" if entry.size > RAW_CLIP else ""
    return f"{at} {entry.summary()}{cut}"


def _body(entry: WireEntry, raw: bool) -> str:
    if raw:
        return clip_text(entry.text, RAW_CLIP)
    message = entry.message()
    if isinstance(message, str):  # not JSON (or cut by the log's own clip)
        return clip_text(message, RAW_CLIP)
    shown, _ = bounded(message, LOG_CHARS, string=STRING_CLIP, items=ITEMS_CLIP, depth=DEPTH_CLIP)
    return json.dumps(shown, indent=1, ensure_ascii=False)


MAX_DIFF_LINES = 400  # per file; a revert of a large file shows its head


def revert_doc(result: RevertResult, session: str, mask: Callable[[str], str] = str) -> Doc:
    """The display of one revert of `session`'s turn."""
    doc = Doc(mask).para(
        "Revert of turn ", Code(result.turn_id), " of session ", Code(session), ":"
    )
    for each in result.files:
        doc.item(
            Code(each.path), f": {each.action}", *((f" ({each.reason})",) if each.reason else ())
        )
    for each in result.files:
        if each.action not in ("restored", "deleted") or each.current == each.restored:
            continue
        diff = unified(each.path, each.current, each.restored or "")
        lines = list(diff.lines[:MAX_DIFF_LINES])
        if len(diff.lines) > MAX_DIFF_LINES:
            lines.append(f"… {len(diff.lines) - MAX_DIFF_LINES} more lines")
        doc.pre("\n".join(lines))
    if result.refused:
        doc.para(
            "Refused files were left as they are; ",
            Code(f"%agent revert {result.turn_id} --force"),
            " overwrites those changed since the turn, never a symbolic link (nor a folder "
            "that became one) or a protected file.",
        )
    return doc.para(result.note)


def cells_revert_doc(
    reverts: list[CellReverted], turn_id: str, session: str, mask: Callable[[str], str] = str
) -> Doc:
    """The display of one revert of the notebook cells `session`'s turn inserted or edited."""
    doc = Doc(mask).para(
        "Revert of the notebook cells of turn ", Code(turn_id), " of session ", Code(session), ":"
    )
    for each in reverts:
        doc.item(
            "cell ",
            Code(each.cell_id),
            f": {each.action}",
            *((f" ({each.reason})",) if each.reason else ()),
        )
    if any(each.action == "refused" for each in reverts):
        doc.para(
            "Refused cells were left as they are; ",
            Code(f"%agent revert {turn_id} --force"),
            " reverts those changed since the turn too (never a running cell).",
        )
    return doc


def methods_doc(agent: str, offered: list[auth.Offered], mask: Callable[[str], str]) -> Doc:
    """`%agent auth` without a method: the agent's ways to log in, and what each runs (whole).
    Method ids, names, descriptions and command lines are the agent's: escaped, masked."""
    doc = Doc(mask)
    if not offered:
        return doc.para("Agent ", Code(agent), " offers no authentication methods.")
    doc.para("Agent ", Code(agent), " offers these ways to log in:")
    rows = []
    for way in offered:
        run = Code(f"%agent auth {way.method_id} -a {shlex.quote(agent)}")
        what: Any = "the command below" if way.runs else f"({way.note})" if way.note else ""
        rows.append([Code(way.method_id), way.name, run, what or "one request"])
    doc.table(["method", "name", "run", "what it runs"], rows)
    for way in offered:
        if way.runs:  # whole: a cell of the table is one bounded line, which hid its end
            doc.para(Code(way.method_id), " runs (a terminal login, with these variables):")
            doc.pre(way.runs)
    if any(way.runs for way in offered):
        doc.para("A terminal login runs here without input; one that asks questions must be run")
        doc.para("in a terminal instead (the command above), then the agent restarted.")
    return doc
