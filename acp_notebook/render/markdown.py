"""The `text/markdown` view: the answer, then a compact record of the turn below a rule.

Read on GitHub, in nbconvert, in VS Code, and in JupyterLab, which renders it with raw HTML on
and, for trusted output, no sanitiser. So nothing of the agent's goes out as Markdown: its answer
is parsed and written back (`mdwrite`), every other string is escaped (`mdsafe`), and code,
diffs and terminal output are `<pre>` blocks around character references.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ..protocol.elicitation import ElicitationPart
from ..protocol.items import DiffContent, TerminalContent
from ..protocol.notes import CompactionPart, NoticePart
from ..protocol.state import (
    ErrorPart,
    MessagePart,
    Part,
    PermissionPart,
    PlanPart,
    SubagentPart,
    ToolCallPart,
)
from ..protocol.suggestions import SuggestionsPart
from ..protocol.terminals import Terminal
from ..protocol.turn import Transcript
from . import clip, elicit_card, labels, mdsafe
from .diff import unified
from .mdwrite import inline, plain, to_markdown
from .style import MATH_OFF

#: The part kinds drawn here (messages as the answer; others have a line of their kind).
_DRAWN = frozenset(
    {
        "message",
        "plan",
        "tool_call",
        "permission",
        "elicitation",
        "raw",
        "error",
        "notice",
        "compaction",
        "subagent",
        "suggestions",
    }
)
#: The Markdown view is a summary: diffs and terminal output are clipped harder than in HTML.
DIFF_LINES = 80
TERMINAL_LINES = 40


def render_markdown(turn: Transcript) -> str:
    blocks: list[str] = []
    if turn.text.strip():
        try:
            blocks.append(to_markdown(turn.text))
        except Exception:  # the answer that fails to render must not blank the record
            blocks.append(plain(turn.text))
    record = _record(turn)
    if record:
        if blocks:
            blocks.append("---")
        blocks.extend(record)
    # JupyterLab typesets the rendered Markdown's text with MathJax: a `$` escaped as a character
    # reference is a `$` again in the page. The wrapper is HTML of ours, and the Markdown inside it
    # (set off by blank lines) is parsed as Markdown by CommonMark renderers.
    return f'<div class="{MATH_OFF}">\n\n' + "\n\n".join(blocks) + "\n\n</div>\n"


def _error_alert(turn: Transcript, e: ErrorPart) -> str:
    if labels.raised_here(turn, e.message):  # the cell's error output says it, once
        return f"✗ **The turn failed:** {labels.RAISED}"
    return ("⚠ **Error:** " if e.level == "error" else "⚠ **Warning:** ") + mdsafe.inline(e.message)


def _record(turn: Transcript) -> list[str]:
    out: list[str] = []
    if turn.plan:
        out.append(_legacy_plan(turn))

    out.extend(_plan_by_id(p, turn) for p in turn.parts if isinstance(p, PlanPart) and p.plan_id)
    actions = _actions(turn.parts, turn)
    if actions:
        out.append("\n".join(["**Tool calls**", "", *actions]))
    subagents = [p for p in turn.parts if isinstance(p, SubagentPart)]
    if subagents:
        lines = ["**Subagents**", ""]
        for sub in subagents:
            lines.extend(_subagent(sub, turn))
        out.append("\n".join(lines))
    for p in turn.parts:
        if isinstance(p, SuggestionsPart) and p.suggestions:
            lines = ["**Suggested next**", ""]
            lines += [f"- {mdsafe.inline(' '.join(s.split()))}" for s in p.suggestions]
            out.append("\n".join(lines))
        if isinstance(p, CompactionPart):
            error = f": {mdsafe.inline(p.error)}" if p.error else ""
            out.append(f"🗜 *{mdsafe.inline(labels.compaction(p.status, live=turn.live))}*{error}")

    for r in turn.raws:
        problem = f" ({mdsafe.inline(r.problem)})" if r.problem else ""
        out.append(
            f"❔ Unknown update {mdsafe.code(r.update_kind or '?')}{problem}: kept in the "
            "transcript."
        )
    out.extend(
        f"• A {mdsafe.code(p.kind)} part: kept in the transcript."
        for p in turn.parts
        if p.kind not in _DRAWN
    )
    alerts = [_error_alert(turn, e) for e in turn.errors]
    alerts += [
        f"{labels.NOTICE[n.level]}: **{mdsafe.inline(n.title)}**"
        + (f" — {mdsafe.inline(n.description)}" if n.description else "")
        for n in turn.parts
        if isinstance(n, NoticePart)
    ]
    if turn.stop_reason == "refusal":
        alerts.append(f"⛔ **Refused.** {labels.REFUSAL}")
    elif turn.stop_reason == "cancelled":
        alerts.append("⏹ **Cancelled.** The turn was stopped before the agent finished.")
    elif turn.stop_reason in ("max_tokens", "max_turn_requests"):
        alerts.append(f"⚠ **Incomplete:** {labels.STOP_REASONS[turn.stop_reason]}.")
    if turn.error and turn.error not in {e.message for e in turn.errors}:
        shown = labels.RAISED if turn.raised else mdsafe.inline(turn.error)
        alerts.append(f"✗ **The turn failed:** {shown}")
    out.extend(f"> {a}" for a in alerts)

    footer = labels.footer(turn)
    if footer:
        out.append("*" + " · ".join(mdsafe.inline(p) for p in footer) + "*")
    return out


def _legacy_plan(turn: Transcript) -> str:
    """The legacy plan (`turn.plan`, the one checklist of an agent without plan ids)."""
    done = sum(1 for e in turn.plan if e.status == "completed")
    lines = [f"**Plan** ({done}/{len(turn.plan)} done)", ""]
    for e in turn.plan:
        box = "x" if e.status == "completed" else " "
        glyph, word = labels.plan_status(e.status, over=not turn.live)
        # The box says done or not; a word only for what it cannot say (a step running).
        shown = e.status in ("completed", "pending") or word == labels.NOT_DONE[1]
        state = "" if shown else f" {glyph} *{mdsafe.inline(word)}*"
        prio = f" · {mdsafe.inline(e.priority)}" if e.priority else ""
        lines.append(f"- [{box}] {inline(e.content) or '…'}{state}{prio}")
    return "\n".join(lines)


def _actions(parts: Sequence[Part], turn: Transcript) -> list[str]:
    """The list items of the tool calls, permission requests and questions among `parts`."""
    lines: list[str] = []
    for p in parts:
        try:
            if isinstance(p, ToolCallPart):
                lines.extend(_tool_call(p, turn))
            elif isinstance(p, PermissionPart):
                lines.append(_permission(p, turn))
            elif isinstance(p, ElicitationPart):
                lines.append(elicit_card.markdown_line(p, turn.live))
        except Exception as exc:  # nor one tool call the others
            lines.append(f"- (could not render this part: {type(exc).__name__})")
    return lines


def _plan_by_id(p: PlanPart, turn: Transcript) -> str:
    name = f"**Plan** {mdsafe.code(p.plan_id or '?')}"
    if p.removed:
        return f"{name} (removed)"
    if p.markdown is not None:
        return f"{name}\n\n{_quoted(p.markdown)}"
    done = sum(1 for e in p.entries if e.status == "completed")
    lines = [f"{name} ({done}/{len(p.entries)} done)", ""]
    for e in p.entries:
        box = "x" if e.status == "completed" else " "
        lines.append(f"- [{box}] {inline(e.content) or '…'}")
    return "\n".join(lines)


def _quoted(markdown: str) -> str:
    """The agent's Markdown, written back safe (`mdwrite`), as a block quote."""
    try:
        body = to_markdown(markdown)
    except Exception:
        body = plain(markdown)
    return "\n".join(f"> {line}" if line else ">" for line in body.splitlines())


