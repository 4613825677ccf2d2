"""A hostile agent against the turn's own output (issue 7, items 1 and 6).

Every payload of tests/hostile_payloads.py goes where an agent can put text (the answer,
thoughts, tool titles and output, plan entries, permission titles, errors, unknown updates, the
footer) and the bundle is checked the way a browser would meet it (tests/markup_check.py):
`text/html` as it is, and `text/markdown` as marked renders it in JupyterLab, with no sanitiser
for trusted output. Nothing may come out but a small set of elements, no `on*` attribute and
no URL with a scheme other than http(s) and mailto.

Then pathological input: deep nesting of each construct and long runs of each delimiter must
render in bounded time, as text past the limits, without losing the other parts of the turn.
"""

from __future__ import annotations

import html as html_lib
import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_notebook.render import LIVE_FORMATS, render_bundle
from tests.hostile_payloads import TEXTS
from tests.markup_check import MARKED_LIKE, html_problems, turn_problems


def check_bundle(bundle: dict[str, Any]) -> None:
    assert turn_problems(bundle) == [], bundle["text/markdown"]


def hostile(payload: str) -> dict[str, Any]:
    """A finished turn with `payload` in every place an agent controls."""
    p = payload
    return {
        "turnId": p,
        "agent": "agent",
        "success": True,
        "stopReason": p,
        "error": p,
        "usage": {"used": 1, "size": 2, "cost": {"amount": 1.5, "currency": p}},
        "cost": 0.5,
        "terminals": [{"terminalId": "t", "command": p, "output": p}],
        "parts": [
            {"type": "message", "role": "thought", "text": p},
            {
                "type": "message",
                "role": "agent",
                "text": p,
                "blocks": [
                    {"type": "text", "text": p},
                    {"type": "resource_link", "uri": p, "name": p},
                    {"type": "image", "mimeType": p, "data": p},
                ],
            },
            {"type": "plan", "entries": [{"content": p, "priority": p, "status": p}]},
            {
                "type": "tool_call",
                "toolCallId": p,
                "title": p,
                "kind": p,
                "status": p,
                "locations": [{"path": p}],
                "content": [
                    {"type": "content", "content": {"type": "text", "text": "# t\n" + p}},
                    {"type": "diff", "path": p, "oldText": p, "newText": p + "\n" + p},
                    {"type": "terminal", "terminalId": "t"},
                ],
                "rawInput": {p: p},
            },
            {
                "type": "permission",
                "title": p,
                "outcome": "selected",
                "optionId": p,
                "decidedBy": p,
                "options": [{"optionId": p, "name": p, "kind": p}],
            },
            {"type": "raw", "sessionUpdate": p, "raw": {p: p}, "problem": p},
            {"type": "error", "level": "error", "message": p},
            # ACP's later kinds: subagents, plans by id, notices, compaction, the tool's name.
            {
                "type": "subagent",
                "id": "s1.card",
                "sessionId": p,
                "title": p,
                "description": p,
                "state": p,
                "stopReason": p,
                "usage": {"used": 1, "size": 2, "cost": {"amount": 1.5, "currency": p}},
                "parts": [
                    {"type": "message", "id": p, "role": "agent", "text": p},
                    {"type": "message", "id": "s1.m2", "role": "session", "text": p},
                    {"type": "tool_call", "id": "s1.t", "toolCallId": p, "title": p, "name": p},
                    {"type": "permission", "id": "s1.p", "title": p, "options": []},
                ],
                "dropped": {p: 3},
            },
            {"type": "notice", "id": "n", "severity": p, "title": p, "description": p},
            {
                "type": "compaction",
                "id": "c",
                "compactionId": p,
                "status": p,
                "summary": [
                    {"type": "text", "text": p},
                    {"type": "resource_link", "uri": p, "name": p},
                ],
                "streamed": p,
                "error": p,
            },
            {"type": "plan", "id": "pm", "entries": [], "planId": p, "markdown": p, "path": p},
            {"type": "plan", "id": "pi", "entries": [{"content": p}], "planId": p, "removed": True},
        ],
    }


# JupyterLab typesets `$…$` in the rendered turn with MathJax (the source's `&#36;` is a `$` by
# then): its `\\href` makes a link to any URL. The turn's output has no `mathjax_ignore` yet.
TURN_PAYLOADS = TEXTS


@pytest.mark.parametrize("payload", TURN_PAYLOADS)
def test_payload_runs_nowhere(payload: str) -> None:
    check_bundle(render_bundle(hostile(payload)))
    answer = render_bundle({"text": payload, "success": True, "stopReason": "end_turn"})
    check_bundle(answer)


def test_payload_text_is_shown_not_dropped() -> None:
    bundle = render_bundle({"text": "a <img src=x onerror=alert(1)> b `$x`", "success": True})
    seen = html_lib.unescape(re.sub(r"<[^>]*>", "", MARKED_LIKE.render(bundle["text/markdown"])))
    assert "a <img src=x onerror=alert(1)> b $x" in seen


