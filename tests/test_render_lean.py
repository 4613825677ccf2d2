"""The lean record markup (`agentmd._lean`, `pre_text`) shows the reader what the plain markup
did: an agent's carriage returns and newlines inside a `<pre>` keep their meaning."""

from __future__ import annotations

import html as html_lib
import re

import pytest

from acp_notebook.render import render_bundle
from acp_notebook.render.agentmd import pre_text


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
