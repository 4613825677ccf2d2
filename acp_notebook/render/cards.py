"""The boxes of the turn view: tool call cards (with diffs and terminal output), permission
requests and unknown updates. Heavy pieces (diffs, terminal tails) are memoised: a live turn
redraws the same ones many times a second."""

from __future__ import annotations

import re
from functools import lru_cache
from html import escape

from ..protocol import limits
from ..protocol.items import BlockContent, DiffContent, TerminalContent, TextContent
from ..protocol.state import PermissionPart, RawPart, ToolCallPart
from ..protocol.terminals import Terminal
from ..protocol.turn import Transcript
from . import clip, labels
from .agentmd import inline, pre_text, to_html
from .clip import dump
from .diff import unified
from .htmlbits import attr, block, css_class, json_details, note

_MARKDOWNISH = re.compile(
    r"^ {0,3}(?:#{1,6} |```|~~~|[-*+] \S|\d{1,3}[.)] \S|> |\|.*\|)"
    r"|\*\*\S|\]\(",
    re.M,
)


#: What marks a card of the client's own: no card of the agent's has it (the fold never makes
#: one `by_client`), so a card that looks like the kernel's run but lacks it is the agent's.
_OWN = " <span class=acpnb-muted>· acp_notebook's own</span>"


def tool_call(out: list[str], call: ToolCallPart, turn: Transcript) -> None:
    """A collapsible card: kind icon, title, status badge; locations, content, raw input.

    Open when there is something to look at (a diff, a terminal) or the call failed.
    """
    status = turn.call_status(call)
    glyph, word = labels.tool_status(status)
    # Completed is the badge's own colour: the status most cards have names itself by text
    # alone, 25 B less a card in a saved record (issue 12); any other status is a class.
    badge = "<b>" if status == "completed" else f"<b class=acpnb-st-{css_class(status)}>"
    content, locations = call.content_items, call.location_items
    diffs = [c for c in content if isinstance(c, DiffContent)]
    # The client's own call (a kernel tool's run) is open: it is what the person is asked
    # about, and its code is shown whole, wrapped, unscrolled (`acpnb-own`, style.py).
    is_open = (
        call.by_client
        or status == "failed"
        or bool(diffs)
        or any(isinstance(c, TerminalContent) for c in content)
    )
    cls, own = ("'acpnb-tool acpnb-own'", _OWN) if call.by_client else ("acpnb-tool", "")
    head, stats = _head(call, diffs)
    out.append(
        f"<details class={cls}{' open' if is_open else ''}>"
        f"<summary>{head} {badge}{glyph} {escape(word)}</b>{stats}{own}</summary>"
    )
    if call.name:  # the tool's own name (the agent's word; `title` is this call's)
        out.append(f"<div class=acpnb-muted>tool <code>{escape(call.name)}</code></div>")
    if locations:
        locs = ", ".join(
            f"<code>{escape(loc.path)}{f':{loc.line}' if loc.line is not None else ''}</code>"
            for loc in locations[:20]
        )
        more = f" … {len(locations) - 20} more" if len(locations) > 20 else ""
        out.append(f"<div class=acpnb-locs>📄 {locs}{more}</div>")
    if not any(isinstance(c, TerminalContent) for c in content):
        out.append(_command(call))
    terminals: set[str] = set()  # drawn in this card: each once
    links = labels.cell_links(call)  # notebook cells a card of the client's own names
    for c in content:
        if isinstance(c, TextContent):
            _tool_text(out, c.text)
        elif isinstance(c, DiffContent):
            _diff(out, c)
        elif isinstance(c, TerminalContent) and c.terminal_id not in terminals:
            terminals.add(c.terminal_id)
            if turn.draws_terminal(call, c.terminal_id):
                _terminal(out, c.terminal_id, turn)
            else:
                out.append(note("(its terminal's output is in the first card that shows it)"))
        elif isinstance(c, BlockContent) and not (links and _links_cell(c)):
            out.append(block(c.block))
    out.extend(_cell_link(cell_id, name) for cell_id, name in links)
    if call.raw_input is not None:
        out.append(json_details("Input", call.raw_input))
    if call.raw_output is not None:
        out.append(json_details("Raw output", call.raw_output))
    out.append("</details>")


