"""The rich `text/html` view of a turn: parts in arrival order, then alerts and a footer.

Everything from the agent is escaped here or by `minimd`. The markup reads without the stylesheet
(GitHub strips it): statuses are words and glyphs, not colours alone.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

from . import clip, labels
from .diff import unified
from .jsondump import dump
from .minimd import inline, to_html
from .model import (
    BlockContent,
    DiffContent,
    Error,
    Message,
    Permission,
    Plan,
    PlanItem,
    Raw,
    TerminalContent,
    TextContent,
    ToolCall,
    Turn,
    mapping,
    text,
)
from .style import STYLE
from .urls import safe_url

_CLASS_SAFE = re.compile(r"[^a-z0-9_]")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*\Z")
_MARKDOWNISH = re.compile(r"^ {0,3}(?:#{1,6} |```|~~~|[-*+] \S|\d{1,3}[.)] \S|> |\|.*\|)"
                          r"|\*\*\S|\]\(", re.M)
_INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def render_html(turn: Turn) -> str:
    out: list[str] = [f'<div class="acpnb-turn" data-turn-id="{escape(turn.turn_id)}">', STYLE]
    last = len(turn.parts) - 1
    for i, part in enumerate(turn.parts):
        if isinstance(part, Message):
            _message(out, part, thinking=turn.live and i == last)
        elif isinstance(part, ToolCall):
            _tool_call(out, part, turn)
        elif isinstance(part, Permission):
            _permission(out, part, turn.live)
        elif isinstance(part, Plan):
            _plan(out, part.entries)
        elif isinstance(part, Raw):
            _raw(out, part)
        elif isinstance(part, Error):
            _alert(out, part.level, "⚠ Error" if part.level == "error" else "⚠ Warning",
                   part.message)
    _turn_alerts(out, turn)
    _footer(out, turn)
    out.append("</div>")
    return "".join(out)


def _cls(value: str) -> str:
    return _CLASS_SAFE.sub("", value.lower())[:40] or "other"


def _multiline(s: str) -> str:
    return escape(s, quote=False).replace("\n", "<br>\n")


# -- messages -----------------------------------------------------------------------------------


def _message(out: list[str], m: Message, *, thinking: bool) -> None:
    if m.role == "thought":
        if not m.text and not m.blocks:
            return
        label = "Thinking…" if thinking else "Thoughts"
        words = len(m.text.split())
        out.append(f'<details class="acpnb-thought"><summary>💭 {label} '
                   f'<span class="acpnb-muted">({words:,} words)</span></summary><div>')
        out.append(to_html(m.text))
        _blocks(out, m.blocks)
        out.append("</div></details>")
        return
    cls = "acpnb-user" if m.role == "user" else "acpnb-answer"
    out.append(f'<div class="{cls}">')
    if m.role == "user":
        out.append("<strong>👤 You</strong>")
    out.append(to_html(m.text))
    _blocks(out, m.blocks)
    out.append("</div>")


def _blocks(out: list[str], blocks: tuple[dict[Any, Any], ...] | list[dict[Any, Any]]) -> None:
    for block in blocks:
        out.append(_block(block))


def _block(b: dict[Any, Any]) -> str:
    """A non-text ACP content block (image, audio, resource link, embedded resource)."""
    kind = text(b.get("type"))
    mime = text(b.get("mimeType"))
    if kind == "text":
        return f'<div>{to_html(text(b.get("text")))}</div>'
    if kind == "image":
        data = b.get("data")
        if (mime in _INLINE_IMAGES and isinstance(data, str) and 0 < len(data) < 8_000_000
                and _BASE64.match(data)):
            return (f'<div><img alt="image from the agent" style="max-width:100%" '
                    f'src="data:{mime};base64,{escape("".join(data.split()))}"></div>')
        return f'<div class="acpnb-note">🖼 image {escape(mime)}</div>'
    if kind == "audio":
        return f'<div class="acpnb-note">🔊 audio {escape(mime)}</div>'
    if kind == "resource_link":
        uri = text(b.get("uri"))
        name = text(b.get("name")) or text(b.get("title")) or uri
        return f'<div>🔗 {_link(uri, name)} <code>{escape(uri)}</code></div>'
    if kind == "resource":
        res = mapping(b.get("resource"))
        uri = text(res.get("uri"))
        body = res.get("text")
        if isinstance(body, str):
            clipped = clip.head(body, clip.TEXT_LINES)
            return (f'<details><summary>📎 <code>{escape(uri)}</code></summary>'
                    f'<pre>{escape(clipped.text, quote=False)}</pre>{_note(clipped.note)}'
                    f'</details>')
        return f'<div class="acpnb-note">📎 <code>{escape(uri)}</code> {escape(mime)}</div>'
    return _json_details(f"content block {kind or '?'}", b)


def _link(url: str, label: str) -> str:
    safe = safe_url(url)
    if not safe or not safe.lower().startswith(("http://", "https://")):
        return escape(label, quote=False)
    return (f'<a href="{escape(safe)}" target="_blank" rel="noopener noreferrer nofollow">'
            f'{escape(label, quote=False)}</a>')


# -- plan ---------------------------------------------------------------------------------------


def _plan(out: list[str], entries: tuple[PlanItem, ...]) -> None:
    if not entries:
        return
    done = sum(1 for e in entries if e.status == "completed")
    out.append(f'<div class="acpnb-plan"><strong>📋 Plan</strong> '
               f'<span class="acpnb-muted">{done}/{len(entries)} done</span><ul>')
    for e in entries:
        glyph, word = labels.plan_status(e.status)
        prio = ""
        if e.priority:
            prio = (f' <span class="acpnb-prio acpnb-prio-{_cls(e.priority)}" '
                    f'title="priority">{escape(e.priority)}</span>')
        out.append(f'<li class="acpnb-{_cls(e.status)}"><span title="{escape(word)}">{glyph}'
                   f'</span> {inline(e.content)}{prio}</li>')
    out.append("</ul></div>")


# -- tool calls ---------------------------------------------------------------------------------


def _tool_call(out: list[str], call: ToolCall, turn: Turn) -> None:
    glyph, word = labels.tool_status(call.status)
    status_cls = _cls(call.status)
    diffs = [c for c in call.content if isinstance(c, DiffContent)]
    is_open = (call.status == "failed" or bool(diffs)
               or any(isinstance(c, TerminalContent) for c in call.content))
    title = inline(" ".join(call.title.split())) if call.title.strip() else escape(call.kind)
    stats = ""
    if diffs:
        added = removed = 0
        for d in diffs:
            u = unified(d.path, d.old, d.new)
            added, removed = added + u.added, removed + u.removed
        stats = f' <span class="acpnb-muted">+{added} −{removed}</span>'
    out.append(f'<details class="acpnb-tool acpnb-tool-{status_cls}"{" open" if is_open else ""}>'
               f'<summary><span class="acpnb-kind" title="{escape(call.kind)}">'
               f'{labels.kind_icon(call.kind)}</span> {title} '
               f'<span class="acpnb-badge acpnb-st-{status_cls}">{glyph} {escape(word)}</span>'
               f'{stats}</summary>')
    if call.locations:
        locs = ", ".join(
            f"<code>{escape(loc.path)}{f':{loc.line}' if loc.line is not None else ''}</code>"
            for loc in call.locations[:20])
        more = f" … {len(call.locations) - 20} more" if len(call.locations) > 20 else ""
        out.append(f'<div class="acpnb-locs">📄 {locs}{more}</div>')
    for c in call.content:
        if isinstance(c, TextContent):
            _tool_text(out, c.text)
        elif isinstance(c, DiffContent):
            _diff(out, c)
        elif isinstance(c, TerminalContent):
            _terminal(out, c.terminal_id, turn)
        elif isinstance(c, BlockContent):
            out.append(_block(c.block))
    if call.has_raw_input:
        out.append(_json_details("Input", call.raw_input))
    if call.has_raw_output:
        out.append(_json_details("Raw output", call.raw_output))
    out.append("</details>")


def _tool_text(out: list[str], body: str) -> None:
    """A tool's text output: Markdown when it looks like Markdown, else kept as it is laid out."""
    clipped = clip.head(body, clip.TEXT_LINES)
    if _MARKDOWNISH.search(clipped.text):
        out.append(f"<div>{to_html(clipped.text)}</div>")
    else:
        out.append(f'<pre class="acpnb-out">{escape(clipped.text, quote=False)}</pre>')
    out.append(_note(clipped.note))


