"""Tests of the pure render layer: transcript dict in, mimebundle out."""

from __future__ import annotations

import difflib
import html as html_lib
import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from acp_notebook.protocol.fold import SessionFold
from acp_notebook.protocol.session_facts import session_model
from acp_notebook.protocol.state import (
    ErrorPart,
    MessagePart,
    PermissionPart,
    PlanEntry,
    PlanPart,
    RawPart,
    ToolCallPart,
    Usage,
)
from acp_notebook.protocol.terminals import TerminalView
from acp_notebook.protocol.turn import TurnResult, read_turn
from acp_notebook.render import (
    ALL_FORMATS,
    LIVE_FORMATS,
    MIME_TRANSCRIPT,
    fences,
    render_bundle,
    render_html,
    render_markdown,
    render_text,
)
from acp_notebook.render.agentmd import to_html
from acp_notebook.render.diff import unified
from acp_notebook.render.style import RECORD_STYLE

MIMES = {"text/plain", "text/markdown", "text/html", MIME_TRANSCRIPT}

#: A CommonMark/GFM renderer with raw HTML on, as JupyterLab's (marked) renders `text/markdown`.
MARKED_LIKE = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def shown(md: str) -> str:
    """The HTML a Markdown renderer with raw HTML on makes of `md`."""
    return str(MARKED_LIKE.render(md))


def seen(md: str) -> str:
    """What a reader sees of `md`: its rendered HTML without tags, entities decoded."""
    return html_lib.unescape(re.sub(r"<[^>]*>", "", shown(md)))


def _message(role: str, text: str) -> MessagePart:
    part = MessagePart(f"m-{role}-{len(text)}", role)  # type: ignore[arg-type]
    part.append(text)
    return part


