"""The lean record markup (`agentmd._lean`, `pre_text`) shows the reader what the plain markup
did: an agent's carriage returns and newlines inside a `<pre>` keep their meaning."""

from __future__ import annotations

import html as html_lib
import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from acp_notebook.render import render_bundle
from acp_notebook.render.agentmd import MD, _lean, _tidy, pre_text


def parsed_text(markup: str) -> str:
    """Text as an HTML parser reads it: the input stream's CR LF and lone CR become LF first
    (HTML's preprocessing), then character references are decoded."""
    return html_lib.unescape(markup.replace("\r\n", "\n").replace("\r", "\n"))


@pytest.mark.parametrize("value", ["a\r\nb", "a\rb", "50%\r100%\r\n", "\r\n\r\nx\r", "a\n\rb"])
def test_pre_text_keeps_the_line_ends_a_browser_sees(value: str) -> None:
    # Before: the CR stayed before `&#10;`, which the parser read as two line ends.
    assert parsed_text(pre_text(value)) == parsed_text(value)


def test_crlf_in_terminal_and_diff_is_one_line_end() -> None:
    # The output and the diff's lines are split on line ends before; a command and a path are not.
    text = "line1\r\nline2\r\nline3"
    bundle = render_bundle(
        {
            "success": True,
            "terminals": [{"terminalId": "t", "command": text, "output": text}],
            "parts": [
                {
                    "type": "tool_call",
                    "toolCallId": "c",
                    "title": "t",
                    "status": "completed",
                    "content": [
                        {"type": "diff", "path": text, "oldText": "", "newText": text},
                        {"type": "terminal", "terminalId": "t"},
                    ],
                }
            ],
        }
    )
    pres = re.findall(r"<pre[ >].*?</pre>", bundle["text/html"], re.S)
    assert pres
    for pre in pres:
        seen = parsed_text(re.sub(r"<[^>]*>", "", pre))
        assert "line1\n\n" not in seen, pre
    assert any("line1\nline2\nline3" in parsed_text(re.sub(r"<[^>]*>", "", p)) for p in pres)


# -- `_lean` keeps what a reader sees: markdown-it's own HTML and the lean one read the same ----

_BLOCKS = frozenset(
    "p li ul ol h1 h2 h3 h4 h5 h6 blockquote table thead tbody tr th td pre hr br div".split()
)


class _Reader(HTMLParser):
    """Tags and text as a browser lays them out: runs of whitespace one space, none at a block's
    edge; inside a `<pre>` the text exactly (character references decoded, CR LF as LF)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[str, str]] = []
        self.pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(("<", f"{tag} {sorted(attrs)}"))
        self.pre += tag == "pre"

    def handle_endtag(self, tag: str) -> None:
        self.events.append((">", tag))
        self.pre -= tag == "pre"

    def handle_data(self, data: str) -> None:
        data = data.replace("\r\n", "\n").replace("\r", "\n")
        if self.pre:
            self.events.append(("pre", data))
        else:
            self.events.append(("text", re.sub(r"[ \t\n\f]+", " ", data)))

    def read(self, markup: str) -> list[tuple[str, str]]:
        self.feed(markup)
        self.close()
        out: list[tuple[str, str]] = []
        events = self.events
        for i, (kind, value) in enumerate(events):
            if kind == "text":
                if i and _edge(events[i - 1]):
                    value = value.lstrip(" ")
                if i + 1 < len(events) and _edge(events[i + 1]):
                    value = value.rstrip(" ")
                if not value:
                    continue
            if out and kind in ("text", "pre") and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + value)
            else:
                out.append((kind, value))
        return out


def _edge(event: tuple[str, str]) -> bool:
    kind, value = event
    return kind in ("<", ">") and value.split(" ")[0] in _BLOCKS


_MD_PIECES = [
    "`a\nb`", "x  \ny", "x\\\ny", "- a\n  - b\n- c", "1. a\n2. b\n\n   c", "3) x\n4) y",
    "| a | b |\n|---|:-:|\n| `x` | c |\n| d\\|e | f |", "> q\n> r\n>\n> - s",
    "```py\nx = 1\n\ny\n```", "    indented\n    code\n", "# h\ntext\n---\nSetext\n===", "***",
    "a <b>c</b>\nd", "`</pre>\n`", "&#10;&amp;&lt;", "[l](https://x.y/a'b \"t\")",
    "![a\nb](https://x/i.png)", "* [x] done\n* [ ] todo\n  more", "- a\n\n  b\n- c",
    "```\n\n\nlead\n\n\n```", "tab\there\n\tindented", "line1\r\nline2\rline3", "*a\nb* _c\nd_",
    "**b**\n- list", "para\n> quote", "para\n# head", "`x` `` ` ``", "a\n\n<!-- c -->\n\nb",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_MD_PIECES), min_size=1, max_size=5),
    st.sampled_from(["\n", "\n\n", " ", ""]),
)
def test_lean_markup_reads_as_markdown_its_own(pieces: list[str], sep: str) -> None:
    src = sep.join(pieces).replace("\r\n", "\n").replace("\r", "\n")
    tokens = MD.parse(src)
    plain = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    plain.validateLink = MD.validateLink  # type: ignore[method-assign]
    plain.core.ruler.push("acpnb_tidy", _tidy)
    for rule in ("link_open", "link_close", "image", "fence", "code_block"):
        plain.add_render_rule(rule, MD.renderer.rules[rule].__func__)  # type: ignore[attr-defined]
    raw = str(plain.renderer.render(tokens, MD.options, {}))
    assert _Reader().read(_lean(str(MD.renderer.render(tokens, MD.options, {})))) == (
        _Reader().read(raw)
    )
