"""Bounding what is drawn: the head or the tail of long text, and terminal escape codes.

The transcript keeps everything; only the views are clipped, with a note saying how much (the
sizes: `protocol/limits.py`).
Work is proportional to what is kept, not to the input: outputs may be megabytes long and are
re-rendered many times a second while a turn streams.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..protocol.limits import JSON_CHARS, MAX_CHARS, BoundedRepr, count, cut_text

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Clipped:
    text: str
    note: str = ""  # "… 1,234 more lines", or "" when nothing was left out


def _lines(n: int, adjective: str) -> str:
    return f"{n:,} {adjective} line" + ("" if n == 1 else "s")


def head(text: str, max_lines: int, max_chars: int = MAX_CHARS) -> Clipped:
    """The first lines of `text`, with a "… N more lines" note when some were left out."""
    body = text[:-1] if text.endswith("\n") else text
    if len(body) <= max_chars and body.count("\n") < max_lines:
        return Clipped(body)
    window = body[:max_chars]
    lines = window.split("\n", max_lines)
    if len(lines) > max_lines:
        del lines[max_lines:]  # the last piece is the rest of the text
    elif len(window) < len(body):
        if len(lines) == 1:  # one enormous line
            return Clipped(window, f"… {len(body) - len(window):,} more characters")
        lines.pop()  # the last line was cut by the character cap: drop it whole
    omitted = body.count("\n") + 1 - len(lines)
    return Clipped("\n".join(lines), f"… {_lines(omitted, 'more')}")


def tail(text: str, max_lines: int, max_chars: int = MAX_CHARS) -> Clipped:
    """The last lines of `text`, with a "… N earlier lines not shown" note."""
    body = text[:-1] if text.endswith("\n") else text
    if len(body) <= max_chars and body.count("\n") < max_lines:
        return Clipped(body)
    window = body[-max_chars:]
    lines = window.rsplit("\n", max_lines)
    if len(lines) > max_lines:
        del lines[0]  # the first piece is the start of the text
    elif len(window) < len(body):
        if len(lines) == 1:
            return Clipped(window, f"… {len(body) - len(window):,} earlier characters not shown")
        del lines[0]  # the first line was cut by the character cap
    omitted = body.count("\n") + 1 - len(lines)
    return Clipped("\n".join(lines), f"… {_lines(omitted, 'earlier')} not shown")


def terminal_text(text: str) -> str:
    """Terminal output as plain text: escape sequences and stray control characters removed."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        # A carriage return redraws the line: keep what was drawn last.
        text = "\n".join(_last_drawn(line) if "\r" in line else line for line in text.split("\n"))
    return _CONTROL.sub("", text)


def visible(text: str) -> str:
    """`text` with every character a page would not show as it is written as an escape (`\\r`
    as `\\u000d`, a right-to-left override as `\\u202e`, a no-break space as `\\u00a0`):
    controls, format characters (bidirectional, zero-width), separators other than the space;
    tabs and line feeds stay. For what the client ran (a terminal's command): shown as it ran,
    not as the agent would have it read (a `\\r` drawn as a line end, text reordered)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\t\n" else _escape(c) for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _last_drawn(line: str) -> str:
    drawn = [s for s in line.split("\r") if s]
    return drawn[-1] if drawn else ""


def live_tail(transcript: dict[str, Any], max_chars: int, *, earlier: int = 0) -> dict[str, Any]:
    """The transcript with its last parts only, about `max_chars` characters of them: a message
    longer than what is left is cut to its last characters (at a paragraph or line break when
    there is one), after a note saying how much is left out; the parts before are left out,
    after a note saying how many. The last part is always drawn: a long message cut to
    `max_chars` (its images and files left out), another part longer than that as a stand-in
    (a tool's card without its output, an error's start, else a note). The top-level text,
    thoughts and plan go: they would stand in for the parts left out.

    For the redraws of a turn nobody can watch closely (a headless run): each redraw sends what
    it draws, so a long answer, or a turn of many tool calls, re-sent whole every redraw costs
    the square of its length. The record at the end is drawn from the whole transcript. Mask
    before clipping: a key cut in two would no longer be found. Work is proportional to the
    parts kept: a part's size is its text's length and its blocks' JSON (a message) or its
    JSON's, counted up to what is left.

    A live view that keeps the turn itself may hand over its last parts only, with `earlier`
    saying how many came before them, and a long message's end only, its dict saying how many
    characters came before that end (`"before"`): what is drawn is the same."""
    parts = transcript.get("parts")
    if not isinstance(parts, list):
        return transcript
    kept: list[Any] = []  # what is drawn, last first
    room, taken = max_chars, 0  # characters left; the turn's parts drawn or stood in for
    drawn_terms = _TerminalSizes(transcript.get("terminals"))
    for part in reversed(parts):
        size = _message_chars(part, room)
        if size < 0:
            # A tool's card draws its terminals' output too (up to `MAX_CHARS` each, once in
            # the turn), which its JSON does not hold: 30 cards of a terminal each drew 18,520
            # characters for a tail of 500.
            size = count(part, room) + drawn_terms.added_by(part)
            if not kept and size > room:  # the last part alone is too long: its stand-in
                kept, taken = _stand_in(part, room), 1
                break
        elif size > room and (not kept or room >= max_chars // 4):
            kept.append(_tail_part(part, room))
            taken += 1
            break
        if kept and size > room:
            break
        kept.append(part)
        room, taken = room - size, taken + 1
    left_out = len(parts) - taken + earlier
    if left_out == 0 and len(kept) == taken:  # nothing cut, nothing stood in for: unchanged
        if all(k is p for k, p in zip(kept, reversed(parts), strict=True)):
            return transcript
    if left_out:
        note = f"[… {left_out:,} earlier parts: all of them are in the record when the turn ends]"
        kept.append({"type": "message", "id": "live-earlier", "role": "agent", "text": note})
    # The top-level text, thoughts and plan are the parts' own, joined: a reader draws them
    # where the parts lack them (`read_turn`), so the thoughts and plan left out with their
    # parts were drawn whole at every redraw (a turn's thoughts may be 4 MB).
    return {**transcript, "parts": kept[::-1], "text": "", "thoughts": "", "plan": []}


class _TerminalSizes:
    """How much of the terminals' output the cards kept so far draw: each terminal once, its
    last `MAX_CHARS` characters at most (`cards._terminal_html` draws its tail)."""

    def __init__(self, terminals: Any) -> None:
        self.sizes: dict[str, int] = {}
        if isinstance(terminals, list):
            for term in terminals:
                if isinstance(term, dict) and isinstance(term.get("terminalId"), str):
                    output = term.get("output")
                    size = len(output) if isinstance(output, str) else 0
                    self.sizes[term["terminalId"]] = min(size, MAX_CHARS)
        self.counted: set[str] = set()

    def added_by(self, part: Any) -> int:
        """The terminal output a kept `part` adds (its terminals not counted yet)."""
        content = part.get("content") if isinstance(part, dict) else None
        if not self.sizes or not isinstance(content, list):
            return 0
        added = 0
        for item in content:
            tid = item.get("terminalId") if isinstance(item, dict) else None
            if isinstance(tid, str) and tid not in self.counted:
                self.counted.add(tid)
                added += self.sizes.get(tid, 0)
        return added


#: Characters of a tool's title a stand-in card keeps.
_STAND_IN_TITLE = 200


def _stand_in(part: Any, max_chars: int) -> list[Any]:
    """What a redraw draws of a last part longer than `max_chars` that is not a message (last
    first, as `live_tail` lists them): a tool call's card with its kind, status and the start of
    its title, then a note; an error's first `max_chars` characters; else a note of what it is."""
    end = "all of it is in the record when the turn ends]"
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "tool_call":
        keys = ("type", "id", "toolCallId", "kind", "status")
        card = {k: part[k] for k in keys if isinstance(part.get(k), str)}
        title = part.get("title")
        if isinstance(title, str):
            card["title"] = title[:_STAND_IN_TITLE]
        text = f"[… this tool call's output is too long to redraw: {end}"
        return [_note(text), card]
    message = part.get("message") if isinstance(part, dict) else None
    if kind == "error" and isinstance(message, str):  # a failure shows now: its start
        return [{**part, "message": f"{message[:max_chars]}… [{end}"}]
    what = kind if isinstance(kind, str) and kind.isidentifier() else "part"
    return [_note(f"[… the last part ({what[:40]}) is too long to redraw: {end}")]