def _cell_link(cell_id: str, name: str) -> str:
    """Plain text in a saved record; with the extension, a click scrolls to the cell."""
    return (
        f"<div>↪ <a class=acpnb-cell data-cell={attr(cell_id)} "
        f"title='Show the cell in the notebook'>{escape(name)}</a></div>"
    )


def _links_cell(c: BlockContent) -> bool:
    uri = c.block.get("uri")
    return isinstance(uri, str) and uri.startswith(labels.CELL_URI)


def _command(call: ToolCallPart) -> str:
    """The command an `execute` call asks to run, from its raw input (`command`, and `args` when
    a list), drawn as a terminal's is: a multi-line script reads as lines, not as one JSON string
    in its Input. Empty when it has none, or a terminal of the call shows what ran."""
    raw = call.raw_input
    if "execute" not in call.stated_kinds and call.tool_kind != "execute":
        return ""
    if not isinstance(raw, dict) or not isinstance(raw.get("command"), str):
        return ""
    if not raw["command"].strip():
        return ""
    args = raw.get("args")
    words = [a for a in args if isinstance(a, str)] if isinstance(args, list) else []
    return _command_html(" ".join([raw["command"], *words]))


@lru_cache(maxsize=64)
def _command_html(command: str) -> str:
    clipped = clip.head(command, limits.TEXT_LINES)
    return f"<pre class=acpnb-term>{pre_text('$ ' + clip.visible(clipped.text))}</pre>" + note(
        clipped.note
    )


def _head(call: ToolCallPart, diffs: list[DiffContent]) -> tuple[str, str]:
    """A card's icon and title, and its diffs' +/− counts (drawn after the badge)."""
    kind = call.tool_kind
    title = inline(" ".join(call.title.split())) if call.title.strip() else escape(kind)
    stats = ""
    if diffs:
        added = removed = 0
        for d in diffs:
            u = unified(d.path, d.old, d.new)
            added, removed = added + u.added, removed + u.removed
        stats = f" <span>+{added} −{removed}</span>"
    # Styled by structure (style.py: `.acpnb-tool>summary>i`, `>b`, `>span`, `.acpnb-tool>pre`):
    # a class on each would cost every card of a saved record (issue 12) and tell nothing more.
    # A kind has its own icon, one to one; the kind's word is a tooltip only where the icon is the
    # generic one (a kind ACP does not list), 11 B a card less otherwise.
    icon = labels.kind_icon(kind)
    tip = f" title={attr(kind)}" if kind not in labels.KIND_ICONS else ""
    return f"<i{tip}>{icon}</i> {title}", stats


def _tool_text(out: list[str], body: str) -> None:
    out.append(_tool_text_html(body))


@lru_cache(maxsize=256)
def _tool_text_html(body: str) -> str:
    """A tool's text output: Markdown when it looks like Markdown, else kept as it is laid out."""
    clipped = clip.head(body, limits.TEXT_LINES)
    if _MARKDOWNISH.search(clipped.text):
        html = f"<div>{to_html(clipped.text)}</div>"
    else:
        html = f"<pre>{pre_text(clipped.text)}</pre>"  # styled as `pre.acpnb-out`, by place
    return html + note(clipped.note)


def _diff(out: list[str], c: DiffContent) -> None:
    out.append(_diff_html(c.path, c.old, c.new))


@lru_cache(maxsize=256)
def _diff_html(path: str, old: str | None, new: str) -> str:
    """One file's diff: a header line, then its head as coloured unified-diff lines."""
    d = unified(path, old, new)
    tag = " (new file)" if d.new_file else ""
    out = [
        f"<div class=acpnb-file>📝 <code>{escape(path or '?')}</code>"
        f"<span class=acpnb-muted>{tag} +{d.added} −{d.removed}</span></div>"
    ]
    if not d.lines:
        out.append(note("no changes"))
        return "".join(out)
    shown = d.lines[: limits.DIFF_LINES]
    body: list[str] = []
    budget = limits.MAX_CHARS
    for k, line in enumerate(shown):
        budget -= len(line)
        if budget < 0:
            shown = shown[:k]
            break
        body.append(_diff_line(line, header=k < 2))
    out.append(f"<pre class=acpnb-diff>{''.join(body)}</pre>")
    if len(shown) < len(d.lines):
        out.append(note(f"… {len(d.lines) - len(shown):,} more lines"))
    return "".join(out)


