"""The `text/markdown` view: the answer, then a compact record of the turn below a rule.

Read on GitHub, in nbconvert, in VS Code, and in JupyterLab, which renders it with raw HTML on
and, for trusted output, no sanitiser. So nothing of the agent's goes out as Markdown: its answer
is parsed and written back (`mdwrite`), every other string is escaped (`mdsafe`), and code,
diffs and terminal output are `<pre>` blocks around character references.
"""

from __future__ import annotations

from functools import lru_cache

from ..protocol.elicitation import ElicitationPart
from ..protocol.items import DiffContent, TerminalContent
from ..protocol.state import PermissionPart, ToolCallPart
from ..protocol.terminals import Terminal
from ..protocol.turn import Transcript
from . import clip, elicit_card, labels, mdsafe
from .diff import unified
from .mdwrite import inline, plain, to_markdown
from .style import MATH_OFF

#: The part kinds drawn here (messages as the answer; others have a line of their kind).
_DRAWN = frozenset({"message", "plan", "tool_call", "permission", "elicitation", "raw", "error"})
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


def _record(turn: Transcript) -> list[str]:
    out: list[str] = []
    if turn.plan:
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
        out.append("\n".join(lines))

    kinds = ToolCallPart | PermissionPart | ElicitationPart
    actions = [p for p in turn.parts if isinstance(p, kinds)]
    if actions:
        lines = ["**Tool calls**", ""]
        for p in actions:
            try:
                if isinstance(p, ToolCallPart):
                    lines.extend(_tool_call(p, turn))
                elif isinstance(p, PermissionPart):
                    lines.append(_permission(p, turn))
                else:
                    lines.append(elicit_card.markdown_line(p, turn.live))
            except Exception as exc:  # nor one tool call the others
                lines.append(f"- (could not render this part: {type(exc).__name__})")
        out.append("\n".join(lines))

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
    alerts = [
        (("⚠ **Error:** " if e.level == "error" else "⚠ **Warning:** ") + mdsafe.inline(e.message))
        for e in turn.errors
    ]
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