def _options() -> list[dict[str, Any]]:
    return [
        {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    ]


def full_transcript(**overrides: Any) -> dict[str, Any]:
    """A finished turn with every part kind, built from the real records."""
    plan = PlanPart(
        "plan",
        [
            PlanEntry("Read the code", "high", "completed"),
            PlanEntry("Fix the bug", "medium", "in_progress"),
            PlanEntry("Run the tests", "low", "pending"),
        ],
    )
    read = ToolCallPart(
        "t1",
        "call-read",
        "Read app.py",
        "read",
        "completed",
        content=[
            {"type": "content", "content": {"type": "text", "text": "def f():\n    return 1\n"}}
        ],
        locations=[{"path": "/w/app.py", "line": 3}],
        raw_input={"path": "/w/app.py"},
    )
    edit = ToolCallPart(
        "t2",
        "call-edit",
        "Edit app.py",
        "edit",
        "completed",
        content=[
            {
                "type": "diff",
                "path": "/w/app.py",
                "oldText": "def f():\n    return 1\n",
                "newText": "def f():\n    return 2\n",
            },
            {"type": "diff", "path": "/w/new.py", "oldText": None, "newText": "print('hi')\n"},
        ],
    )
    allowed = PermissionPart(
        "p1", "call-run", "Run pytest", _options(), "selected", "allow", "policy"
    )
    run = ToolCallPart(
        "t3",
        "call-run",
        "pytest -q",
        "execute",
        "failed",
        content=[{"type": "terminal", "terminalId": "term-1"}],
        raw_input={"command": "pytest -q"},
    )
    rejected = PermissionPart(
        "p2",
        "call-rm",
        "Delete the repo",
        _options(),
        "selected",
        "reject",
        "policy (nobody to ask)",
    )
    rm = ToolCallPart("t4", "call-rm", "rm -rf /", "delete", "cancelled")
    raw = RawPart(
        "r1", "future_thing", {"sessionUpdate": "future_thing", "answer": 42}, "unknown update kind"
    )
    warning = ErrorPart("e1", "the agent sent invalid JSON", "warning")
    term = TerminalView("term-1", "pytest -q")
    term.append(b"\x1b[32m.\x1b[0mF\nFAILED test_app.py::test_f\n")
    term.exit_code = 1
    parts = (
        _message("thought", "Let me look at *app.py* first."),
        plan,
        _message("agent", "I'll fix the bug in `app.py`.\n\n"),
        read,
        edit,
        allowed,
        run,
        rejected,
        rm,
        raw,
        warning,
        _message("agent", "Done: `f` now returns **2**."),
    )
    result = TurnResult(
        turn_id="turn-1",
        success=True,
        text="I'll fix the bug in `app.py`.\n\n\n\nDone.",
        stop_reason="end_turn",
        usage=Usage(90_000, 200_000, 0.53, "USD"),
        cost=0.0123,
        plan=tuple(plan.entries),
        thoughts="Let me look at *app.py* first.",
        parts=parts,
        session_id="sess-1",
        agent="claude-agent-acp",
        duration=12.34,
        tokens={"inputTokens": 1234, "outputTokens": 567},
        terminals=(term.to_json(),),
    )
    out = result.to_json()
    out.update(overrides)
    return out


def turn(**fields: Any) -> dict[str, Any]:
    """A small transcript: `parts` and any top-level fields."""
    base: dict[str, Any] = {
        "turnId": "t",
        "success": True,
        "stopReason": "end_turn",
        "text": "",
        "parts": [],
    }
    base.update(fields)
    return base


def perm(outcome: str, option_id: str | None, by: str | None) -> dict[str, Any]:
    return {
        "type": "permission",
        "title": "Run ls",
        "options": _options(),
        "outcome": outcome,
        "optionId": option_id,
        "decidedBy": by,
    }


# -- the bundle ---------------------------------------------------------------------------------


def test_full_transcript_renders_all_four_mime_types() -> None:
    transcript = full_transcript()
    bundle = render_bundle(transcript)
    assert set(bundle) == MIMES
    assert bundle[MIME_TRANSCRIPT] is transcript
    json.dumps(bundle)  # a display_data payload must be JSON

    html = bundle["text/html"]
    # A finished turn is a record: its compact stylesheet once, first in its root (issue 23);
    # a live turn's HTML has none (the live view's CSS is the page's).
    assert html.startswith("<div class='acpnb-turn ") and html.count("<style") == 1
    assert RECORD_STYLE in html and len(RECORD_STYLE.encode()) <= 2_100
    assert "<style" not in render_bundle(transcript, live=True)["text/html"]
    assert "💭 Thoughts" in html and "<details" in html
    assert "📋 Plan" in html
    assert "Edit app.py" in html and "acpnb-add" in html and "acpnb-del" in html
    assert "FAILED test_app.py::test_f" in html and "exit 1" in html
    assert "\x1b" not in html  # terminal escape codes are stripped
    assert "allowed once by policy" in html and "rejected (nobody to ask)" in html
    assert "<b class=acpnb-st-rejected>⊘ rejected</b>" in html  # rm, its permission refused
    assert "future_thing" in html and "42" in html
    assert "the agent sent invalid JSON" in html
    assert "context 45% (90k / 200k)" in html and "<meter value=.45></meter>" in html
    # Styled by structure: the kind icon, the status badge (completed: no class), the output.
    assert "<summary><i>📖</i> Read app.py <b>✓ completed</b></summary>" in html
    assert "<b class=acpnb-st-failed>✗ failed</b>" in html
    assert "<pre>def f():&#10;    return 1</pre>" in html
    assert "$0.0123 this turn" in html and "$0.53 in total" in html and "12.3\u00a0s" in html

    md = bundle["text/markdown"]
    assert seen(md).lstrip().startswith("I'll fix the bug in app.py.")
    assert "Done: <code>f</code> now returns <strong>2</strong>." in shown(md)
    assert "\n---\n" in md and "- [x] Read the code" in md and "- [ ] Fix the bug" in md
    assert "✓ ✏️ Edit app.py — completed (+2 −1)" in seen(md)
    assert '<pre><code class="language-diff">' in md and "+    return 2" in seen(md)
    assert "<strong>allowed once by policy</strong>" in shown(md)
    assert "⊘ 🗑️ rm -rf / — rejected" in seen(md)
    assert "future_thing" in seen(md) and "invalid JSON" in seen(md)
    assert "&#36;0\\.0123 this turn" in md  # no `$`: no MathJax between two dollar signs
    assert "$0.0123 this turn" in seen(md)

    text = bundle["text/plain"]
    assert text.startswith("I'll fix the bug in `app.py`.")
    lines = text.splitlines()
    assert "✓ edit: Edit app.py — completed (+2 −1)" in lines
    assert "✗ execute: pytest -q — failed (exit 1)" in lines
    assert "🔐 permission: Run pytest → allowed once by policy" in lines
    assert any(line.startswith("— claude-agent-acp · context 45%") for line in lines)


def test_formats_select_what_is_rendered() -> None:
    transcript = full_transcript(note="replayed history")
    live = render_bundle(transcript, live=True, formats=LIVE_FORMATS)
    assert set(live) == set(LIVE_FORMATS) == {"text/plain", "text/html"}
    assert set(render_bundle(transcript, formats=ALL_FORMATS)) == MIMES
    assert "<em>replayed history</em>" in live["text/html"]
    assert "replayed history" in live["text/plain"]


def test_parts_render_in_arrival_order() -> None:
    html = render_bundle(full_transcript())["text/html"]
    order = [
        "💭 Thoughts",
        "📋 Plan",
        "fix the bug",
        "Read app.py",
        "Edit app.py",
        "Run pytest",
        "pytest -q",
        "Delete the repo",
        "future_thing",
        "invalid JSON",
        "Done:",
        "<footer>",
    ]
    positions = [html.find(s) for s in order]
    assert -1 not in positions and positions == sorted(positions)


def test_top_level_fields_stand_in_for_missing_parts() -> None:
    bundle = render_bundle(
        {
            "text": "Just **text**",
            "thoughts": "hmm",
            "plan": [{"content": "step", "status": "completed"}],
        }
    )
    assert "<strong>text</strong>" in bundle["text/html"] and "hmm" in bundle["text/html"]
    assert "✓" in bundle["text/html"] and "- [x] step" in bundle["text/markdown"]
    assert bundle["text/plain"].startswith("Just **text**")


# -- escaping -----------------------------------------------------------------------------------

EVIL = '<script>alert(1)</script><img src=x onerror="alert(2)">'
EVIL_LINKS = (
    "[a](javascript:alert(1)) [b](JaVaScRiPt:alert(1)) [c](java&#115;cript:x) "
    "[d](  javascript:x) [e](data:text/html;base64,PHNjcmlwdD4=) <javascript:x> "
    "[f](vbscript:x) [g](java\\script:x) ![h](javascript:x)"
)

SAFE_TAGS = {
    "div",
    "style",
    "details",
    "summary",
    "span",
    "small",
    "strong",
    "em",
    "del",
    "code",
    "pre",
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "ul",
    "ol",
    "li",
    "blockquote",
    "hr",
    "br",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "a",
    "img",
    "b",
    "i",
    "footer",
    "meter",
}


class _Audit(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.styles = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in SAFE_TAGS:
            self.problems.append(f"tag {tag}")
        self.styles += tag == "style"
        for name, value in attrs:
            value = value or ""
            if name.startswith("on") or name in {"srcdoc", "formaction"}:
                self.problems.append(f"{tag} {name}={value!r}")
            if (
                name == "href"
                and re.match(r"\s*[a-z][a-z0-9+.-]*:", value, re.I)
                and not re.match(r"(https?|mailto):", value, re.I)
            ):
                self.problems.append(f"href {value!r}")
            if name == "src" and not value.startswith("data:image/"):
                self.problems.append(f"src {value!r}")
            if name == "style" and not re.fullmatch(
                r"(text-align:\w+|max-width:100%)",
                value,
            ):
                self.problems.append(f"style {value!r}")
            if name == "class" and not re.fullmatch(r"[a-z0-9_ -]*|language-[\w+.#-]+", value):
                self.problems.append(f"class {value!r}")


def audit(html: str) -> list[str]:
    parser = _Audit()
    parser.feed(html.replace(RECORD_STYLE, "", 1))
    parser.close()
    # A record carries its own stylesheet once (taken out above), and nothing of the agent's
    # makes one.
    if parser.styles:
        parser.problems.append(f"{parser.styles} style tags")
    return parser.problems


def hostile_transcript() -> dict[str, Any]:
    e = EVIL
    return {
        "turnId": e,
        "agent": e,
        "sessionId": e,
        "success": False,
        "stopReason": e,
        "error": e,
        "text": e + "\n\n" + EVIL_LINKS,
        "thoughts": e,
        "usage": {"used": 1, "size": 2, "cost": {"amount": 1, "currency": e}},
        "plan": [{"content": e, "priority": e, "status": e}],
        "terminals": [{"terminalId": "t", "command": e, "output": e, "exitStatus": {"signal": e}}],
        "parts": [
            {
                "type": "message",
                "role": "agent",
                "text": e
                + "\n\n"
                + EVIL_LINKS
                + "\n\n```"
                + e
                + "\n"
                + e
                + "\n```\n\n| "
                + e
                + " | x |\n|---|---|\n| "
                + e
                + " | y |",
                "blocks": [
                    {"type": "image", "mimeType": "image/png", "data": '"><script>'},
                    {"type": "image", "mimeType": 'image/png" onerror="x', "data": "AAAA"},
                    {"type": "resource_link", "uri": "javascript:alert(1)", "name": e},
                    {"type": "resource", "resource": {"uri": e, "text": e}},
                    {"type": e, "x": e},
                ],
            },
            {"type": "message", "role": "thought", "text": e},
            {"type": "message", "role": "user", "text": e},
            {
                "type": "tool_call",
                "toolCallId": e,
                "title": e + EVIL_LINKS,
                "kind": e,
                "status": e,
                "locations": [{"path": e, "line": e}],
                "content": [
                    {"type": "content", "content": {"type": "text", "text": e}},
                    {"type": "content", "content": {"type": "text", "text": "# md\n" + EVIL_LINKS}},
                    {"type": "diff", "path": e, "oldText": e, "newText": e + "\n" + e},
                    {"type": "terminal", "terminalId": "t"},
                    {"type": "terminal", "terminalId": e},
                    {"type": e},
                ],
                "rawInput": {e: e},
                "rawOutput": e,
            },
            {
                "type": "permission",
                "title": e,
                "options": [{"optionId": e, "name": e, "kind": e}],
                "outcome": "selected",
                "optionId": e,
                "decidedBy": e,
            },
            {"type": "plan", "entries": [{"content": e, "priority": e, "status": e}]},
            {"type": "raw", "sessionUpdate": e, "raw": {e: [e]}, "problem": e},
            {"type": "error", "level": e, "message": e},
            {"type": e, "payload": e},
        ],
        "duration": 1.0,
    }


def test_html_escapes_everything_from_the_agent() -> None:
    html = render_bundle(hostile_transcript())["text/html"]
    assert audit(html) == []
    assert "<script" not in html.lower()
    assert not re.search(r"(href|src)=\"\s*(javascript|vbscript|data:text)", html, re.I)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text, not dropped


def test_html_attributes_cannot_be_broken_out_of() -> None:
    html = render_bundle(
        turn(
            parts=[
                {
                    "type": "message",
                    "role": "agent",
                    "text": '[x](https://a.b/" onmouseover="alert(1)) [y](https://a.b/?q="><b>)',
                },
                {"type": "tool_call", "title": "t", "kind": 'x" onclick="y', "status": 'a" b="c'},
            ]
        )
    )["text/html"]
    assert audit(html) == []
    assert "title='x&quot; onclick=&quot;y'" in html  # the quote is escaped in attributes
    assert "<b class=acpnb-st-abc>" in html  # class names keep only safe characters


def test_javascript_links_are_not_links() -> None:
    html = to_html(EVIL_LINKS)
    assert "href" not in html
    safe = to_html("[ok](https://example.com/a?b=1&c=2) <https://x.y> see https://z.org/p.")
    assert safe.count("<a href=") == 2 and 'href="https://example.com/a?b=1&amp;c=2"' in safe
    assert 'rel="noopener noreferrer nofollow"' in safe
    assert "see https://z.org/p." in safe  # a bare URL stays text (CommonMark: no linkify)


def test_markdown_output_defuses_html_and_unsafe_links() -> None:
    md = render_bundle(hostile_transcript())["text/markdown"]
    html = shown(md)
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "<script>alert(1)</script>" in seen(md)  # shown as text, not dropped
    assert not re.search(r"(href|src)=\"\s*(javascript|vbscript|data)", html, re.I)


def test_message_blocks() -> None:
    html = render_bundle(
        turn(
            parts=[
                {
                    "type": "message",
                    "role": "agent",
                    "text": "See:",
                    "blocks": [
                        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
                        {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz4="},
                        {"type": "resource_link", "uri": "https://example.com/r", "name": "report"},
                        {
                            "type": "resource",
                            "resource": {"uri": "file:///w/a.txt", "text": "hello"},
                        },
                        {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
                    ],
                }
            ]
        )
    )["text/html"]
    assert audit(html) == []
    assert (
        "<img alt='image from the agent' style=max-width:100% "
        "src='data:image/png;base64,iVBORw0KGgo='>" in html
    )
    assert "🖼 image image/svg+xml" in html  # not inlined
    assert "<a href='https://example.com/r'" in html and ">report</a>" in html
    assert "<code>file:///w/a.txt</code>" in html and "<pre>hello</pre>" in html
    assert "🔊 audio audio/wav" in html


def test_code_in_markdown_is_left_alone() -> None:
    md = render_bundle(turn(text="Use `a < b && c` and\n\n```html\n<b>&amp;</b>\n```\n"))
    assert "<code>a &lt; b &amp;&amp; c</code>" in shown(md["text/markdown"])
    assert '<pre><code class="language-html">' in md["text/markdown"]
    assert "<b>&amp;</b>" in seen(md["text/markdown"])  # shown as written
    assert "<code>a &lt; b &amp;&amp; c</code>" in md["text/html"]
    assert "&lt;b&gt;&amp;amp;&lt;/b&gt;" in md["text/html"]


def test_unterminated_fence_is_closed_before_the_record() -> None:
    md = render_bundle(
        turn(text="Here:\n\n```python\nprint(1)", stopReason="cancelled", success=False)
    )["text/markdown"]
    body, _, record = md.partition("\n---\n")
    assert body.rstrip().endswith("</code></pre>") and "print(1)" in seen(body)
    assert "Cancelled" in record


# -- the answer's Markdown in HTML --------------------------------------------------------------


def test_minimal_markdown_converter() -> None:
    html = to_html(
        "# Title\n\nSome **bold**, *em*, ~~gone~~, `code` and snake_case_name.\n"
        "Second line.  \nHard break.\n\n"
        "- one\n- [x] done\n  - nested\n- three\n\n"
        "3. third\n4. fourth\n\n"
        "> quoted *text*\n\n"
        "```python\nif a < b:\n    pass\n```\n\n"
        "| a | b |\n|:--|--:|\n| 1 | `2` |\n\n---\n"
    )
    assert "<h1>Title</h1>" in html
    assert "<strong>bold</strong>" in html and "<em>em</em>" in html
    assert "<s>gone</s>" in html and "<code>code</code>" in html
    assert "snake_case_name" in html and "<em>case</em>" not in html
    assert "snake_case_name. Second line.<br>Hard" in html  # a soft break is a space
    assert "<ul><li>one</li>" in html and "☑ done" in html and "<li>nested</li>" in html
    assert '<ol start="3">' in html and "<li>fourth</li>" in html
    assert "<blockquote>" in html and "<em>text</em>" in html
    assert (
        "<pre><code class=language-python><span class=k>if </span>a &lt; b:&#10;    "
        "<span class=k>pass&#10;</span></code></pre>"
    ) in html
    assert "\n" not in html  # no newline between tags; in a <pre>, references (lean records)
    assert '<th style="text-align:left">a</th>' in html and "<td" in html
    assert "<hr>" in html


def test_long_answer_is_converted_in_chunks_with_the_same_result() -> None:
    parts = [
        f"## Part {i}\n\nText *{i}* with `code`.\n\n```\ncode {i}\n\nmore\n```\n\n- a\n- b"
        for i in range(200)
    ]
    text = "\n\n".join(parts)
    assert len(text) > 2000
    assert "".join(fences.chunks(text)) == text
    whole = to_html(text)
    assert whole.count("<h2>") == 200 and whole.count("<pre>") == 200
    assert "code 199&#10;&#10;more" in whole  # a blank line in a fenced block does not split it


@given(st.text(alphabet="ab `~\n-#*", max_size=300), st.text(alphabet="ab `~\n-#*", max_size=80))
@settings(max_examples=200, deadline=None)
def test_incremental_chunks_equal_fresh_chunks(start: str, more: str) -> None:
    fences.chunks(start)
    grown = fences.chunks(start + more)  # may reuse the chunks of `start`
    fences._recent.clear()
    assert grown == list(fences._chunks(start + more))
    assert "".join(grown) == start + more


# -- diffs --------------------------------------------------------------------------------------


def test_diff_of_a_new_file() -> None:
    d = unified("src/new.py", None, "a\nb\n")
    assert d.new_file and d.added == 2 and d.removed == 0
    assert d.lines == ("--- /dev/null", "+++ b/src/new.py", "@@ -0,0 +1,2 @@", "+a", "+b")
    html = render_bundle(
        turn(
            parts=[
                {
                    "type": "tool_call",
                    "title": "Write",
                    "kind": "edit",
                    "status": "completed",
                    "content": [{"type": "diff", "path": "/w/new.py", "newText": "x = 1\n"}],
                }
            ]
        )
    )["text/html"]
    assert "(new file)" in html and "<span class=acpnb-add>+x = 1</span>" in html
    assert "--- /dev/null" in html


def test_diff_of_a_modification() -> None:
    old = "".join(f"line {i}\n" for i in range(100))
    new = old.replace("line 50\n", "line fifty\n").replace("line 90\n", "")
    d = unified("/w/f.txt", old, new)
    assert d.lines[:2] == ("--- /w/f.txt", "+++ /w/f.txt")
    assert "@@ -48,7 +48,7 @@" in d.lines and "-line 50" in d.lines and "+line fifty" in d.lines
    assert d.added == 1 and d.removed == 2
    html = render_bundle(
        turn(
            parts=[
                {
                    "type": "tool_call",
                    "title": "Edit",
                    "kind": "edit",
                    "status": "completed",
                    "content": [
                        {"type": "diff", "path": "/w/f.txt", "oldText": old, "newText": new}
                    ],
                }
            ]
        )
    )
    assert "<span class=acpnb-del>-line 50</span>" in html["text/html"]
    assert "<span class=acpnb-add>+line fifty</span>" in html["text/html"]
    assert "+1 −2" in html["text/html"] and "(+1 −2)" in html["text/markdown"]


def test_diff_without_changes() -> None:
    html = render_bundle(
        turn(
            parts=[
                {
                    "type": "tool_call",
                    "title": "Edit",
                    "status": "completed",
                    "content": [{"type": "diff", "path": "f", "oldText": "a", "newText": "a"}],
                }
            ]
        )
    )["text/html"]
    assert "no changes" in html


def apply_patch(old: list[str], lines: tuple[str, ...]) -> list[str]:
    """Apply a unified diff strictly: every context and removed line must be where it says."""
    out: list[str] = []
    pos = 0  # next line of `old` not yet copied
    i = 2
    while i < len(lines):
        m = re.fullmatch(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", lines[i])
        assert m, lines[i]
        a_start, a_len = int(m[1]), int(m[2] or 1)
        b_start, b_len = int(m[3]), int(m[4] or 1)
        first = a_start - 1 if a_len else a_start  # 0-based index of the hunk's first old line
        assert first >= pos
        out.extend(old[pos:first])
        assert (b_start - 1 if b_len else b_start) == len(out)
        pos = first
        i += 1
        seen_a = seen_b = 0
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, text = lines[i][0], lines[i][1:]
            if tag in " -":
                assert old[pos] == text
                pos += 1
                seen_a += 1
            if tag in " +":
                out.append(text)
                seen_b += 1
            i += 1
        assert (seen_a, seen_b) == (a_len, b_len)
    return out + old[pos:]


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d", ""]), max_size=40),
    st.lists(st.sampled_from(["a", "b", "c", "d", ""]), max_size=40),
)
@settings(max_examples=300, deadline=None)
def test_diff_applies_and_matches_difflib_size(old: list[str], new: list[str]) -> None:
    old_text, new_text = "\n".join(old), "\n".join(new)
    d = unified("f", old_text, new_text)
    assert apply_patch(old_text.splitlines(), d.lines) == new_text.splitlines()
    expected = list(
        difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), lineterm="", n=3)
    )
    if not expected:
        assert d.lines == ()
    # The common head and tail are trimmed before difflib runs, which may pick another (equally
    # valid) alignment; the diff stays minimal in practice but is not always byte-identical.
    assert d.added - d.removed == len(new_text.splitlines()) - len(old_text.splitlines())


def test_huge_diff_is_truncated_to_its_head() -> None:
    new = "".join(f"row {i}\n" for i in range(5000))
    transcript = turn(
        parts=[
            {
                "type": "tool_call",
                "title": "Write",
                "kind": "edit",
                "status": "completed",
                "content": [{"type": "diff", "path": "big.txt", "newText": new}],
            }
        ]
    )
    bundle = render_bundle(transcript)
    assert "+row 0<" in bundle["text/html"] and "+row 4999" not in bundle["text/html"]
    assert re.search(r"… [\d,]+ more lines", bundle["text/html"])
    md = seen(bundle["text/markdown"])
    assert "+row 0\n" in md and "+row 4999" not in md
    assert "more lines" in md
    assert bundle[MIME_TRANSCRIPT]["parts"][0]["content"][0]["newText"] == new


# -- terminals ----------------------------------------------------------------------------------


def test_huge_terminal_output_keeps_its_tail() -> None:
    output = "".join(f"out {i}\n" for i in range(10_000))
    transcript = turn(
        parts=[
            {
                "type": "tool_call",
                "title": "make",
                "kind": "execute",
                "status": "completed",
                "content": [{"type": "terminal", "terminalId": "t1"}],
            }
        ],
        terminals=[
            {
                "terminalId": "t1",
                "command": "make",
                "output": output,
                "truncated": False,
                "exitStatus": {"exitCode": 0, "signal": None},
            }
        ],
    )
    bundle = render_bundle(transcript)
    html = bundle["text/html"]
    assert "out 9999" in html and "out 0\n" not in html and "$ make" in html
    assert "… 9,800 earlier lines not shown" in html
    assert len(html) < 60_000
    md = bundle["text/markdown"]
    assert "out 9999" in md and "out 0\n" not in md and "earlier lines not shown" in md
    assert bundle[MIME_TRANSCRIPT]["terminals"][0]["output"] == output


def test_terminal_states() -> None:
    def view(status: dict[str, Any], *, live: bool = False, truncated: bool = False) -> str:
        html: str = render_bundle(
            turn(
                parts=[
                    {
                        "type": "tool_call",
                        "title": "x",
                        "kind": "execute",
                        "status": "in_progress",
                        "content": [{"type": "terminal", "terminalId": "t"}],
                    }
                ],
                terminals=[
                    {
                        "terminalId": "t",
                        "command": "x",
                        "output": "a\r\nb 10%\rb 100%\n",
                        "truncated": truncated,
                        "exitStatus": status,
                    }
                ],
            ),
            live=live,
        )["text/html"]
        return html

    assert "killed by SIGKILL" in view({"exitCode": None, "signal": "SIGKILL"})
    assert "running…" in view({}, live=True)
    assert "kept only the end" in view({"exitCode": 0}, truncated=True)
    assert "b 100%" in view({"exitCode": 0}) and "b 10%" not in view({"exitCode": 0})
    missing = render_bundle(
        turn(
            parts=[
                {
                    "type": "tool_call",
                    "title": "x",
                    "content": [{"type": "terminal", "terminalId": "gone"}],
                }
            ]
        )
    )["text/html"]
    assert "terminal gone: no output recorded" in missing


# -- plan ---------------------------------------------------------------------------------------


PLAN = [
    {"content": "first", "priority": "high", "status": "completed"},
    {"content": "second", "priority": "medium", "status": "in_progress"},
    {"content": "third", "priority": "low", "status": "pending"},
]


def test_plan_statuses_and_priorities() -> None:
    entries = PLAN
    live = turn(parts=[{"type": "plan", "entries": entries}], plan=entries, success=None)
    bundle = render_bundle(live, live=True)
    html = bundle["text/html"]
    assert "1/3 done" in html
    assert re.search(r"class=acpnb-completed><span title=completed>✓</span> first", html)
    assert re.search(r"class=acpnb-in_progress><span title='in progress'>◐</span> second", html)
    assert re.search(r"class=acpnb-pending><span title=pending>○</span> third", html)
    # The badge of a priority: a class for "high" alone (the others look alike).
    assert "<small class=acpnb-prio-high title=priority>high</small>" in html
    assert "<small title=priority>low</small>" in html
    md = bundle["text/markdown"]
    assert "- [x] first · high" in md and "- [ ] second ◐ *in progress* · medium" in md
    assert "- [ ] third · low" in md
    assert "  ◐ second (medium)" in bundle["text/plain"]


@pytest.mark.parametrize("stop", ["cancelled", "end_turn", None])
def test_a_plan_of_a_turn_that_is_over_shows_its_unfinished_steps_as_not_done(
    stop: str | None,
) -> None:
    """Issue 23, item 6: a cancelled turn's plan kept a step styled in progress."""
    over = turn(
        parts=[{"type": "plan", "entries": PLAN}], stopReason=stop, success=stop is not None
    )
    bundle = render_bundle(over)
    html = bundle["text/html"]
    assert "1/3 done" in html
    assert re.search(r"class=acpnb-completed><span title=completed>✓</span> first", html)
    assert re.search(r"<li><span title='not done'>○</span> second", html)
    assert re.search(r"<li><span title='not done'>○</span> third", html)
    assert "in progress" not in html and "acpnb-in_progress" not in html
    md = bundle["text/markdown"]
    assert "- [ ] second · medium" in md and "- [ ] third · low" in md
    assert "in progress" not in md and "◐" not in md
    assert "  ○ second (medium)" in bundle["text/plain"] and "◐" not in bundle["text/plain"]


def _edit(status: str, call: str = "c1") -> dict[str, Any]:
    return {
        "type": "tool_call",
        "id": f"tool-{call}",
        "toolCallId": call,
        "title": "Edit notes.md",
        "kind": "edit",
        "status": status,
        "content": [{"type": "diff", "path": "/w/notes.md", "oldText": "a\n", "newText": "b\n"}],
    }


def _asked(option: str | None, by: str | None, call: str = "c1", n: int = 1) -> dict[str, Any]:
    outcome = "pending" if by is None else "selected" if option else "cancelled"
    return {**perm(outcome, option, by), "id": f"perm{n}", "toolCallId": call}


def test_the_record_names_the_options_as_their_buttons_did() -> None:
    """A name that lies about its kind is followed by our words for the kind, as on its button."""
    lying = [
        {"optionId": "a", "name": "Allow", "kind": "allow_once"},
        {"optionId": "b", "name": "Reject", "kind": "allow_always"},
        {"optionId": "c", "name": "", "kind": "reject_once"},
    ]
    part = {**perm("selected", "b", "user"), "options": lying}
    html = render_bundle(turn(parts=[part]))["text/html"]
    assert (
        "options: Allow · <strong class=acpnb-chosen>✓ Reject (allows always)</strong> · c (rejects"
        " once)</div>"
    ) in html


def test_an_execute_call_shows_the_command_it_asks_to_run() -> None:
    """Issue 23, item 1: a command asked about was only in the collapsed Input, as one JSON
    string; it is drawn as a terminal's command is, line by line, what a page hides escaped."""
    script = "echo one\necho two\r\u202erm -rf ~"
    call = {
        "type": "tool_call",
        "id": "x",
        "toolCallId": "x1",
        "title": "Run it",
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": script, "args": ["-v", 3]},
    }
    html = render_bundle(turn(parts=[call]))["text/html"]
    assert "<pre class=acpnb-term>$ echo one&#10;echo two\\u000d\\u202erm -rf ~ -v</pre>" in html
    for other in ({"kind": "read"}, {"rawInput": {"cmd": "x"}}, {"rawInput": ["ls"]}):
        assert "acpnb-term" not in render_bundle(turn(parts=[{**call, **other}]))["text/html"]
    ran = {**call, "content": [{"type": "terminal", "terminalId": "t1"}]}
    assert "$ echo one" not in render_bundle(turn(parts=[ran]))["text/html"]  # its terminal's


@pytest.mark.parametrize("status", ["failed", "cancelled", "pending"])
@pytest.mark.parametrize(
    ("option", "by"), [("reject", "user"), ("reject", "policy"), (None, "policy")]
)
def test_a_rejected_tool_call_says_rejected_in_every_view(
    status: str, option: str | None, by: str
) -> None:
    """Issue 23, item 6: a rejected edit showed a red "✗ failed" (the agent reports it so)."""
    bundle = render_bundle(turn(parts=[_edit(status), _asked(option, by)]))
    html = bundle["text/html"].replace(RECORD_STYLE, "")  # its rules name every status
    assert "<b class=acpnb-st-rejected>⊘ rejected</b>" in html
    assert "failed" not in html and "acpnb-st-failed" not in html
    assert "— rejected" in seen(bundle["text/markdown"])
    assert "⊘ edit: Edit notes.md — rejected" in bundle["text/plain"]
    assert "failed" not in bundle["text/plain"] and "failed" not in bundle["text/markdown"]


@pytest.mark.parametrize(
    ("parts", "word"),
    [
        # Asked again and allowed: the last answer counts.
        ([_edit("failed"), _asked("reject", "user"), _asked("allow", "user", n=2)], "failed"),
        # The agent says it ran all the same: it is shown as it says (and the request beside it).
        ([_edit("completed"), _asked("reject", "user")], "completed"),
        ([_edit("in_progress"), _asked("reject", "user")], "running"),
        # Stopped, not rejected; another call's rejection; not answered yet.
        ([_edit("cancelled"), _asked(None, "cancel")], "cancelled"),
        ([_edit("failed"), _asked("reject", "user", call="c2")], "failed"),
        ([_edit("pending"), _asked(None, None)], "pending"),
    ],
)
def test_only_a_call_whose_permission_was_refused_says_rejected(
    parts: list[dict[str, Any]], word: str
) -> None:
    bundle = render_bundle(turn(parts=parts))
    assert f"edit: Edit notes.md — {word}" in bundle["text/plain"]
    assert "rejected" not in bundle["text/plain"].split("\n")[0]


def test_the_latest_plan_wins() -> None:
    html = render_bundle(
        turn(
            parts=[
                {"type": "plan", "entries": [{"content": "old", "status": "pending"}]},
                {"type": "plan", "entries": [{"content": "new", "status": "completed"}]},
            ]
        )
    )
    assert "- [x] new" in html["text/markdown"] and "old" not in html["text/markdown"]


# -- permissions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "option", "by", "live", "expected"),
    [
        ("selected", "allow", "policy", False, "allowed once by policy"),
        ("selected", "always", "user", False, "always allowed by the user"),
        ("selected", "reject", "user", False, "rejected by the user"),
        ("selected", "reject", "policy", False, "rejected by policy"),
        ("selected", "reject", "policy (nobody to ask)", False, "rejected (nobody to ask)"),
        ("cancelled", None, "cancel", False, "cancelled (the turn was stopped)"),
        ("cancelled", None, "agent", False, "cancelled by the agent"),
        ("cancelled", None, "policy", False, "rejected by policy (no option to reject;"),
        ("cancelled", None, None, False, "cancelled"),
        ("pending", None, None, True, "waiting for a decision…"),
        ("pending", None, None, False, "never answered"),
        ("selected", "nope", "user", False, "chose unknown option “nope” by the user"),
    ],
)
def test_permission_decisions(
    outcome: str, option: str | None, by: str | None, live: bool, expected: str
) -> None:
    bundle = render_bundle(turn(parts=[perm(outcome, option, by)]), live=live)
    assert expected in bundle["text/html"]
    assert expected in seen(bundle["text/markdown"])
    assert f"🔐 permission: Run ls → {expected}" in bundle["text/plain"]
    if option == "allow":
        assert "<strong class=acpnb-chosen>✓ Allow once</strong>" in bundle["text/html"]


# -- stop reasons, errors, unknown updates ------------------------------------------------------


def test_refusal_is_shown_prominently() -> None:
    bundle = render_bundle(turn(text="", stopReason="refusal", success=False))
    assert re.search(
        r"class=acpnb-alert role=alert><strong>⛔ Refused.</strong>[^<]*"
        r"discarded",
        bundle["text/html"],
    )
    assert "<b>refused</b></footer>" in bundle["text/html"]  # in the footer too
    assert "⛔ **Refused.**" in bundle["text/markdown"]
    assert "⛔ refused:" in bundle["text/plain"]


def test_cancel_and_limits() -> None:
    cancelled = render_bundle(turn(text="partial", stopReason="cancelled", success=False))
    assert "⏹ Cancelled." in cancelled["text/html"] and "acpnb-info" in cancelled["text/html"]
    assert "⏹ **Cancelled.**" in cancelled["text/markdown"]
    assert cancelled["text/plain"].endswith("cancelled")
    limited = render_bundle(turn(text="x", stopReason="max_tokens", success=False))
    assert "token limit" in limited["text/html"] and "acpnb-warning" in limited["text/html"]
    other = render_bundle(turn(text="x", stopReason="brand_new_reason"))
    assert "stopped: brand_new_reason" in other["text/html"]


def test_errors_are_visible() -> None:
    bundle = render_bundle(
        turn(
            text="",
            success=False,
            stopReason=None,
            error="the agent exited (code 1)",
            parts=[{"type": "error", "level": "error", "message": "protocol error: bad frame"}],
        )
    )
    html = bundle["text/html"]
    assert "role=alert><strong>⚠ Error</strong> protocol error: bad frame" in html
    assert "✗ The turn failed:</strong> the agent exited (code 1)" in html
    assert "<b>failed</b></footer>" in html
    assert "✗ <strong>The turn failed:</strong> the agent exited (code 1)" in shown(
        bundle["text/markdown"]
    )
    assert "✗ failed: the agent exited (code 1)" in bundle["text/plain"]
    # The same message as an error part and as the turn's error is shown once.
    same = render_bundle(
        turn(
            error="boom",
            success=False,
            parts=[{"type": "error", "level": "error", "message": "boom"}],
        )
    )
    assert same["text/html"].count("boom") == 1


def test_unknown_updates_are_kept() -> None:
    bundle = render_bundle(
        turn(
            parts=[
                {
                    "type": "raw",
                    "sessionUpdate": "telepathy",
                    "raw": {"sessionUpdate": "telepathy", "thought": "<b>hi</b>"},
                    "problem": "unknown update kind",
                },
                {"type": "hologram", "id": "h1", "payload": [1, 2, 3]},
            ]
        )
    )
    html = bundle["text/html"]
    assert "<code>telepathy</code>" in html and "&lt;b&gt;hi&lt;/b&gt;" in html
    assert "unknown update kind" in html and "<details class=acpnb-raw>" in html
    assert "part hologram" in html and "[1, 2, 3]" in html
    assert "<code>telepathy</code>" in bundle["text/markdown"]
    assert "❔ unknown update telepathy (unknown update kind)" in bundle["text/plain"]


# -- live turns, footer -------------------------------------------------------------------------


def test_live_turn_shows_running() -> None:
    transcript = turn(
        success=None,
        stopReason=None,
        parts=[
            {"type": "message", "role": "agent", "text": "Working"},
            {"type": "message", "role": "thought", "text": "still thinking"},
        ],
    )
    live = render_bundle(transcript, live=True)
    assert "<span class=acpnb-running>◌ running…</span>" in live["text/html"]
    assert "Thinking…" in live["text/html"]
    assert "running…" in live["text/markdown"] and "running…" in live["text/plain"]
    done = render_bundle(transcript)
    assert "running…" not in done["text/html"] and "Thinking…" not in done["text/html"]


def test_footer_usage_cost_duration() -> None:
    html = render_bundle(
        turn(
            usage={"used": 190_000, "size": 200_000, "cost": {"amount": 2.5, "currency": "EUR"}},
            cost=0.25,
            duration=125.0,
            agent="gemini",
        )
    )["text/html"]
    footer = html[html.index("<footer>") :]
    assert "<b>gemini</b>" in footer
    # Past 80% the meter's own `high` mark (the browser's warning state) is passed.
    assert "<meter value=.95 high=.8></meter>" in footer
    assert "context 95% (190k / 200k)" in footer
    assert "cost 0.25 EUR this turn, 2.50 EUR in total" in footer
    assert "2\u00a0min 5\u00a0s" in footer and "done" in footer
    assert "<footer>" not in render_bundle(turn(stopReason=None))["text/html"]


@pytest.mark.parametrize(
    ("used", "meter"),
    [
        (0, "<meter value=0></meter>"),
        (1, "<meter value=0></meter>"),  # 0.0005%: an empty bar (the words say 0.0%)
        (5_200, "<meter value=.026></meter>"),
        (160_000, "<meter value=.8></meter>"),  # at the mark: not past it
        (160_200, "<meter value=.801 high=.8></meter>"),
        (300_000, "<meter value=1 high=.8></meter>"),  # over the window: a full bar
    ],
)
def test_context_meter_values(used: int, meter: str) -> None:
    html = render_bundle(turn(usage={"used": used, "size": 200_000}))["text/html"]
    assert re.findall(r"<meter[^>]*></meter>", html) == [meter]


# -- robustness ---------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=5,
)
KEYS = [
    "turnId",
    "sessionId",
    "agent",
    "success",
    "stopReason",
    "error",
    "text",
    "thoughts",
    "usage",
    "cost",
    "tokens",
    "plan",
    "prompt",
    "terminals",
    "parts",
    "duration",
]
PART_TYPES = ["message", "tool_call", "permission", "plan", "raw", "error"]
PART_KEYS = [
    "role",
    "text",
    "blocks",
    "toolCallId",
    "title",
    "kind",
    "status",
    "content",
    "locations",
    "rawInput",
    "rawOutput",
    "options",
    "outcome",
    "optionId",
    "decidedBy",
    "entries",
    "sessionUpdate",
    "raw",
    "problem",
    "level",
    "message",
]