def _subagent(p: SubagentPart, turn: Transcript) -> list[str]:
    _, word = labels.subagent_state(p.state, p.stop_reason, live=turn.live)
    title = inline(" ".join((p.title or p.session_id).split())) or mdsafe.code(p.session_id)
    lines = [f"- 🤖 **{title}** — {mdsafe.inline(word)}"]
    if p.description:
        lines.append(f"  {mdsafe.inline(' '.join(p.description.split()))}")
    answer = "".join(m.text for m in p.parts if isinstance(m, MessagePart) and m.role == "agent")
    if answer.strip():
        lines += ["", *(f"  {line}" for line in _quoted(answer).splitlines()), ""]
    lines += [f"  {line}" for line in _actions(p.parts, turn)]
    return lines


def _tool_call(call: ToolCallPart, turn: Transcript) -> list[str]:
    glyph, word = labels.tool_status(turn.call_status(call))
    title = inline(call.title) or mdsafe.inline(call.tool_kind)
    word = mdsafe.inline(word)
    extra = ""
    content = call.content_items
    diffs = [unified(c.path, c.old, c.new) for c in content if isinstance(c, DiffContent)]
    if diffs:
        extra = f" (+{sum(d.added for d in diffs)} −{sum(d.removed for d in diffs)})"
    lines = [f"- {glyph} {labels.kind_icon(call.tool_kind)} {title} — {word}{extra}"]
    terminals: set[str] = set()  # drawn here: each once, in its first card (`cards.py`)
    for c in content:
        if isinstance(c, DiffContent):
            lines.extend(_diff_block(c.path, c.old, c.new))
        elif isinstance(c, TerminalContent) and c.terminal_id not in terminals:
            terminals.add(c.terminal_id)
            term = turn.terminals.get(c.terminal_id)
            if term is not None and turn.draws_terminal(call, c.terminal_id):
                lines.extend(_terminal_block(term, turn.live))
    lines.extend(f"  - ↪ {mdsafe.inline(name)}" for _, name in labels.cell_links(call))
    return lines


@lru_cache(maxsize=64)
def _terminal_block(term: Terminal, live: bool) -> tuple[str, ...]:
    clipped = clip.tail(term.output, TERMINAL_LINES, 8_000)
    shown = clip.terminal_text(clipped.text)
    command = f"$ {clip.visible(term.command)}\n" if term.command else ""
    return (
        *_fenced(command + shown, "", clipped.note),
        f"  {mdsafe.inline(labels.exit_status(term, live=live))}",
    )


@lru_cache(maxsize=256)
def _diff_block(path: str, old: str | None, new: str) -> tuple[str, ...]:
    d = unified(path, old, new)
    if not d.lines:
        return ()
    body = "\n".join(d.lines[:DIFF_LINES])
    note = f"… {len(d.lines) - DIFF_LINES:,} more lines" if len(d.lines) > DIFF_LINES else ""
    return tuple(_fenced(body, "diff", note))


def _permission(p: PermissionPart, turn: Transcript) -> str:
    title = inline(p.title) or "a tool call"
    return f"- 🔐 Permission: {title} → **{mdsafe.inline(labels.decision(p, live=turn.live))}**"


def _fenced(body: str, lang: str, note: str) -> list[str]:
    """A preformatted block nested in a list item (`mdsafe.pre`: nothing in it is markup)."""
    lines = [f"  {line}" if line else "" for line in mdsafe.pre(body, lang)]
    if note:
        lines.append(f"  {mdsafe.inline(note)}")
    return lines
