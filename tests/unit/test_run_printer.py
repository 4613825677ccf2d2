"""The runner's terminal printer, fed transcripts directly: deltas, order, and hostile text."""

from __future__ import annotations

import io
import time
from typing import Any

import pytest

from acp_notebook.protocol.redact import Redactor
from acp_notebook.run.console import Console, wants_colour
from acp_notebook.run.printer import (
    MAX_ANSWER,
    MAX_ANSWER_LINE,
    MAX_LINE,
    Line,
    Totals,
    TurnPrinter,
)

KEY = "sk-live-0123456789abcdefghij"


def tool(status: str, title: str = "Read notes.md", kind: str = "read", n: int = 1) -> dict:
    return {
        "type": "tool_call",
        "id": f"tool{n}",
        "toolCallId": f"call{n}",
        "title": title,
        "kind": kind,
        "status": status,
    }


def message(text: str, n: int = 1, role: str = "agent") -> dict:
    return {"type": "message", "id": f"msg{n}", "role": role, "text": text}


def permission(outcome: str = "selected", n: int = 2) -> dict:
    return {
        "type": "permission",
        "id": f"perm{n}",
        "toolCallId": f"call{n}",
        "title": "Edit notes.md",
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
        "outcome": outcome,
        "optionId": "ok" if outcome == "selected" else None,
        "decidedBy": "policy" if outcome == "selected" else None,
    }


def plan(*statuses: str) -> dict:
    entries = [
        {"content": f"step {i}", "priority": "high", "status": s} for i, s in enumerate(statuses, 1)
    ]
    return {"type": "plan", "id": "plan1", "entries": entries}


def turn(*parts: dict, final: bool = False, **extra: Any) -> dict:
    out: dict[str, Any] = {"turnId": "t1", "agent": "demo", "parts": list(parts)}
    if final:
        out.update(success=True, stopReason="end_turn", cost=0.25, duration=1.5)
        out["usage"] = {"used": 1000, "size": 10000, "cost": {"amount": 0.5, "currency": "USD"}}
        out["tokens"] = {"inputTokens": 1200, "outputTokens": 300}
    out.update(extra)
    return out


def texts(lines: list[Line]) -> list[str]:
    return [x.text for x in lines]


def fed(*snapshots: dict, **kwargs: Any) -> list[str]:
    printer = TurnPrinter(**kwargs)
    return [t for s in snapshots for t in texts(printer.feed(s))]


STEPS = [
    turn(plan("pending", "pending")),
    turn(plan("in_progress", "pending"), tool("in_progress")),
    turn(plan("completed", "pending"), tool("completed"), tool("pending", "Edit", "edit", 2)),
    turn(
        plan("completed", "in_progress"),
        tool("completed"),
        tool("pending", "Edit", "edit", 2),
        permission(),
        message("Done: I read"),
    ),
    turn(
        plan("completed", "completed"),
        tool("completed"),
        tool("completed", "Edit", "edit", 2),
        permission(),
        message("Done: I read\nthe notes and edited them.", 3),
        final=True,
    ),
]


def test_every_snapshot_or_only_the_last_prints_the_same_lines() -> None:
    everything = fed(*STEPS)
    assert everything == fed(STEPS[-1])
    assert everything == fed(STEPS[0], STEPS[2], STEPS[4])
    assert everything == [
        "Plan:",
        "  1. step 1",
        "  2. step 2",
        "▸ read: Read notes.md",
        "✓ read: Read notes.md — completed",
        "▸ edit: Edit",
        "  permission: Edit notes.md → allowed once by policy",
        "✓ edit: Edit — completed",
        "  Done: I read",
        "  the notes and edited them.",
        "Plan: 2 of 2 steps completed",
        "— demo · context 10% (1k / 10k) · cost $0.25 this turn, $0.50 in total · "
        "tokens 1.2k in / 300 out · 1.5 s · done",
    ]


def test_a_rejected_edit_is_printed_rejected_not_failed() -> None:
    """Issue 23, item 6: the agent reports a refused call failed; the run says rejected."""
    rejected = {
        **permission(n=2),
        "options": [{"optionId": "no", "name": "Reject", "kind": "reject_once"}],
        "optionId": "no",
        "decidedBy": "policy",
    }
    printer = TurnPrinter()
    lines = printer.feed(turn(tool("failed", "Edit", "edit", 2), rejected, final=True))
    assert [(x.text, x.style) for x in lines[:3]] == [
        ("▸ edit: Edit", "tool"),
        ("  permission: Edit notes.md → rejected by policy", "warn"),
        ("⊘ edit: Edit — rejected", "warn"),
    ]


def test_the_answer_streams_as_whole_lines_each_printed_once() -> None:
    printer = TurnPrinter()
    assert texts(printer.feed(turn(message("Hel")))) == []
    assert texts(printer.feed(turn(message("Hello\nWor")))) == ["  Hello"]
    assert texts(printer.feed(turn(message("Hello\nWorld\n\nBye")))) == ["  World", ""]
    # A running tool call after the text ends the message: its last line is out.
    lines = texts(printer.feed(turn(message("Hello\nWorld\n\nBye"), tool("in_progress", n=2))))
    assert lines == ["  Bye", "▸ read: Read notes.md"]
    final = turn(message("Hello\nWorld\n\nBye"), tool("failed", n=2), final=True, success=False)
    assert texts(printer.feed(final))[0] == "✗ read: Read notes.md — failed"
    assert printer.feed(final) == []  # a record shown again adds nothing


