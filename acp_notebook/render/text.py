"""The `text/plain` view: the answer as written, then one line per plan entry, tool call,
permission, unknown update and error, then the footer. For terminals, logs and `repr`."""

from __future__ import annotations

from collections.abc import Sequence

from ..protocol.elicitation import ElicitationPart
from ..protocol.items import DiffContent, TerminalContent
from ..protocol.notes import CompactionPart, NoticePart
from ..protocol.state import (
    ErrorPart,
    MessagePart,
    Part,
    PermissionPart,
    PlanPart,
    RawPart,
    SubagentPart,
    ToolCallPart,
)
from ..protocol.suggestions import SuggestionsPart
from ..protocol.turn import Transcript
from . import elicit_card, labels
from .diff import unified


def render_text(turn: Transcript) -> str:
    blocks: list[str] = []
    if turn.text.strip():
        blocks.append(turn.text.strip("\n"))
    record: list[str] = []
    if turn.plan:
        record.append("Plan:")
        for e in turn.plan:
            glyph, _ = labels.plan_status(e.status, over=not turn.live)
            prio = f" ({_one_line(e.priority)})" if e.priority else ""
            record.append(f"  {glyph} {_one_line(e.content)}{prio}")
    record += _lines(turn.parts, turn)
    if turn.stop_reason == "refusal":
        record.append(f"⛔ refused: {labels.REFUSAL}")
    if turn.error and turn.error not in {e.message for e in turn.errors}:
        record.append(f"✗ failed: {labels.RAISED if turn.raised else _one_line(turn.error)}")
    footer = labels.footer(turn)
    if turn.live and turn.stop_reason is None:
        footer = ["running…", *(p for p in footer if p != "running…")]
    if footer:
        record.append("— " + " · ".join(_one_line(p) for p in footer))
    if record:
        blocks.append("\n".join(record))
    return "\n\n".join(blocks)


def _lines(parts: Sequence[Part], turn: Transcript, depth: int = 0) -> list[str]:
    """One line per part that is no message nor the legacy plan (drawn above); a subagent's
    parts below its line, indented."""
    out: list[str] = []
    for p in parts:
        if isinstance(p, ToolCallPart):
            out.append(_tool_call(p, turn))
        elif isinstance(p, PermissionPart):
            title = _one_line(p.title) or "a tool call"
            out.append(f"🔐 permission: {title} → {labels.decision(p, live=turn.live)}")
        elif isinstance(p, ElicitationPart):
            out.append(elicit_card.text_line(p, turn.live))
        elif isinstance(p, RawPart):
            problem = f" ({_one_line(p.problem)})" if p.problem else ""
            out.append(f"❔ unknown update {_one_line(p.update_kind or '?')}{problem}")
        elif isinstance(p, ErrorPart) and labels.raised_here(turn, p.message):
            out.append(f"✗ failed: {labels.RAISED}")
        elif isinstance(p, ErrorPart):
            out.append(f"⚠ {p.level}: {_one_line(p.message)}")
        elif isinstance(p, NoticePart):
            more = f" — {_one_line(p.description)}" if p.description else ""
            heading = f"{labels.NOTICE[p.level]} ({_one_line(p.severity)})"
            out.append(f"{heading}: {_one_line(p.title)}{more}")
        elif isinstance(p, CompactionPart):
            error = f": {_one_line(p.error)}" if p.error else ""
            out.append(f"🗜 {labels.compaction(p.status, live=turn.live)}{error}")
        elif isinstance(p, PlanPart):
            out += _plan(p, turn)
        elif isinstance(p, SubagentPart):
            out += _subagent(p, turn, depth)
        elif isinstance(p, SuggestionsPart):
            out += [f"💡 suggested next: {_one_line(s)}" for s in p.suggestions]
        elif p.kind != "message":  # a kind newer than this view:
            out.append(f"• a {_one_line(p.kind)} part")
    return out


def _plan(p: PlanPart, turn: Transcript) -> list[str]:
    if p.plan_id is None:
        return []  # the legacy plan: drawn above the parts
    name = f"Plan {_one_line(p.plan_id)}"
    if p.removed:
        return [f"{name}: removed"]
    if p.markdown is not None:
        return [f"{name}: {_one_line(p.markdown)}"]
    lines = [f"{name}:"]
    for e in p.entries:
        glyph, _ = labels.plan_status(e.status, over=not turn.live)
        lines.append(f"  {glyph} {_one_line(e.content)}")
    return lines


def _subagent(p: SubagentPart, turn: Transcript, depth: int) -> list[str]:
    _, word = labels.subagent_state(p.state, p.stop_reason, live=turn.live)
    title = _one_line(p.title or p.session_id)
    lines = [f"🤖 subagent {title}: {word}"]
    answer = "".join(m.text for m in p.parts if isinstance(m, MessagePart) and m.role == "agent")
    if answer.strip():
        lines.append(f"  {_one_line(answer)}")
    if depth < 3:
        lines += [f"  {line}" for line in _lines(p.parts, turn, depth + 1)]
    return lines


def _tool_call(call: ToolCallPart, turn: Transcript) -> str:
    glyph, word = labels.tool_status(turn.call_status(call))
    title = _one_line(call.title) or _one_line(call.tool_kind)
    extra = tool_extras(call, turn, live=turn.live)
    more = f" ({', '.join(_one_line(x) for x in extra)})" if extra else ""
    return f"{glyph} {_one_line(call.tool_kind)}: {title} — {_one_line(word)}{more}"


def tool_extras(call: ToolCallPart, turn: Transcript, *, live: bool) -> list[str]:
    """What a one-line view adds to a tool call: its diffs' +/− counts, its commands' exits."""
    extra = []
    content = call.content_items
    diffs = [unified(c.path, c.old, c.new) for c in content if isinstance(c, DiffContent)]
    if diffs:
        extra.append(f"+{sum(d.added for d in diffs)} −{sum(d.removed for d in diffs)}")
    for c in content:
        if isinstance(c, TerminalContent) and (term := turn.terminals.get(c.terminal_id)):
            extra.append(labels.exit_status(term, live=live))
    extra.extend(f"→ {name}" for _, name in labels.cell_links(call))
    return extra


def _one_line(s: str) -> str:
    line = " ".join(s.split())
    return line if len(line) <= 200 else line[:199] + "…"
