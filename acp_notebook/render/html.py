"""The rich `text/html` view of a turn: parts in arrival order, then alerts and a footer.

Everything from the agent is escaped (here, in `htmlbits` and `cards`); its Markdown is
converted by `agentmd` (markdown-it-py, raw HTML off). The markup reads without the stylesheet:
statuses are words and glyphs, not colours, and a card is a `<details>` any renderer can open.

A finished turn's HTML carries the record's compact stylesheet (`style.RECORD_STYLE`, under
2 KB) once, so it reads as cards in a fresh page, nbconvert HTML and VS Code; a live view's HTML
does not (the live turn view ships the whole `style.CSS` as its widget's CSS). Where styles are
stripped (GitHub, JupyterLab's untrusted outputs) the record is plainer and as legible.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from ..protocol.elicitation import ElicitationPart
from ..protocol.notes import CompactionPart, NoticePart
from ..protocol.state import (
    ErrorPart,
    MessagePart,
    Part,
    PermissionPart,
    PlanEntry,
    PlanPart,
    RawPart,
    SubagentPart,
    ToolCallPart,
)
from ..protocol.suggestions import SuggestionsPart
from ..protocol.turn import Transcript
from . import elicit_card, labels
from .agentmd import inline, to_html
from .cards import permission, raw, tool_call
from .htmlbits import attr, block, json_details, note
from .style import MATH_OFF, RECORD_STYLE


def render_html(
    turn: Transcript, *, open_parts: frozenset[str] = frozenset(), styled: bool = False
) -> str:
    """The turn as HTML; the parts whose ids are in `open_parts` are drawn expanded (a live
    view's record keeps what its reader had opened); `styled`, with the record's stylesheet."""
    # MathJax (JupyterLab, nbconvert) typesets `$…$` in HTML outputs unless told not to: an
    # answer's dollars stay text, and a `\href` in them can never become a link.
    # Lean markup (see `htmlbits`): one safe word unquoted, other values in single quotes.
    out: list[str] = [f"<div class='acpnb-turn {MATH_OFF}' data-turn-id={attr(turn.turn_id)}>"]
    if styled:
        out.append(RECORD_STYLE)
    last = len(turn.parts) - 1
    for i, part in enumerate(turn.parts):
        html = render_part(part, turn, growing=turn.live and i == last)
        if part.part_id in open_parts:
            html = html.replace("<details ", "<details open ", 1)
        out.append(html)
    out.append(render_tail(turn))
    out.append("</div>")
    return "".join(out)


def render_part(part: Part, turn: Transcript, *, growing: bool = False) -> str:
    """One part's HTML (empty for a part with nothing to show yet). Never raises: a part that
    fails to render is a note, and the others are still drawn."""
    out: list[str] = []
    try:
        _part(out, part, turn, growing=growing)
    except Exception as exc:
        return note(f"(could not render this part: {type(exc).__name__})")
    return "".join(out)


def render_tail(turn: Transcript, *, running: bool = True) -> str:
    """What follows the parts: the turn's alerts (cancelled, refused, failed) and its footer
    (without `running`, no "running…" mark: a live view shows its own state)."""
    out: list[str] = []
    _turn_alerts(out, turn)
    _footer(out, turn, running=running)
    return "".join(out)


def _part(out: list[str], part: Part, turn: Transcript, *, growing: bool) -> None:
    draw = _DRAW.get(type(part))
    if draw is None:  # a part kind with no look of its own yet: shown as data
        out.append(json_details(f"{part.kind} part", part.to_json()))
    else:
        draw(out, part, turn, growing)


def _error(out: list[str], part: ErrorPart, turn: Transcript) -> None:
    if labels.raised_here(turn, part.message):
        _alert(out, "error", "✗ The turn failed:", labels.RAISED)
        return
    _alert(out, part.level, "⚠ Error" if part.level == "error" else "⚠ Warning", part.message)


def _multiline(s: str) -> str:
    return escape(s, quote=False).replace("\n", "<br>")


def _message(out: list[str], m: MessagePart, *, growing: bool) -> None:
    if m.role == "thought":
        if not m.text and not m.blocks:
            return
        label = "Thinking…" if growing else "Thoughts"
        words = m.text.count(" ") + m.text.count("\n") + 1  # about: split() costs more
        out.append(
            f"<details class=acpnb-thought><summary>💭 {label} "
            f"<span>(~{words:,} words)</span></summary><div>"  # muted, by place (style.py)
        )
        _text_and_blocks(out, m, growing=growing)
        out.append("</div></details>")
        return
    if not m.text.strip() and not m.blocks:
        return
    if m.role == "session":  # between the agent's sessions (a parent and its subagent)
        out.append("<div class=acpnb-muted>✉ a message between the agent's sessions</div>")
        out.append(f"<blockquote>{to_html(m.text)}</blockquote>")
        return
    if m.role == "user":
        # The person's own words (or the agent's replay of them): text, never Markdown, which
        # would join the lines of a Shift+Enter into one and read `<b>` or `*` as markup. Every
        # line break kept, as `<br>`, so it shows without a stylesheet too (GitHub, nbconvert).
        out.append("<div class=acpnb-user><strong>👤 You</strong>")
        out.append(f"<p>{_multiline(m.text.strip())}</p>")
        _blocks(out, m.blocks)
        out.append("</div>")
        return
    out.append("<div class=acpnb-answer>")
    _text_and_blocks(out, m, growing=growing)
    out.append("</div>")


def _text_and_blocks(out: list[str], m: MessagePart, *, growing: bool) -> None:
    """The message's text, each block (an image…) where it came in the text."""
    if not m.blocks:
        out.append(to_html(m.text, live=growing))
        return
    for run, b in m.pieces():
        if b is None:
            if run.strip():
                out.append(to_html(run, live=growing))
        else:
            if run.strip():
                out.append(to_html(run))
            out.append(block(b))


def _blocks(out: list[str], blocks: tuple[dict[Any, Any], ...] | list[dict[Any, Any]]) -> None:
    for b in blocks:
        out.append(block(b))


def _plan_part(out: list[str], p: PlanPart, *, live: bool) -> None:
    name = f" <code>{escape(p.plan_id)}</code>" if p.plan_id is not None else ""
    if p.removed:
        if not live:  # gone from the live view; the record says it was there
            out.append(f"<div class=acpnb-plan><strong>📋 Plan</strong>{name} ")
            out.append("<span class=acpnb-muted>removed</span></div>")
        return
    if p.markdown is not None:
        path = f" <span class=acpnb-muted>{escape(p.path)}</span>" if p.path else ""
        out.append(f"<div class=acpnb-plan><strong>📋 Plan</strong>{name}{path}")
        out.append(f"<div class=acpnb-answer>{to_html(p.markdown)}</div></div>")
        return
    _plan(out, p.entries, over=not live, name=name)


def _plan(out: list[str], entries: list[PlanEntry], *, over: bool, name: str = "") -> None:
    if not entries:
        return
    done = sum(1 for e in entries if e.status == "completed")
    out.append(
        f"<div class=acpnb-plan><strong>📋 Plan</strong>{name} "
        f"<span class=acpnb-muted>{done}/{len(entries)} done</span><ul>"
    )
    for e in entries:
        glyph, word = labels.plan_status(e.status, over=over)
        # The priority's badge is styled by where it stands (`li>small`), and only "high" has
        # a look of its own: no class for the others (a class each was 30 B an entry).
        prio = ""
        if e.priority:
            high = " class=acpnb-prio-high" if e.priority == "high" else ""
            prio = f" <small{high} title=priority>{escape(e.priority)}</small>"
        # The status's class only for ACP's three: `acpnb-` and any other word of the agent's
        # could name one of the renderer's classes (acpnb-meter, acpnb-alert, acpnb-user).
        # A step left unfinished when the turn ended is styled as no status (not in progress).
        unfinished = over and e.status != "completed"
        cls = (
            f" class=acpnb-{e.status}" if e.status in labels.PLAN_STATUS and not unfinished else ""
        )
        out.append(
            f"<li{cls}><span title={attr(word)}>{glyph}</span> {inline(e.content)}{prio}</li>"
        )
    out.append("</ul></div>")


def _notice(out: list[str], p: NoticePart) -> None:
    heading = f"{labels.NOTICE[p.level]}: {' '.join(p.title.split())}"
    if p.level != p.severity:  # a severity of the agent's own: its word, as data
        heading += f" ({p.severity})"
    _alert(out, "warning" if p.level == "warning" else p.level, heading, p.description or "")


def _compaction(out: list[str], p: CompactionPart, *, live: bool) -> None:
    words = labels.compaction(p.status, live=live)
    error = f": {escape(p.error)}" if p.error else ""
    summary = p.text
    blocks = [b for b in p.summary if b.get("type") != "text"]
    if not summary and not blocks:
        out.append(f"<div class=acpnb-compaction>🗜 <strong>{escape(words)}</strong>{error}</div>")
        return
    out.append(
        f"<details class=acpnb-compaction><summary>🗜 <strong>{escape(words)}</strong>{error} "
        "<span class=acpnb-muted>(its summary)</span></summary><div class=acpnb-answer>"
    )
    out.append(to_html(summary))
    _blocks(out, blocks)
    out.append("</div></details>")


def _subagent(out: list[str], p: SubagentPart, turn: Transcript) -> None:
    """A child session's sub-turn: a card with its title, state and description, then its own
    parts, each drawn as the turn's are (and keyed by id: the live view finds a child's
    permission request by it)."""
    glyph, word = labels.subagent_state(p.state, p.stop_reason, live=turn.live)
    title = escape(" ".join((p.title or p.session_id).split())[:300])
    opened = " open" if turn.live and p.state != "idle" else ""  # open while it works
    out.append(
        f"<details class=acpnb-subagent{opened}><summary>🤖 <strong>{title}</strong> "
        f"<span class=acpnb-muted>· <span title=state>{glyph}</span> {escape(word)}</span>"
    )
    if p.usage is not None and p.usage.cost_amount is not None:
        cost = labels.money(p.usage.cost_amount, p.usage.cost_currency)
        out.append(f" <span class=acpnb-muted>· {escape(cost)}</span>")
    out.append("</summary>")
    if p.description:
        out.append(f"<div class=acpnb-muted>{_multiline(p.description)}</div>")
    out.append("<div class=acpnb-subturn>")
    for child in p.parts:
        out.append(f"<div data-part={attr(child.part_id)}>{render_part(child, turn)}</div>")
    dropped = sum(p.dropped.values())
    if dropped:
        out.append(note(f"{dropped:,} more updates of this subagent were left out (limits)"))
    out.append("</div></details>")


def _suggestions(out: list[str], p: SuggestionsPart) -> None:
    """The prompts the agent suggests sending next, each a button: the live view puts its text
    into a new `%%agent` cell (the chat, into its input). Its text is the prompt, escaped."""
    if not p.suggestions:
        return  # withdrawn
    out.append("<div class=acpnb-suggestions><span class=acpnb-muted>💡 Suggested next:</span> ")
    for said in p.suggestions:
        out.append(
            f"<span class=acpnb-suggestion role=button title={attr(labels.SUGGESTION_TIP)}>"
            f"{escape(said)}</span>"
        )
    out.append("</div>")


def _alert(out: list[str], level: str, heading: str, message: str) -> None:
    cls = {"warning": "'acpnb-alert acpnb-warning'", "info": "'acpnb-alert acpnb-info'"}.get(
        level, "acpnb-alert"
    )
    body = f" {_multiline(message)}" if message else ""
    out.append(f"<div class={cls} role=alert><strong>{escape(heading)}</strong>{body}</div>")


def _turn_alerts(out: list[str], turn: Transcript) -> None:
    reason = turn.stop_reason
    if reason == "refusal":
        _alert(out, "error", "⛔ Refused.", labels.REFUSAL)
    elif reason == "cancelled":
        _alert(out, "info", "⏹ Cancelled.", "The turn was stopped before the agent finished.")
    elif reason in ("max_tokens", "max_turn_requests"):
        _alert(out, "warning", "⚠ Incomplete:", labels.STOP_REASONS[reason] + ".")
    if turn.error and turn.error not in {e.message for e in turn.errors}:
        shown = labels.RAISED if turn.raised else turn.error
        _alert(out, "error", "✗ The turn failed:", shown)


def _footer(out: list[str], turn: Transcript, *, running: bool = True) -> None:
    pieces: list[str] = []
    if turn.live and running:
        pieces.append("<span class=acpnb-running>◌ running…</span>")
    if turn.agent:
        pieces.append(f"<b>{escape(turn.agent)}</b>")
    if turn.model:  # as the live footer shows it (widgets/turn_view.py's head)
        pieces.append(escape(turn.model))
    if turn.title:
        pieces.append(escape(labels.session_title(turn.title)))
    if turn.note:
        pieces.append(f"<em>{escape(turn.note)}</em>")
    usage = turn.usage
    if usage is not None and (ctx := labels.context(usage)):
        frac = usage.fraction
        meter = ""
        if frac is not None:
            # A <meter> (0 to 1): past its `high` mark (80%) the browser draws its warning state
            # (style.py colours it); no title, the words after it say the same ("context 3% …").
            value = f"{min(1.0, max(0.0, frac)):.3f}".rstrip("0").rstrip(".").removeprefix("0")
            high = " high=.8" if float(value or 0) > 0.8 else ""  # the mark only where it warns
            meter = f"<meter value={value or 0}{high}></meter>"
        pieces.append(f"{meter}{escape(ctx)}")
    for piece in (labels.cost(turn), labels.tokens(turn)):
        if piece:
            pieces.append(escape(piece))
    if timing := labels.timing(turn):
        pieces.append(escape(timing))
    if turn.stop_reason is not None or not turn.live:
        reason = labels.stop_reason(turn)
        if reason:
            strong = reason != labels.STOP_REASONS["end_turn"]
            pieces.append(f"<b>{escape(reason)}</b>" if strong else escape(reason))
    if pieces:
        out.append(f"<footer>{' · '.join(pieces)}</footer>")


#: How each part kind is drawn, in arrival order: (out, part, turn, growing). A kind added to
#: the model gets its look here (a function here or in `cards`).
_DRAW: dict[type[Any], Callable[[list[str], Any, Transcript, bool], None]] = {
    MessagePart: lambda out, p, turn, growing: _message(out, p, growing=growing),
    ToolCallPart: lambda out, p, turn, growing: tool_call(out, p, turn),
    PermissionPart: lambda out, p, turn, growing: permission(out, p, turn.live),
    ElicitationPart: lambda out, p, turn, growing: elicit_card.html(out, p, turn.live),
    PlanPart: lambda out, p, turn, growing: _plan_part(out, p, live=turn.live),
    NoticePart: lambda out, p, turn, growing: _notice(out, p),
    CompactionPart: lambda out, p, turn, growing: _compaction(out, p, live=turn.live),
    SubagentPart: lambda out, p, turn, growing: _subagent(out, p, turn),
    SuggestionsPart: lambda out, p, turn, growing: _suggestions(out, p),
    RawPart: lambda out, p, turn, growing: raw(out, p),
    ErrorPart: lambda out, p, turn, growing: _error(out, p, turn),
}