def test_a_running_tool_call_holds_back_what_follows_until_it_ends() -> None:
    printer = TurnPrinter()
    running = turn(tool("in_progress"), tool("in_progress", "Search", "search", 2))
    assert texts(printer.feed(running)) == ["▸ read: Read notes.md"]
    done = turn(tool("completed"), tool("completed", "Search", "search", 2))
    assert texts(printer.feed(done)) == [
        "✓ read: Read notes.md — completed",
        "▸ search: Search",
        "✓ search: Search — completed",
    ]


HOSTILE = [
    "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m",  # set the title, clear the screen, colour
    "\x9b31mC1 CSI\x1bPdevice control\x1b\\",
    "bell\x07 backspace\x08 nul\x00 del\x7f",
    "\u202eevil reversed\u202c",
    "carriage\rreturn overwrites",
]


@pytest.mark.parametrize("payload", HOSTILE)
def test_agent_strings_reach_the_terminal_without_escapes_or_controls(payload: str) -> None:
    snapshot = turn(
        tool("failed", title=payload, kind=payload),
        {**permission("cancelled", 1), "title": payload},
        {"type": "error", "id": "e1", "level": "error", "message": payload},
        {"type": "raw", "id": "r1", "sessionUpdate": payload, "raw": {}},
        message(f"{payload}\n{payload}", 9),
        plan("pending") | {"entries": [{"content": payload, "status": "pending"}]},
        final=True,
        success=False,
        error=payload,
        agent=payload,
    )
    lines = fed(snapshot)
    assert len(lines) >= 10
    for line in lines:
        assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in line), repr(line)
        assert not any(0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 for c in line)


def test_huge_text_is_bounded_and_fast() -> None:
    line = "x" * 5_000_000
    started = time.monotonic()
    lines = fed(
        turn(tool("in_progress", title=line)),
        turn(tool("completed", title=line), message(line + "\n" + "y\n" * 100_000, 2), final=True),
    )
    assert time.monotonic() - started < 5
    assert max(len(x) for x in lines) <= MAX_ANSWER_LINE + 2
    assert all(len(x) <= 3 * MAX_LINE for x in lines if x.startswith(("▸", "✓")))
    assert sum(len(x) for x in lines) < MAX_ANSWER + 2 * MAX_LINE + 2_000
    assert "  … the rest of the answer is in the saved notebook" in lines


def test_a_key_in_the_environment_is_masked() -> None:
    redactor = Redactor(environ={"DEMO_API_KEY": KEY})
    lines = fed(turn(message(f"the key is {KEY}"), final=True, error=KEY), redactor=redactor)
    assert not any(KEY[:16] in x for x in lines)
    assert any("[redacted]" in x for x in lines)


def test_quiet_prints_nothing_of_the_turn_but_keeps_count() -> None:
    printer = TurnPrinter(quiet=True)
    assert printer.feed(STEPS[-1]) == [] and printer.finished
    totals = Totals()
    assert printer.last is not None
    totals.add(printer.last)
    assert totals.line() == "1 turn · tokens 1.2k in / 300 out · cost $0.25 · 1.5 s in turns"


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert wants_colour(Tty()) and not wants_colour(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not wants_colour(Tty())
    stream = Tty()
    Console(stream, colour=True).tagged("[a] ").write([Line("ok", "ok"), Line("plain")])
    assert stream.getvalue() == "[a] \x1b[32mok\x1b[0m\n[a] plain\n"


def test_a_rewritten_plan_is_printed_again() -> None:
    printer = TurnPrinter()
    assert texts(printer.feed(turn(plan("pending")))) == ["Plan:", "  1. step 1"]
    revised = plan("completed", "pending")
    assert texts(printer.feed(turn(revised))) == ["Plan, revised:", "  1. step 1", "  2. step 2"]
    assert texts(printer.feed(turn(revised | {"entries": revised["entries"][::-1]}))) == [
        "Plan, revised:",
        "  1. step 2",
        "  2. step 1",
    ]


def test_an_error_the_cell_raises_below_is_not_printed_above_it() -> None:
    error = {"type": "error", "id": "e1", "level": "error", "message": "demo failure"}
    ended = {"success": False, "stopReason": None, "error": "demo failure"}
    # The live snapshot shows the error before the turn's end says whether the cell raises it.
    lines = fed(turn(message("half"), error), turn(message("half"), error, **ended, raised=True))
    assert not any("demo failure" in x for x in lines), lines  # the cell's paragraph says it
    assert "✗ failed: the error is below." in lines
    # Not raised (a --background turn, a chat): the record is where the error is said.
    kept = fed(turn(message("half"), error), turn(message("half"), error, **ended))
    assert sum("demo failure" in x for x in kept) == 1, kept
