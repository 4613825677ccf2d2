"""What a turn costs in the saved notebook: its record against the text a reader sees.

A short and a long turn of the scripted agent run through `%%agent` in a real kernel (nbclient);
the notebook is written by nbformat as a headless run saves it. Saved bytes are the cell's
outputs in that file (the JSON framing included); the transcript (`MIME_TURN`) is counted apart
(issue 12 allows one per turn). "Visible" is the text a reader sees in the record as JupyterLab,
nbconvert HTML or GitHub draws it: the HTML view's text with every card opened (the thoughts,
each tool call's output), character references decoded, without the blank runs between tags;
not the `text/plain` summary, which has one line per tool call. Both figures are printed
(`pytest -s`) for the README.

Issue 12 asks for at most 3x. The record holds the text twice, as `text/plain` (which every
front-end falls back to, and LaTeX/PDF export shows) and as `text/html` (what every front-end
shows), and nbformat saves every line as a JSON string of its own: with markup-free HTML the
short turn would still be 3.9x and the long one 2.3x (printed below), so the short turn cannot
reach 3x while both stay, and the long one only with about 30 B of markup a tool call (a bare
`<details><summary></summary><pre></pre></details>` is 49 B; a card has 204 B). The last test
states the target and is expected to fail; the bounds the record meets are asserted before it.
"""

from __future__ import annotations

import copy
from html.parser import HTMLParser
from typing import Any

import nbformat
import pytest
from nbformat import NotebookNode

from acp_notebook.protocol.result import TurnResult
from tests.nb_util import MIME_TURN, execute, script, scripted

pytestmark = pytest.mark.timeout(180)

#: (saved bytes - transcript bytes) / visible bytes, at most: what the record reaches (5.4x and
#: 4.3x when measured), with a little room for the footer's figures (time, cost) that vary.
BOUNDS = {"short": 5.6, "long": 4.4}
#: Issue 12's target.
TARGET = 3.0


def usage(amount: float) -> dict[str, Any]:
    cost = {"amount": amount, "currency": "USD"}
    return {
        "update": {"sessionUpdate": "usage_update", "used": 5200, "size": 200_000, "cost": cost}
    }


def tool(i: int) -> dict[str, Any]:
    content = [{"type": "content", "content": {"type": "text", "text": f"line {i}\n" * 3}}]
    update = {"sessionUpdate": "tool_call", "toolCallId": f"c{i}", "title": f"Read file_{i}.txt"}
    return {"update": {**update, "kind": "read", "status": "completed", "content": content}}


SHORT = [
    {"say": "The file has 42 lines. The longest is line 17, about the $5 price of a coffee."},
    usage(0.0031),
]
ANSWER = (
    "## Summary\n\nI read the **25 files**. What they hold, in order:\n\n"
    + "".join(f"- `file_{i}.txt`: line {i} of the notes, about topic {i}.\n" for i in range(25))
    + "\n```python\nfor i in range(25):\n    print(open(f'file_{i}.txt').read())\n```\n\n"
    + "That is all; it cost about $0.02. " * 3
)
LONG = [
    {"think": "Let me read every file first, then sum up. " * 10},
    *(tool(i) for i in range(25)),
    {"say": ANSWER},
    usage(0.0213),
]


def saved_bytes(cell: NotebookNode, keep: Any = lambda mime: True) -> int:
    """The bytes the cell's outputs add to the file (only the MIME types `keep` accepts)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    empty = len(nbformat.writes(nb).encode())
    outputs = copy.deepcopy(cell.outputs)
    for out in outputs:
        for mime in [m for m in out.get("data", {}) if not keep(m)]:
            del out["data"][mime]
    nb.cells[0].outputs = outputs
    return len(nbformat.writes(nb).encode()) - empty


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []

    def handle_data(self, data: str) -> None:
        if data.strip():  # the newlines between block tags are nothing a reader sees
            self.chunks.append(data)


def visible_text(html: str) -> str:
    """The text of the HTML view, every `<details>` counted open (a reader can open each)."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    return "".join(parser.chunks)


def record(cell: NotebookNode) -> dict[str, Any]:
    records = [o for o in cell.outputs if MIME_TURN in o.get("data", {})]
    assert len(records) == 1, cell.outputs  # the record once
    data: dict[str, Any] = records[0]["data"]
    return data


def ratio(name: str, cell: NotebookNode) -> float:
    data = record(cell)
    visible = len(visible_text(data["text/html"]).encode())
    saved = saved_bytes(cell)
    transcript = saved - saved_bytes(cell, lambda mime: mime != MIME_TURN)
    rest = saved - transcript
    # The same record with HTML of no markup at all: how far markup alone could take it.
    bare = copy.deepcopy(cell)
    record(bare)["text/html"] = visible_text(data["text/html"])
    floor = saved_bytes(bare, lambda mime: mime != MIME_TURN) / visible
    plain = len(data["text/plain"].encode())
    print(
        f"\n{name} turn: {saved:,} B saved, of which {transcript:,} B transcript; "
        f"{visible:,} B visible ({plain:,} B text/plain): {rest / visible:.2f}x without the "
        f"transcript ({rest / plain:.2f}x of text/plain; {floor:.2f}x with markup-free HTML), "
        f"{saved / visible:.2f}x with it"
    )
    return rest / visible


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, NotebookNode]:
    """The two turns' cells, run once for the tests of this module."""
    agent = scripted()
    cells = [f"%%agent --agent {agent}\n{script(*steps)}" for steps in (SHORT, LONG)]
    nb = execute(cells, tmp_path_factory.mktemp("saved"), timeout=120)
    return dict(zip(("short", "long"), nb.cells, strict=True))


def test_a_turn_is_saved_in_a_few_times_its_visible_text(saved: dict[str, NotebookNode]) -> None:
    for name, cell in saved.items():
        data = record(cell)
        assert "<style" not in data["text/html"]
        assert "text/markdown" not in data  # a third copy no front-end shows beside the HTML
        transcript = data[MIME_TURN]
        # The answer once: the parts hold it, and reading the transcript back rebuilds the rest.
        assert "text" not in transcript and "thoughts" not in transcript, list(transcript)
        result = TurnResult.from_json(transcript)
        assert result.text.startswith("## Summary" if name == "long" else "The file has 42")
        assert result.thoughts == (
            "Let me read every file first, then sum up. " * 10 if name == "long" else ""
        )
        assert ratio(name, cell) <= BOUNDS[name], f"{name}: over {BOUNDS[name]}x"


@pytest.mark.xfail(
    strict=True,
    reason="text/plain and text/html each hold the text and nbformat frames every line: 3x is "
    "out of reach for the short turn whatever the markup (see the module's docstring)",
)
def test_a_turn_is_saved_in_at_most_three_times_its_visible_text(
    saved: dict[str, NotebookNode],
) -> None:
    ratios = {name: ratio(name, cell) for name, cell in saved.items()}
    assert all(r <= TARGET for r in ratios.values()), ratios