FRAGMENTS = [
    "<",
    ">",
    "&",
    "`",
    "``",
    "```",
    "\\",
    "[",
    "]",
    "(",
    ")",
    "!",
    "*",
    "_",
    "~~",
    "|",
    "\n",
    "\n\n",
    " ",
    "    ",
    "#",
    "- ",
    "1. ",
    "> ",
    '"',
    "'",
    "=",
    ":",
    "$",
    "@@",
    "&#106;",
    "&#x3C;",
    "&lt;",
    "javascript:",
    "JaVaScRiPt:",
    "data:",
    "vbscript:",
    "alert(1)",
    "img src=x onerror=",
    "script",
    "svg onload=",
    "<!--",
    "-->",
    "<![CDATA[",
    "]]>",
    "https://",
    "mailto:",
    "www.",
    "x",
    "\t",
    "\x00",
    "\r",
    "\u2028",
    "\ufeff",
    "|---|",
    "[r]: ",
]


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fuzzed_answers_run_nowhere(pieces: list[str]) -> None:
    text = "".join(pieces)
    check_bundle(
        render_bundle(
            {
                "text": text,
                "success": True,
                "parts": [
                    {"type": "tool_call", "title": text, "kind": "edit", "status": "completed"},
                    {"type": "plan", "entries": [{"content": text}]},
                ],
            }
        )
    )


@given(st.text(max_size=300))
@settings(max_examples=200, deadline=None)
def test_any_text_runs_nowhere(text: str) -> None:
    check_bundle(render_bundle({"text": text, "error": text, "success": False}))


# -- bounds ---------------------------------------------------------------------------------------

MB = 1_000_000
PATHOLOGICAL = {
    "quotes": ">" * 1000 + " x",
    "quotes spaced": "> " * 5000 + "x",
    "ordered": "1. " * 500 + "x",
    "bullets": "- " * 5000 + "x",
    "nested lists": "".join("  " * i + "- a\n" for i in range(2000)),
    "nested ordered": "".join("   " * i + "1. a\n" for i in range(1500)),
    "quotes in lists": "> - " * 3000 + "x",
    "brackets": "[" * 100_000,
    "image brackets": "![" * 50_000,
    "image bracket pieces": ("![" * 10_000 + "\n\n") * 250,
    "links": "[a](" * 50_000,
    "stars": "*" * 100_000,
    "star words": "*a " * 100_000,
    "underscores": "_" * 100_000,
    "backticks": "`" * 100_000,
    "backtick runs": "".join("`" * i + " " for i in range(1, 400)),
    "lt": "<" * 100_000,
    "tags": "<a " * 50_000,
    "entities": "&amp;" * 100_000,
    "entity runs": "&#" + "9" * 100_000,
    "emphasis mix": "a *b _c ~~d " * 30_000,
    "long line": "word " * 400_000,
    "many lines": "x\n" * 500_000,
    "hard breaks": "a\\\n" * 100_000,
    "table": "| a |\n|---|\n" + "| x |\n" * 50_000,
    "wide table": "|" * 50_000 + "\n" + "|-" * 25_000 + "\n",
    "fences": "```\n" * 100_000,
    "five MB": ("Some *text* with `code` and [a link](https://x.y).\n\n" * 100_000)[: 5 * MB],
    "five MB line": "x" * (5 * MB),
}


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_pathological_answers_are_bounded_and_lose_nothing_else(name: str) -> None:
    text = PATHOLOGICAL[name]
    transcript = {
        "text": text,
        "success": True,
        "stopReason": "end_turn",
        "parts": [
            {
                "type": "tool_call",
                "toolCallId": "c1",
                "title": "Read the file",
                "kind": "read",
                "status": "completed",
            },
            {"type": "message", "role": "agent", "text": text},
            {
                "type": "tool_call",
                "toolCallId": "c2",
                "title": "Run the tests",
                "kind": "execute",
                "status": "failed",
            },
        ],
    }
    for live in (True, False):
        start = time.perf_counter()
        bundle = render_bundle(transcript, live=live)
        elapsed = time.perf_counter() - start
        # Generous (a shared, loaded machine): a guard against blow-ups, not a speed test.
        assert elapsed < 30, f"{name}: {elapsed:.1f} s"
        for mime in ("text/html", "text/markdown"):
            out = bundle[mime]
            assert "could not render" not in out and "RecursionError" not in out, mime
            assert "Read the file" in out and "Run the tests" in out, mime
    assert html_problems(bundle["text/html"]) == []
    md = bundle["text/markdown"]
    assert "$" not in md and "@@" not in md and "\\\\" not in md
    # The test's own renderer is quadratic on some of these: it reads a bounded sample.
    sample = MARKED_LIKE.render(md[:20_000] + md[-20_000:])
    assert html_problems(sample, markdown=True) == []


def test_deep_nesting_is_shown_as_text_not_dropped() -> None:
    bundle = render_bundle({"text": ">" * 1000 + " the last word", "success": True})
    assert "the last word" in bundle["text/html"]
    assert "the last word" in bundle["text/markdown"]


