"""The answer's Markdown drawn as it streams (`agentmd.MarkdownStream`): finished blocks once,
the growing block at every feed, and at the end the very HTML of the whole text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_notebook.render import agentmd
from acp_notebook.render.agentmd import MarkdownStream, to_html
from acp_notebook.render.highlight import code_html
from tests.hostile_payloads import TEXTS
from tests.markup_check import html_problems

#: Lines that make every kind of block and the cases where a later line changes an earlier one:
#: setext underlines, a table's delimiter row, lazy continuation, `#` before `#hashtag`, fences
#: opened and closed, lists, quotes, indented code, reference definitions.
LINES = [
    "para **bold** text",
    "more text",
    "",
    "",
    "# Title",
    "#",
    "#hashtag",
    "---",
    "===",
    "-",
    "- item",
    "  continued",
    "1. first",
    "2) second",
    "> quote",
    "> > deeper",
    "```python",
    "```",
    "~~~",
    "def f(x): return 'a'  # c",
    "    indented code",
    "| a | b |",
    "|---|---|",
    "| 1 | 2 |",
    "[ref]: https://example.com",
    "[ref] and [x](https://example.com)",
    "* * *",
    "<b>raw</b>",
    "\t- tabbed",
    "a\rb",
]


def whole(text: str) -> str:
    """`text` drawn at once by a stream of its own (`to_html` may go on from a text it saw)."""
    blocks, tail = MarkdownStream(live=False).feed(text)
    return "".join(blocks) + tail


def _stream(text: str, cuts: list[int]) -> tuple[list[str], str, MarkdownStream]:
    """`text` fed at `cuts` (offsets) to a live stream; the finished blocks and the last tail."""
    stream = MarkdownStream(live=False)
    blocks: list[str] = []
    tail = ""
    for end in [*sorted(cuts), len(text)]:
        new, tail = stream.feed(text[stream.done : end])
        blocks += new
    return blocks, tail, stream


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(LINES), max_size=14),
    st.lists(st.integers(0, 400), max_size=12),
    st.booleans(),
)
def test_streamed_equals_whole(lines: list[str], cuts: list[int], newline: bool) -> None:
    text = "\n".join(lines) + ("\n" if newline else "")
    cuts = [c for c in cuts if c <= len(text)]
    blocks, tail, _ = _stream(text, cuts)
    assert "".join(blocks) + tail == whole(text) == to_html(text)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab *_`#>-|\n[]():~=1.", max_size=200), st.lists(st.integers(0, 200)))
def test_streamed_equals_whole_any_text(text: str, cuts: list[int]) -> None:
    blocks, tail, _ = _stream(text, [c for c in cuts if c <= len(text)])
    assert "".join(blocks) + tail == whole(text) == to_html(text)


def test_finished_blocks_are_sent_once_and_the_tail_is_the_last_block() -> None:
    text = "Intro with **bold**.\n\n> a quote\n\n- one\n- two\n\n```py\nx = 1\n```\n\nlast\nline\n"
    stream = MarkdownStream()
    sent: list[str] = []
    tails: list[str] = []
    for end in range(1, len(text) + 1):
        new, tail = stream.feed(text[stream.done : end])
        sent += new
        tails.append(tail)
    assert len(sent) == len(set(sent)) == 4  # each block once: paragraph, quote, list, fence
    assert sent[0] == "<p>Intro with <strong>bold</strong>.</p>"
    assert sent[1].startswith("<blockquote>") and sent[2].startswith("<ul>")
    assert tails[-1] == "<p>last line</p>"
    assert "".join(sent) + tails[-1] == to_html(text)
    # While the quote streams, the tail is already a quote, not `>` shown raw.
    at = text.index("a quote") + 3
    assert all("<blockquote><p>a q" in t for t in tails[at : at + 4])


def test_a_fence_is_one_block_until_it_closes() -> None:
    stream = MarkdownStream()
    new, tail = stream.feed("```py\nx = 1\n\n\nparagraph?\n")
    assert new == [] and tail.startswith("<pre><code class=language-py>")
    new, tail = stream.feed("```py\nx = 1\n\n\nparagraph?\n```\nafter\n\nend\n")
    assert len(new) == 1 and new[0].startswith("<pre") and "paragraph?" in new[0]
    assert tail == "<p>after</p><p>end</p>"  # `end` may still be a setext heading's text


def test_a_table_header_waits_for_its_delimiter_row() -> None:
    stream = MarkdownStream()
    new, _ = stream.feed("text\n| a | b |\n")
    assert new == []  # `| a | b |` may be a paragraph's line or a table's header
    new, tail = stream.feed("text\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert new == ["<p>text</p>"] and tail.startswith("<table>")


def test_cost_per_feed_does_not_grow_with_the_answer() -> None:
    """Only the text after the finished blocks is read: after 2,000 paragraphs, the stream
    holds its place near the end and a feed reads a few lines."""
    stream = MarkdownStream()
    text = ""
    for i in range(2000):
        text += f"Paragraph {i} with *some* text.\n\n"
        stream.feed(text[stream.done :])
    assert len(text) - stream.done < 100


def test_long_blocks_and_long_texts_are_bounded() -> None:
    long_para = "word " * (agentmd.WINDOW // 5 + 10)
    html = to_html(long_para + "\n\n**after**")
    assert html.startswith("<pre class=acpnb-out>") and "<strong>" not in html
    big = "para\n\n" * (agentmd.MAX_CHARS // 6 + 100)
    blocks, tail, _ = _stream(big, list(range(0, len(big), 9_999)))
    assert "".join(blocks) + tail == whole(big) == to_html(big)
    assert "<pre class=acpnb-out>para" in tail or any("acpnb-out" in b for b in blocks)


@pytest.mark.parametrize("payload", TEXTS[:: max(1, len(TEXTS) // 80)])
def test_hostile_markdown_stays_inert_while_streaming(payload: str) -> None:
    """Every hostile payload (tests/hostile_payloads.py), in a fence and out of one, drawn as
    it streams at chunk boundaries anywhere: no block and no growing end the page gets has
    markup of the agent's (a tag, a handler, a script link)."""
    text = f"Intro **x**\n\n{payload}\n\n```html\n{payload}\n```\n\n> {payload}\n\n- {payload}\n"
    stream = MarkdownStream()
    for end in [*range(0, len(text), 7), len(text)]:
        new, tail = stream.feed(text[stream.done : end])
        for html in [*new, tail]:
            assert html_problems(html) == [], (payload, html)


def test_code_is_highlighted_and_escaped() -> None:
    html = code_html("def f(x):\n    return '<b>'  # c\n", "python")
    assert "<span class=k>def </span>" in html and "&lt;b&gt;" in html and "<b>" not in html
    assert code_html("<x>", "no-such-language") == "&lt;x&gt;"
    assert re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">") == (
        "def f(x):\n    return '<b>'  # c\n"
    )
