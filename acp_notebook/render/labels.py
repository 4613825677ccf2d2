"""The words and glyphs every format shares: statuses, kinds, decisions, stop reasons, numbers.

All functions return plain (unescaped) text; each format escapes it its own way.
"""

from __future__ import annotations

import re
import unicodedata

from ..protocol.items import BlockContent
from ..protocol.state import PermissionPart, ToolCallPart, Usage
from ..protocol.terminals import Terminal
from ..protocol.turn import Transcript

KIND_ICONS: dict[str, str] = {
    "read": "📖",
    "edit": "✏️",
    "delete": "🗑️",
    "move": "📦",
    "search": "🔍",
    "execute": "▶️",
    "think": "💭",
    "fetch": "🌐",
    "switch_mode": "🔀",
    "other": "🔧",
}

TOOL_STATUS: dict[str, tuple[str, str]] = {
    "pending": ("○", "pending"),
    "in_progress": ("◐", "running"),
    "completed": ("✓", "completed"),
    "failed": ("✗", "failed"),
    "cancelled": ("⊘", "cancelled"),
    # Not the agent's: a call whose permission was refused (`Transcript.call_status`).
    "rejected": ("⊘", "rejected"),
}

PLAN_STATUS: dict[str, tuple[str, str]] = {
    "pending": ("○", "pending"),
    "in_progress": ("◐", "in progress"),
    "completed": ("✓", "completed"),
}

STOP_REASONS: dict[str, str] = {
    "end_turn": "done",
    "max_tokens": "stopped: the token limit was reached",
    "max_turn_requests": "stopped: too many model requests in one turn",
    "refusal": "refused",
    "cancelled": "cancelled",
}

REFUSAL = "The agent refused this prompt and discarded it: it is not part of the conversation."

_OPTION_VERBS: dict[str, str] = {
    "allow_once": "allowed once",
    "allow_always": "always allowed",
    "reject_once": "rejected",
    "reject_always": "always rejected",
}