def _note(text: str) -> dict[str, Any]:
    return {"type": "message", "id": "live-note", "role": "agent", "text": text}


def _message_chars(part: Any, room: int) -> int:
    """The size of a message part, -1 for another part: its text's length, and its blocks'
    JSON (an image, a file) counted up to `room`."""
    if (
        isinstance(part, dict)
        and part.get("type") == "message"
        and isinstance(part.get("text"), str)
    ):
        blocks = part.get("blocks")
        before = part.get("before")  # characters of the text not given (`live_tail`)
        before = before if type(before) is int and before > 0 else 0
        return before + len(part["text"]) + (count(blocks, room) if blocks else 0)
    return -1


def _tail_part(part: dict[str, Any], max_chars: int) -> dict[str, Any]:
    text: str = part["text"]
    window = text[-max_chars:]
    # Start at a paragraph (else a line) break in the window's first half: Markdown drawn from
    # the middle of a line or a code fence would be drawn wrong until the record replaces it.
    for brk in ("\n\n", "\n"):
        at = window.find(brk, 0, max_chars // 2)
        if at >= 0:
            window = window[at + len(brk) :]
            break
    before = part.get("before")
    left_out = len(text) - len(window) + (before if type(before) is int and before > 0 else 0)
    blocks = part.get("blocks")
    what = [f"{left_out:,} earlier characters"] if left_out else []
    if blocks:  # drawn after the text: an image may alone be longer than a redraw may draw
        n = len(blocks) if isinstance(blocks, list) else 1
        what.append(f"{n:,} image{'s' if n != 1 else ''} or file{'s' if n != 1 else ''}")
    note = f"[… {' and '.join(what)}: all of them are in the record when the turn ends]"
    drawn = {**part, "text": f"{note}\n\n{window}", "blocks": []}
    drawn.pop("before", None)
    return drawn


# -- any value as indented JSON text, clipped: never raises, whatever the value holds -------------

_repr = BoundedRepr(2000, depth=8)


def dump(value: Any, limit: int = JSON_CHARS) -> Clipped:
    """`value` as JSON (a bounded repr if it is not JSON), clipped to `limit` characters.

    An object is shown one top-level key a line, each value compact: readable, and encoded by
    the C encoder (`indent` would switch json to its much slower pure-Python encoder).
    """
    try:
        if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
            text = (
                "{\n"
                + ",\n".join(f"  {_compact(k)}: {_compact(v)}" for k, v in value.items())
                + "\n}"
            )
        else:
            text = _compact(value)
    except (ValueError, TypeError, RecursionError):
        try:
            text = _repr.repr(value)
        except Exception:  # a broken __repr__ in a hand-made transcript
            text = f"<{type(value).__name__}>"
    return Clipped(*cut_text(text, limit))


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_repr.repr, separators=(", ", ": "))