def _diff(out: list[str], c: DiffContent) -> None:
    d = unified(c.path, c.old, c.new)
    tag = " (new file)" if d.new_file else ""
    out.append(f'<div class="acpnb-file">📝 <code>{escape(c.path or "?")}</code>'
               f'<span class="acpnb-muted">{tag} +{d.added} −{d.removed}</span></div>')
    if not d.lines:
        out.append(_note("no changes"))
        return
    shown = d.lines[:clip.DIFF_LINES]
    body: list[str] = []
    budget = clip.MAX_CHARS
    for k, line in enumerate(shown):
        budget -= len(line)
        if budget < 0:
            shown = shown[:k]
            break
        body.append(_diff_line(line, header=k < 2))
    out.append(f'<pre class="acpnb-diff">{"".join(body)}</pre>')
    if len(shown) < len(d.lines):
        out.append(_note(f"… {len(d.lines) - len(shown):,} more lines"))


def _diff_line(line: str, *, header: bool) -> str:
    esc = escape(line, quote=False)
    if header:
        return f'<span class="acpnb-muted">{esc}</span>\n'
    first = line[:1]
    if first == "+":
        return f'<span class="acpnb-add">{esc}</span>\n'
    if first == "-":
        return f'<span class="acpnb-del">{esc}</span>\n'
    if first == "@":
        return f'<span class="acpnb-hunk">{esc}</span>\n'
    return f"<span>{esc}</span>\n"