# What each option kind does, after a name that does not say it (`option_words`).
_KIND_NOTES = {
    "allow_once": "allows once",
    "allow_always": "allows always",
    "reject_once": "rejects once",
    "reject_always": "rejects always",
}
# The words a name is read by (casefolded, NFKC). Only English ones: a name in words we do not
# know says nothing we can check, so it gets ours after it.
_ALLOW = frozenset(
    "allow allowed allows approve approved accept yes ok okay permit grant confirm proceed "
    "continue run go apply execute trust".split()
)
_REJECT = frozenset(
    "reject rejected deny denied decline refuse no never cancel block stop skip abort "
    "disallow forbid dismiss".split()
)
# A negation before an allow word makes it a reject ("Don't allow", "Never Allow This Tool").
_NOT = frozenset("no not never don't dont cannot can't won't doesn't".split())
_ALWAYS = frozenset(
    "always never forever permanently permanent session remember again all every future "
    "anymore".split()
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def option_words(name: str, kind: str) -> str:
    """An option as shown (a button, the record's options line): the agent's name for it (the
    ACP spec: the label to show), then our words for its kind where the name does not say them
    ("Reject (allows always)"). A name may lie; `kind` is what the answer does."""
    if kind not in _KIND_NOTES:
        return f"{name} (unknown kind)"
    return name if name_says(name, kind) else f"{name} ({_KIND_NOTES[kind]})"


def name_says(name: str, kind: str) -> bool:
    """Whether an option's name says what its kind does: an allow (or reject) word and none of
    the other side's, and for an `*_always` kind an "always"-like word too."""
    words = _WORD.findall(unicodedata.normalize("NFKC", name).casefold().replace("’", "'"))
    allows = rejects = False
    for i, word in enumerate(words):
        if word in _ALLOW:
            negated = any(w in _NOT for w in words[max(0, i - 2) : i])
            allows, rejects = allows or not negated, rejects or negated
        elif word in _REJECT:
            rejects = True
    if kind.startswith("allow_"):
        says = allows and not rejects
    else:
        says = rejects and not allows
    if kind.endswith("_always"):
        says = says and any(w in _ALWAYS for w in words)
    return says


def kind_icon(kind: str) -> str:
    return KIND_ICONS.get(kind, KIND_ICONS["other"])


def tool_status(status: str) -> tuple[str, str]:
    """(glyph, word) for a tool call status; an unknown status is shown as it is."""
    return TOOL_STATUS.get(status, ("•", status or "unknown"))


#: A step of a turn that is over (cancelled, failed, or ended) that was not completed: nothing
#: is in progress any more.
NOT_DONE = ("○", "not done")


def plan_status(status: str, *, over: bool = False) -> tuple[str, str]:
    """(glyph, word) for a plan entry's status; in a turn that is `over`, an unfinished step
    is "not done" (an agent stopped mid-step leaves it "in progress")."""
    if over and status != "completed":
        return NOT_DONE
    return PLAN_STATUS.get(status, ("•", status or "unknown"))


def decision(p: PermissionPart, *, live: bool = False) -> str:
    """How a permission request was answered: "allowed once by policy", "cancelled", ..."""
    by = p.decided_by or ""
    if p.outcome == "pending":
        return "waiting for a decision…" if live else "never answered"
    if p.outcome == "cancelled" or (p.outcome == "selected" and p.option_id is None):
        if by == "cancel":
            return "cancelled (the turn was stopped)"
        if by == "agent":
            return "cancelled by the agent"
        if by.startswith("policy"):
            return "rejected by policy (no option to reject; request cancelled)"
        return "cancelled" + _by(by)
    chosen = p.chosen_item()
    if chosen is None:
        verb = f"chose unknown option “{p.option_id}”"
    else:
        verb = _OPTION_VERBS.get(chosen.kind) or f"chose “{chosen.name or chosen.option_id}”"
    return verb + _by(by)


def _by(by: str) -> str:
    if not by:
        return ""
    if by == "policy (nobody to ask)":
        return " (nobody to ask)"
    if by == "user":
        return " by the user"
    return f" by {by}"


#: What a failed turn's record says in place of its error when the cell raised it below.
RAISED = "the error is below."


def raised_here(turn: Transcript, message: str) -> bool:
    """Whether `message` is the turn's error that its cell raised right below the record: said
    there once (with what to try), the record only says that the turn failed."""
    return turn.raised and message == turn.error


def stop_reason(turn: Transcript) -> str:
    if turn.stop_reason is not None:
        return STOP_REASONS.get(turn.stop_reason, f"stopped: {turn.stop_reason}")
    if turn.live:
        return "running…"
    if turn.error is not None or turn.success is False:
        return "failed"
    return ""


def compact(n: int) -> str:
    """12345 → "12.3k", 200000 → "200k"."""
    for limit, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if abs(n) >= limit:
            value = f"{n / limit:.1f}".removesuffix(".0")
            return value + suffix
    return str(n)


def percent(fraction: float) -> str:
    pct = fraction * 100
    return f"{pct:.0f}%" if pct >= 1 or pct == 0 else f"{pct:.1f}%"


def context(usage: Usage) -> str:
    """ "context 45% (90k / 200k)" or what of it is known."""
    frac = usage.fraction
    if frac is not None and usage.used is not None and usage.size is not None:
        return f"context {percent(frac)} ({compact(usage.used)} / {compact(usage.size)})"
    if usage.used is not None:
        return f"context {compact(usage.used)} tokens"
    return ""


def money(amount: float, currency: str | None) -> str:
    cur = (currency or "").strip()
    digits = 2 if abs(amount) >= 0.1 or amount == 0 else 4
    value = f"{amount:.{digits}f}"
    if cur.upper() in ("USD", "$", ""):
        return ("-$" + value[1:]) if value.startswith("-") else "$" + value
    return f"{value} {cur}"


def cost(turn: Transcript) -> str:
    """ "cost $0.0123 this turn, $0.53 in total" or what of it is known."""
    currency = turn.usage.cost_currency if turn.usage else None
    total = turn.usage.cost_amount if turn.usage else None
    pieces = []
    if turn.cost is not None:
        pieces.append(f"{money(turn.cost, currency)} this turn")
    if total is not None:
        pieces.append(f"{money(total, currency)} in total")
    return ("cost " + ", ".join(pieces)) if pieces else ""


def tokens(turn: Transcript) -> str:
    t = turn.tokens
    pieces = []
    if "inputTokens" in t:
        pieces.append(f"{compact(t['inputTokens'])} in")
    if "outputTokens" in t:
        pieces.append(f"{compact(t['outputTokens'])} out")
    if "thoughtTokens" in t:
        pieces.append(f"{compact(t['thoughtTokens'])} thinking")
    if not pieces and "totalTokens" in t:
        pieces.append(f"{compact(t['totalTokens'])}")
    return ("tokens " + " / ".join(pieces)) if pieces else ""


def duration(seconds: float) -> str:
    """ "12.3 s", "2 min 5 s", "1 h 4 min", with no-break spaces (it is one item of a line)."""
    if seconds < 60:
        return f"{seconds:.1f}\u00a0s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}\u00a0min {secs}\u00a0s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}\u00a0h {minutes}\u00a0min"


def exit_status(term: Terminal, *, live: bool) -> str:
    if term.signal is not None:
        return f"killed by {term.signal}"
    if term.exit_code is not None:
        return f"exit {term.exit_code}"
    return "running…" if live else "no exit status"


def session_title(title: str) -> str:
    """The session's title, said as one: in quotes it read as a quote of the turn's prompt
    (agents name a session after its first prompt)."""
    return f"session: {title}"


def timing(turn: Transcript) -> str:
    """How long the turn took ("6.8 s"), and the start-up before it the live clock counted too
    ("6.8 s (+3.5 s start-up)"): the record does not contradict the clock its reader watched.
    Empty without a duration."""
    if turn.duration is None or turn.duration <= 0:
        return ""
    startup = turn.startup or 0.0
    extra = f" (+{duration(startup)} start-up)" if startup >= 0.05 else ""
    return duration(turn.duration) + extra


def footer(turn: Transcript) -> list[str]:
    """The footer's pieces in order, shared by the plain and Markdown views."""
    pieces = []
    if turn.agent:
        pieces.append(turn.agent)
    if turn.model:
        pieces.append(turn.model)
    if turn.title:
        pieces.append(session_title(turn.title))
    if turn.note:
        pieces.append(turn.note)
    if turn.usage is not None and (ctx := context(turn.usage)):
        pieces.append(ctx)
    if c := cost(turn):
        pieces.append(c)
    if tk := tokens(turn):
        pieces.append(tk)
    if t := timing(turn):
        pieces.append(t)
    if sr := stop_reason(turn):
        pieces.append(sr)
    return pieces


#: A subagent's work state (ACP's words; a word of the agent's own is shown as it is).
SUBAGENT_STATE: dict[str, tuple[str, str]] = {
    "running": ("◌", "working"),
    "requires_action": ("⏳", "waiting for you"),
    "unknown": ("·", "state unknown"),
}
#: Why an idle subagent stopped.
SUBAGENT_STOP: dict[str, tuple[str, str]] = {
    "end_turn": ("✓", "done"),
    "cancelled": ("⏹", "cancelled"),
    "error": ("✗", "failed"),
    "refusal": ("⛔", "refused"),
    "max_tokens": ("⚠", "stopped: out of tokens"),
    "max_turn_requests": ("⚠", "stopped: too many requests"),
}


def subagent_state(state: str | None, stop_reason: str | None, *, live: bool) -> tuple[str, str]:
    """(glyph, word) for a subagent's work state; in a turn that is over, a child still said to
    be working is "not finished"."""
    if state == "idle":
        return SUBAGENT_STOP.get(stop_reason or "", ("✓", "idle"))
    if state is None:
        return ("·", "starting" if live else "no state reported")
    if not live and state == "running":
        return NOT_DONE[0], "not finished"
    return SUBAGENT_STATE.get(state, ("•", state))


#: A compaction's status: the marker's words.
COMPACTION: dict[str, str] = {
    "in_progress": "compacting the context…",
    "completed": "context compacted",
    "failed": "context compaction failed",
    "cancelled": "context compaction cancelled",
}


def compaction(status: str, *, live: bool) -> str:
    if status == "in_progress" and not live:
        return "context compaction (unfinished)"
    return COMPACTION.get(status, f"context compaction: {status}")


#: A notice's heading, by severity (an unknown severity is shown as info, its word kept).
NOTICE: dict[str, str] = {"info": "ℹ Notice", "warning": "⚠ Notice", "error": "✗ Notice"}

#: A prompt suggestion's tooltip (in the chat, the button fills the input box instead).
SUGGESTION_TIP = "Put this prompt into a new %%agent cell below"

#: What a card of the client's own links a notebook cell by (kernel_tools/notebook_edit.py): a
#: `resource_link` content block whose uri is this and the cell's id, named "cell 3 (id …)".
CELL_URI = "acp-notebook:cell/"
_CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")


def cell_link(uri: str, name: str) -> dict[str, object]:
    """The content of a client card that links the notebook cell `uri` names (made by the
    kernel's cell tools, read back by `cell_links`)."""
    return {"type": "content", "content": {"type": "resource_link", "uri": uri, "name": name}}


def cell_links(call: ToolCallPart) -> list[tuple[str, str]]:
    """The notebook cells a card of the client's own links, as (cell id, name): none for the
    agent's cards (their links are drawn as any link of the agent's). The id is one a notebook
    gives (letters, digits, `-`, `_`), the name one line of at most 100 characters."""
    if not call.by_client:
        return []
    links = []
    for c in call.content_items:
        b = c.block if isinstance(c, BlockContent) else {}
        uri, name = b.get("uri"), b.get("name")
        if b.get("type") != "resource_link" or not isinstance(uri, str):
            continue
        cell_id = uri.removeprefix(CELL_URI)
        if uri.startswith(CELL_URI) and _CELL_ID.fullmatch(cell_id):
            shown = " ".join(name.split())[:100] if isinstance(name, str) else ""
            links.append((cell_id, shown or f"cell {cell_id}"))
    return links