def typed(
    types: list[str], keys: list[str], values: st.SearchStrategy[Any], max_size: int
) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts with a `type` (usually a known one) and a few of `keys`, of any value."""
    return st.tuples(
        st.sampled_from(types) | json_values,
        st.dictionaries(st.sampled_from(keys), values, max_size=max_size),
    ).map(lambda t: {**t[1], "type": t[0]})


content_items = typed(
    ["content", "diff", "terminal", "text", "image", "resource"],
    ["content", "path", "oldText", "newText", "terminalId", "text", "data", "mimeType"],
    json_values | st.fixed_dictionaries({"type": st.just("text"), "text": json_values}),
    4,
)
parts = typed(PART_TYPES, PART_KEYS, json_values | st.lists(content_items, max_size=3), 6)
small_dicts = st.dictionaries(
    st.sampled_from(
        [
            "used",
            "size",
            "cost",
            "amount",
            "currency",
            "terminalId",
            "command",
            "output",
            "truncated",
            "exitStatus",
            "exitCode",
            "signal",
            "content",
            "priority",
            "status",
        ]
    ),
    json_values,
    max_size=5,
)
transcripts = st.dictionaries(
    st.sampled_from(KEYS),
    json_values | small_dicts | st.lists(parts | small_dicts | json_values, max_size=5),
    max_size=10,
)


def _render_strictly(transcript: Any, live: bool) -> None:
    # The views themselves, not `render_bundle`, whose fallback would hide an exception.
    t = read_turn(transcript, live=live)
    for view in (render_html, render_markdown, render_text):
        assert isinstance(view(t), str)
    bundle = render_bundle(transcript, live=live)
    assert set(bundle) == MIMES
    assert "could not render" not in bundle["text/plain"]
    assert audit(bundle["text/html"]) == []


@given(transcripts, st.booleans())
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_malformed_transcripts_never_raise(transcript: dict[str, Any], live: bool) -> None:
    _render_strictly(transcript, live)


@given(json_values, st.booleans())
@settings(max_examples=100, deadline=None)
def test_arbitrary_values_never_raise(value: Any, live: bool) -> None:
    _render_strictly(value, live)


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_any_answer_text_is_safe(text: str) -> None:
    html = to_html(text)
    assert "<script" not in html.lower()
    assert audit(f"<div>{html}</div>") == []


@pytest.mark.parametrize(
    "odd",
    [
        {"usage": {"used": 10**400, "size": float("nan"), "cost": {"amount": float("inf")}}},
        {"duration": 10**30, "cost": -1e308, "tokens": {"inputTokens": 10**5000}},
        {"parts": [{"type": "tool_call", "rawInput": {("tuple",): 1}}]},
        {"parts": [{"type": "raw", "raw": {"self": None}}]},
        {"parts": [{"type": "message", "role": "agent", "text": "\x00\r\n\x1b[31m\ud800"}]},
        {"text": "```\n" * 1000 + "~~~" * 500},
        {"text": "*" * 5000 + "_" * 5000 + "[" * 2000 + "`" * 3000},
        {
            "parts": [
                {
                    "type": "tool_call",
                    "content": [{"type": "diff", "path": 5, "oldText": 7, "newText": None}],
                }
            ]
        },
    ],
)
def test_odd_values(odd: dict[str, Any]) -> None:
    if odd.get("parts") and odd["parts"][0].get("raw") == {"self": None}:
        odd["parts"][0]["raw"]["self"] = odd  # a cycle
    _render_strictly(odd, False)


def test_markdown_code_spans_cannot_smuggle_html_across_paragraphs() -> None:
    # A "code span" across a blank line is two paragraphs to a Markdown renderer, and a
    # backslash-escaped backtick opens nothing: the HTML between must come out escaped.
    from acp_notebook.render.mdwrite import to_markdown

    for evil in (
        "see `a\n\n<img src=x onerror=alert(1)>\n\nb`",
        "see \\`<img src=x onerror=alert(1)>`",
    ):
        assert "<img" not in shown(to_markdown(evil)), evil
    assert shown(to_markdown("keep `a<b` as code")) == "<p>keep <code>a&lt;b</code> as code</p>\n"


# -- issue 23, item 8: the footer and the order of an image -------------------------------------


def test_an_image_is_drawn_where_it_came_in_the_answer_not_after_its_text() -> None:
    fold = SessionFold()
    fold.begin_turn("turn-1", [])
    image = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    for content in (
        {"type": "text", "text": "Before the chart.\n\n"},
        image,
        {"type": "text", "text": "After the chart."},
    ):
        fold.apply({"sessionUpdate": "agent_message_chunk", "content": content})
    record = fold.end_turn()
    assert record is not None
    transcript = record.to_json(agent="demo")
    for saved in (transcript, TurnResult.from_json(transcript).to_json()):  # and read back
        html = render_bundle(saved)["text/html"]
        assert html.index("Before the chart.") < html.index("<img") < html.index("After the chart.")
    # The text is one message still (its answer unchanged), and an image last needs no offsets.
    assert TurnResult.from_json(transcript).text == "Before the chart.\n\nAfter the chart."
    part = MessagePart("m", "agent")
    part.append("Only text, then")
    part.add_block(image)
    assert "blockAt" not in part.to_json()
    # A saved `blockAt` that does not fit its text is read as every block last, never raising.
    bad = {**part.to_json(), "blockAt": [99]}
    assert MessagePart.from_json(bad).pieces() == [("Only text, then", image), ("", None)]


def _footer_of(**fields: Any) -> str:
    html = render_bundle(turn(agent="demo", **fields))["text/html"]
    return html_lib.unescape(html[html.index("<footer>") : html.index("</footer>")]).replace(
        "\u00a0", " "
    )


def test_the_records_footer_says_the_model_the_sessions_title_and_the_start_up() -> None:
    footer = _footer_of(model="Sonnet 9", title="Fix the parser", duration=6.8, startup=3.5)
    # The model, as the live footer shows it; the session's title said as a title, not quoted
    # (it read as a quote of this turn's prompt); the live clock's extra seconds said.
    assert "<b>demo</b> · Sonnet 9 · session: Fix the parser" in footer
    assert "“" not in footer and "6.8 s (+3.5 s start-up)" in footer
    bundle = render_bundle(
        turn(agent="demo", model="Sonnet 9", title="Fix it", duration=6.8, startup=3.5)
    )
    for view in (bundle["text/plain"], seen(bundle["text/markdown"])):
        assert "demo · Sonnet 9 · session: Fix it" in view and "“" not in view
        assert "6.8 s (+3.5 s start-up)" in view.replace("\u00a0", " ")
    # None of them when the agent gave none, and no start-up under a twentieth of a second.
    footer = _footer_of(duration=6.8, startup=0.01)
    assert "session" not in footer and "start-up" not in footer and "6.8 s" in footer
    assert footer.startswith("<footer><b>demo</b> · 6.8 s")


def test_the_sessions_model_is_its_model_options_name() -> None:
    option = {"id": "model", "currentValue": "s9", "type": "select"}
    grouped = [{"group": "fast", "options": [{"value": "s9", "name": "Sonnet\n 9"}]}]
    assert session_model([{**option, "options": grouped}]) == "Sonnet 9"
    assert session_model([{**option, "options": []}]) == "s9"  # no choice names it
    assert session_model([{"id": "mode", "currentValue": "ask"}]) is None


@pytest.mark.parametrize("with_part", [True, False])
def test_a_raised_failure_is_said_once_below_not_in_the_record(with_part: bool) -> None:
    # The cell raises the error (with what to try) right below its record: the record says only
    # that the turn failed; the transcript keeps the error.
    parts = [{"type": "error", "id": "e1", "level": "error", "message": "demo failure"}]
    transcript = {
        "turnId": "t1",
        "parts": parts if with_part else [],
        "success": False,
        "error": "demo failure",
    }
    for render in (render_html, render_markdown, render_text):
        said = render(read_turn({**transcript, "raised": True}))
        assert "demo failure" not in said and "the error is below." in said, said
        assert "demo failure" in render(read_turn(transcript))  # not raised: said here
