"""The `text/markdown` view: the answer, then a compact record of the turn below a rule.

Read on GitHub, in nbconvert and in VS Code, so it uses plain CommonMark/GFM only (no HTML).
The agent's text goes through `mdsafe`: raw HTML and unsafe links defused.
"""

from __future__ import annotations

import re
from functools import lru_cache

from . import clip, labels, mdsafe
from .diff import unified
from .model import DiffContent, Permission, Terminal, TerminalContent, ToolCall, Turn

#: The Markdown view is a summary: diffs and terminal output are clipped harder than in HTML.
DIFF_LINES = 80
TERMINAL_LINES = 40
_BACKTICKS = re.compile(r"`{3,}")


def render_markdown(turn: Turn) -> str:
    blocks: list[str] = []
    if turn.text.strip():
        blocks.append(mdsafe.neutralize(turn.text).rstrip())
    record = _record(turn)
    if record:
        if blocks:
            blocks.append("---")
        blocks.extend(record)
    return "\n\n".join(blocks) + "\n"


def _record(turn: Turn) -> list[str]:
    out: list[str] = []
    if turn.plan:
        done = sum(1 for e in turn.plan if e.status == "completed")
        lines = [f"**Plan** ({done}/{len(turn.plan)} done)", ""]
        for e in turn.plan:
            box = "x" if e.status == "completed" else " "
            glyph, word = labels.plan_status(e.status)
            state = ("" if e.status in ("completed", "pending")
                     else f" {glyph} *{mdsafe.inline(word)}*")
            prio = f" · {mdsafe.inline(e.priority)}" if e.priority else ""
            lines.append(f"- [{box}] {mdsafe.inline(e.content) or '…'}{state}{prio}")
        out.append("\n".join(lines))

    actions = [p for p in turn.parts if isinstance(p, ToolCall | Permission)]
    if actions:
        lines = ["**Tool calls**", ""]
        for p in actions:
            lines.extend(_tool_call(p, turn) if isinstance(p, ToolCall) else [_permission(p, turn)])
        out.append("\n".join(lines))

    for r in turn.raws:
        problem = f" ({mdsafe.inline(r.problem)})" if r.problem else ""
        out.append(f"❔ Unknown update `{_code(r.kind)}`{problem}: kept in the transcript.")
    alerts = [(("⚠ **Error:** " if e.level == "error" else "⚠ **Warning:** ")
               + mdsafe.inline(e.message)) for e in turn.errors]
    if turn.stop_reason == "refusal":
        alerts.append(f"⛔ **Refused.** {labels.REFUSAL}")
    elif turn.stop_reason == "cancelled":
        alerts.append("⏹ **Cancelled.** The turn was stopped before the agent finished.")
    elif turn.stop_reason in ("max_tokens", "max_turn_requests"):
        alerts.append(f"⚠ **Incomplete:** {labels.STOP_REASONS[turn.stop_reason]}.")
    if turn.error and turn.error not in {e.message for e in turn.errors}:
        alerts.append(f"✗ **The turn failed:** {mdsafe.inline(turn.error)}")
    out.extend(f"> {a}" for a in alerts)

    footer = labels.footer(turn)
    if footer:
        out.append("*" + " · ".join(mdsafe.inline(p) for p in footer) + "*")
    return out


def _tool_call(call: ToolCall, turn: Turn) -> list[str]:
    glyph, word = labels.tool_status(call.status)
    title = mdsafe.inline(call.title) or mdsafe.inline(call.kind)
    word = mdsafe.inline(word)
    extra = ""
    diffs = [unified(c.path, c.old, c.new) for c in call.content if isinstance(c, DiffContent)]
    if diffs:
        extra = f" (+{sum(d.added for d in diffs)} −{sum(d.removed for d in diffs)})"
    lines = [f"- {glyph} {labels.kind_icon(call.kind)} {title} — {word}{extra}"]
    for c in call.content:
        if isinstance(c, DiffContent):
            lines.extend(_diff_block(c.path, c.old, c.new))
        elif isinstance(c, TerminalContent):
            term = turn.terminals.get(c.terminal_id)
            if term is not None:
                lines.extend(_terminal_block(term, turn.live))
    return lines


@lru_cache(maxsize=64)
def _terminal_block(term: Terminal, live: bool) -> tuple[str, ...]:
    clipped = clip.tail(term.output, TERMINAL_LINES, 8_000)
    shown = clip.terminal_text(clipped.text)
    command = f"$ {term.command}\n" if term.command else ""
    return (*_fenced(command + shown, "", clipped.note),
            f"  {mdsafe.inline(labels.exit_status(term, live=live))}")


@lru_cache(maxsize=256)
def _diff_block(path: str, old: str | None, new: str) -> tuple[str, ...]:
    d = unified(path, old, new)
    if not d.lines:
        return ()
    body = "\n".join(d.lines[:DIFF_LINES])
    note = f"… {len(d.lines) - DIFF_LINES:,} more lines" if len(d.lines) > DIFF_LINES else ""
    return tuple(_fenced(body, "diff", note))


def _permission(p: Permission, turn: Turn) -> str:
    title = mdsafe.inline(p.title) or "a tool call"
    return f"- 🔐 Permission: {title} → **{mdsafe.inline(labels.decision(p, live=turn.live))}**"


def _fenced(body: str, lang: str, note: str) -> list[str]:
    """A fenced block nested in a list item; the fence outlasts any backtick run inside."""
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(body)), default=2)
    fence = "`" * (longest + 1)
    lines = [f"  {fence}{lang}", *("  " + line for line in body.split("\n")), f"  {fence}"]
    if note:
        lines.append(f"  {note}")
    return lines


def _code(s: str) -> str:
    return s.replace("`", "'").replace("\n", " ")