def test_a_part_that_fails_to_render_does_not_blank_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> str:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("acp_notebook.render.html.to_html", broken)
    monkeypatch.setattr("acp_notebook.render.markdown.to_markdown", broken)
    bundle = render_bundle(
        {
            "text": "the answer",
            "success": True,
            "parts": [
                {"type": "message", "role": "agent", "text": "the answer"},
                {"type": "tool_call", "title": "Read the file", "status": "completed"},
            ],
        }
    )
    for mime in ("text/html", "text/markdown"):
        assert "Read the file" in bundle[mime] and "could not render the turn" not in bundle[mime]
    assert "could not render this part: RecursionError" in bundle["text/html"]
    assert "the answer" in bundle["text/markdown"]  # as plain text


def test_a_streaming_answer_reparses_only_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    # Redraws come up to 25 times a second: the pieces that did not change are not parsed again.
    from acp_notebook.render import agentmd

    calls: list[str] = []
    real_parse = agentmd.MD.parse

    def counting(src: str, env: Any = None) -> Any:
        calls.append(src)
        return real_parse(src, env)

    monkeypatch.setattr(agentmd.MD, "parse", counting)
    answer = "".join(f"## Part {i}\n\nSome *text* with `code` {i}.\n\n" for i in range(400))
    render_bundle({"parts": [{"type": "message", "role": "agent", "text": answer}]}, live=True)
    calls.clear()
    for more in ("More", " words", " here.\n\n", "- a list"):
        answer += more
        render_bundle(
            {"parts": [{"type": "message", "role": "agent", "text": answer}]},
            live=True,
            formats=LIVE_FORMATS,
        )
        # At most the end (none when the memo holds it: another test drew this text).
        assert len(calls) <= 1 and all(len(c) < 200 for c in calls), calls
        calls.clear()


@pytest.mark.parametrize("status", ["meter", "alert", "user", "turn", "running", "Tool", "x y"])
def test_a_plan_entrys_status_names_none_of_the_renderers_classes(status: str) -> None:
    """A plan entry's class is its status's (`acpnb-completed`…) only for the statuses ACP
    defines: another (a transcript read back is not validated) named any of the renderer's
    classes, `acpnb-meter` drew the entry as a 60-pixel bar, `acpnb-alert` as an error."""
    entries = [{"content": "step", "priority": "high", "status": s} for s in (status, "completed")]
    html = render_bundle({"parts": [{"type": "plan", "entries": entries}]})["text/html"]
    classes = re.findall(r"<li( class=[^ >]*)?>", html)
    assert classes == ["", " class=acpnb-completed"], classes


def test_a_terminal_shown_by_many_cards_is_drawn_once() -> None:
    """An agent's tool calls may each show the same terminal, up to 100 times a call (content
    items, 40 characters each, are all the turn's budget pays for): its output was drawn at
    every one, 80 KB of HTML each for 20,000 characters of `<`. 2,000 calls drew 16 GB: the
    kernel died of its record. Drawn with the first card that shows it; the others say so."""
    import json

    output = ("<" * 99 + "\n") * 200
    item = {"type": "terminal", "terminalId": "t"}
    calls = [
        {
            "type": "tool_call",
            "id": f"c{i}",
            "toolCallId": f"c{i}",
            "title": f"call {i}",
            "kind": "execute",
            "status": "completed",
            "content": [item] * 20,
        }
        for i in range(5)
    ]
    terminal = {"terminalId": "t", "command": "yes", "output": output, "exitCode": 0}
    turn = {"turnId": "x", "success": True, "parts": calls, "terminals": [terminal]}
    size = len(json.dumps(turn))
    bundle = render_bundle(turn)
    for mime in ("text/html", "text/markdown", "text/plain"):
        assert len(bundle[mime]) < 10 * size, (mime, len(bundle[mime]), size)
    assert bundle["text/html"].count("&lt;" * 99) >= 100  # drawn, once (its last 200 lines)
    assert "call 4" in bundle["text/html"]


def test_a_terminal_shows_its_command_as_it_ran() -> None:
    """The command is the client's record of what it ran (issue 20, same class as the spoofed
    card): an agent's `\\r` was drawn as a line end (`rm -rf ~\\recho safe` showed "echo safe"
    on a line of its own, which `sh` never ran), a right-to-left override reordered it, a
    no-break space looked like the space that would have split it. Each is an escape now."""
    command = "rm -rf ~\recho safe \u202eoof\u00a0bar"
    call = {
        "type": "tool_call",
        "id": "c1",
        "toolCallId": "c1",
        "title": "run",
        "kind": "execute",
        "status": "completed",
        "content": [{"type": "terminal", "terminalId": "t"}],
    }
    terminal = {"terminalId": "t", "command": command, "output": "", "exitCode": 0}
    bundle = render_bundle(
        {"turnId": "x", "success": True, "parts": [call], "terminals": [terminal]}
    )
    shown = "$ rm -rf ~\\u000decho safe \\u202eoof\\u00a0bar"
    for mime in ("text/html", "text/markdown"):
        assert shown in html_lib.unescape(bundle[mime]), mime
        assert not {"\r", "\u202e"} & set(bundle[mime]), mime