def _diff_line(line: str, *, header: bool) -> str:
    esc = pre_text(line)
    if header:
        return f"<span class=acpnb-muted>{esc}</span>&#10;"
    first = line[:1]
    if first == "+":
        return f"<span class=acpnb-add>{esc}</span>&#10;"
    if first == "-":
        return f"<span class=acpnb-del>{esc}</span>&#10;"
    if first == "@":
        return f"<span class=acpnb-hunk>{esc}</span>&#10;"
    return f"<span>{esc}</span>&#10;"


def _terminal(out: list[str], terminal_id: str, turn: Transcript) -> None:
    term = turn.terminals.get(terminal_id)
    if term is None:
        out.append(note(f"terminal {terminal_id or '?'}: no output recorded"))
    else:
        out.append(_terminal_html(term, turn.live))


@lru_cache(maxsize=64)
def _terminal_html(term: Terminal, live: bool) -> str:
    """The command and the tail of what it printed, then how it ended."""
    clipped = clip.tail(term.output, limits.TERMINAL_LINES)
    shown = clip.terminal_text(clipped.text)
    notes = [clipped.note] if clipped.note else []
    if term.truncated:
        notes.append("(the client kept only the end of the output)")
    command = f"$ {clip.visible(term.command)}\n" if term.command else ""
    status = labels.exit_status(term, live=live)
    failed = term.signal is not None or (term.exit_code not in (None, 0))
    cls = "acpnb-st-failed" if failed else "acpnb-st-completed" if term.exited else ""
    cls = f"'acpnb-note {cls}'" if cls else "acpnb-note"
    return (  # `acpnb-term` keeps it out of the rule of a tool's text output, as before
        f"{note(' '.join(notes))}<pre class=acpnb-term>{pre_text(command + shown)}</pre>"
        f"<div class={cls}>{escape(status)}</div>"
    )


def permission(out: list[str], p: PermissionPart, live: bool) -> None:
    """The request, its options (the chosen one marked) and how it was decided."""
    title = inline(" ".join(p.title.split())) if p.title.strip() else "a tool call"
    options = []
    items = p.option_items
    chosen = p.chosen_item(items)
    for o in items:
        # As its button read (`labels.option_words`): a name that lies about its kind is
        # followed by our words for the kind here too.
        named = o.name or o.option_id
        shown = labels.option_words(" ".join(named.split()), o.kind) if named else o.kind or "?"
        name = escape(shown, quote=False)
        if chosen is not None and o is chosen:
            options.append(f"<strong class=acpnb-chosen>✓ {name}</strong>")
        else:
            options.append(name)
    decision = labels.decision(p, live=live)
    waiting = p.outcome == "pending" and live
    out.append(f"<div class=acpnb-perm>🔐 <strong>Permission</strong>: {title}")
    if options:
        # A live view draws the options as buttons in the card: its stylesheet hides this line
        # then (turn_view.css), so they are not listed twice; a record or a copy keeps it.
        out.append(
            f"<div class='acpnb-muted acpnb-perm-options'>options: {' · '.join(options)}</div>"
        )
    out.append(f"<div>{'⏳' if waiting else '→'} <strong>{escape(decision)}</strong></div></div>")


def raw(out: list[str], r: RawPart) -> None:
    """An update this renderer does not know, kept as collapsed JSON."""
    problem = f" <span class=acpnb-muted>({escape(r.problem)})</span>" if r.problem else ""
    out.append(
        f"<details class=acpnb-raw><summary>❔ Unknown update "
        f"<code>{escape(r.update_kind or '?')}</code>{problem}</summary>"
    )
    clipped = dump(r.raw)
    out.append(f"<pre class=acpnb-out>{pre_text(clipped.text)}</pre>{note(clipped.note)}</details>")