def _terminal(out: list[str], terminal_id: str, turn: Turn) -> None:
    term = turn.terminals.get(terminal_id)
    if term is None:
        out.append(_note(f"terminal {terminal_id or '?'}: no output recorded"))
        return
    clipped = clip.tail(term.output, clip.TERMINAL_LINES)
    shown = clip.terminal_text(clipped.text)
    notes = [clipped.note] if clipped.note else []
    if term.truncated:
        notes.append("(the client kept only the end of the output)")
    if notes:
        out.append(_note(" ".join(notes)))
    command = f"$ {term.command}\n" if term.command else ""
    out.append(f"<pre>{escape(command + shown, quote=False)}</pre>")
    status = labels.exit_status(term, live=turn.live)
    failed = term.signal is not None or (term.exit_code not in (None, 0))
    cls = "acpnb-st-failed" if failed else "acpnb-st-completed" if term.exited else ""
    out.append(f'<div class="acpnb-note {cls}">{escape(status)}</div>')


# -- permissions, unknown updates, alerts -------------------------------------------------------


def _permission(out: list[str], p: Permission, live: bool) -> None:
    title = inline(" ".join(p.title.split())) if p.title.strip() else "a tool call"
    options = []
    chosen = p.chosen
    for o in p.options:
        name = escape(o.name or o.option_id or o.kind or "?", quote=False)
        if chosen is not None and o is chosen:
            options.append(f'<strong class="acpnb-chosen">✓ {name}</strong>')
        else:
            options.append(name)
    decision = labels.decision(p, live=live)
    waiting = p.outcome == "pending" and live
    out.append(f'<div class="acpnb-perm">🔐 <strong>Permission</strong>: {title}')
    if options:
        out.append(f'<div class="acpnb-muted">options: {" · ".join(options)}</div>')
    out.append(f'<div>{"⏳" if waiting else "→"} <strong>{escape(decision)}</strong></div></div>')


def _raw(out: list[str], r: Raw) -> None:
    problem = f' <span class="acpnb-muted">({escape(r.problem)})</span>' if r.problem else ""
    out.append(f'<details class="acpnb-raw"><summary>❔ Unknown update '
               f'<code>{escape(r.kind)}</code>{problem}</summary>')
    clipped = dump(r.raw)
    out.append(f"<pre>{escape(clipped.text, quote=False)}</pre>{_note(clipped.note)}</details>")


def _json_details(label: str, value: Any) -> str:
    clipped = dump(value)
    return (f'<details><summary class="acpnb-muted">{escape(label)}</summary>'
            f'<pre>{escape(clipped.text, quote=False)}</pre>{_note(clipped.note)}</details>')


def _alert(out: list[str], level: str, heading: str, message: str) -> None:
    cls = {"error": "", "warning": " acpnb-warning", "info": " acpnb-info"}.get(level, "")
    body = f" {_multiline(message)}" if message else ""
    out.append(f'<div class="acpnb-alert{cls}" role="alert"><strong>{escape(heading)}</strong>'
               f'{body}</div>')


def _note(note: str) -> str:
    return f'<div class="acpnb-note">{escape(note, quote=False)}</div>' if note else ""


def _turn_alerts(out: list[str], turn: Turn) -> None:
    reason = turn.stop_reason
    if reason == "refusal":
        _alert(out, "error", "⛔ Refused.", labels.REFUSAL)
    elif reason == "cancelled":
        _alert(out, "info", "⏹ Cancelled.", "The turn was stopped before the agent finished.")
    elif reason in ("max_tokens", "max_turn_requests"):
        _alert(out, "warning", "⚠ Incomplete:", labels.STOP_REASONS[reason] + ".")
    if turn.error and turn.error not in {e.message for e in turn.errors}:
        _alert(out, "error", "✗ The turn failed:", turn.error)


def _footer(out: list[str], turn: Turn) -> None:
    pieces: list[str] = []
    if turn.live:
        pieces.append('<span class="acpnb-running">◌ running…</span>')
    if turn.agent:
        pieces.append(f"<strong>{escape(turn.agent)}</strong>")
    usage = turn.usage
    if usage is not None and (ctx := labels.context(usage)):
        frac = usage.fraction
        meter = ""
        if frac is not None:
            width = min(100.0, frac * 100)
            high = " acpnb-high" if frac >= 0.8 else ""
            meter = (f'<span class="acpnb-meter{high}" title="{labels.percent(frac)} of the '
                     f'context window"><span style="width:{width:.1f}%"></span></span>')
        pieces.append(f"{meter}{escape(ctx)}")
    for piece in (labels.cost(turn), labels.tokens(turn)):
        if piece:
            pieces.append(escape(piece))
    if turn.duration is not None and turn.duration > 0:
        pieces.append(escape(labels.duration(turn.duration)))
    if turn.stop_reason is not None or not turn.live:
        reason = labels.stop_reason(turn)
        if reason:
            strong = turn.stop_reason not in (None, "end_turn")
            pieces.append(f"<strong>{escape(reason)}</strong>" if strong else escape(reason))
    if pieces:
        out.append(f'<div class="acpnb-footer">{" · ".join(pieces)}</div>')
