"""The one part model: the fold's parts, written into a transcript and read back, are the same
parts; a transcript of any shape reads without raising; a part kind the views do not know is
still shown."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from acp_notebook.protocol.fold import SessionFold
from acp_notebook.protocol.state import (
    MessagePart,
    PermissionPart,
    RawPart,
    ToolCallPart,
    part_from_json,
)
from acp_notebook.protocol.terminals import TerminalView
from acp_notebook.protocol.turn import Transcript, finish, read_turn
from acp_notebook.render import render_html, render_markdown, render_text
from tests.hostile.test_fuzz import json_values, near_valid


@given(updates=st.lists(json_values | near_valid(), min_size=1, max_size=8))
@example(
    updates=[
        {"sessionUpdate": ""},
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "",
            "content": {"type": "text", "text": "x"},
        },
    ]
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_folds_parts_read_back_from_the_transcript_are_the_same_parts(
    updates: list[Any],
) -> None:
    # Reading drops NULs from the strings it reads (no view could show one): none here.
    assume("\\u0000" not in json.dumps(updates))
    fold = SessionFold()
    fold.begin_turn("turn-1", [])
    for update in updates:
        fold.apply(update)
    record = fold.end_turn()
    assert record is not None
    result = finish(
        record,
        stop_reason="end_turn",
        error=None,
        usage=fold.facts.usage,
        session_id="s",
        agent="a",
    )
    saved = json.loads(json.dumps(result.to_json()))  # as a notebook holds it
    turn = read_turn(saved)
    assert [type(p) for p in turn.parts] == [type(p) for p in result.parts]
    assert [p.to_json() for p in turn.parts] == saved["parts"]
    assert turn.usage == fold.facts.usage
    assert (turn.text, turn.thoughts, turn.plan) == (result.text, result.thoughts, result.plan)


def test_a_finished_turn_reads_back_part_for_part() -> None:
    message = MessagePart("m1", "agent", "msg-1")
    message.append("Hello ")
    message.append("world")
    call = ToolCallPart(
        "t1",
        "c1",
        "Run it",
        "execute",
        "completed",
        content=[{"type": "terminal", "terminalId": "term-1"}],
        locations=[{"path": "/w/a.py", "line": 2}],
        raw_input={"cmd": "ls"},
    )
    asked = PermissionPart(
        "p1",
        "c1",
        "Run it",
        [{"optionId": "y", "name": "Yes", "kind": "allow_once"}],
        "selected",
        "y",
        "user",
    )
    term = TerminalView("term-1", "ls")
    term.append(b"a.py\n")
    term.exit_code = 0
    transcript = {
        "turnId": "t",
        "parts": [p.to_json() for p in (message, call, asked)],
        "terminals": [term.to_json()],
    }
    turn = read_turn(transcript)
    read_message, read_call, read_asked = turn.parts
    assert isinstance(read_message, MessagePart) and read_message.text == "Hello world"
    assert read_message.message_id == "msg-1" and turn.text == "Hello world"
    assert isinstance(read_call, ToolCallPart) and read_call.to_json() == call.to_json()
    assert [loc.line for loc in read_call.location_items] == [2]
    assert isinstance(read_asked, PermissionPart) and read_asked.to_json() == asked.to_json()
    chosen = read_asked.chosen_item(read_asked.option_items)
    assert chosen is not None and chosen.kind == "allow_once"
    assert turn.terminals["term-1"] == term.snapshot()


@given(json_values)
@settings(max_examples=200, deadline=None)
def test_any_part_dict_reads_without_raising(value: Any) -> None:
    for d in (
        value,
        {"type": "tool_call", "content": value, "locations": value},
        {"type": "permission", "options": value, "outcome": value},
        {"type": "message", "role": value, "blocks": value, "text": value},
    ):
        if isinstance(d, dict):
            part = part_from_json(d)
            json.dumps(part.to_json())
            if isinstance(part, ToolCallPart):
                assert isinstance(part.content_items, tuple) and isinstance(
                    part.location_items, tuple
                )
            if isinstance(part, PermissionPart):
                part.chosen_item(part.option_items)


def test_an_unknown_part_type_reads_as_data() -> None:
    part = part_from_json({"type": "hologram", "id": "h1", "x": [1, 2]})
    assert isinstance(part, RawPart) and part.update_kind == "part hologram"
    assert part.raw == {"type": "hologram", "id": "h1", "x": [1, 2]}


@dataclass(eq=False)
class _Note:
    """A part kind newer than the views: the model and the fold are all it has."""

    part_id: str
    kind = "note"

    def to_json(self) -> dict[str, Any]:
        return {"type": "note", "id": self.part_id, "text": "<b>a new kind</b>"}


def test_a_part_kind_the_views_do_not_know_is_still_shown() -> None:
    base = read_turn({"turnId": "t", "stopReason": "end_turn"})
    fields = {name: getattr(base, name) for name in Transcript.__dataclass_fields__}
    turn = Transcript(**{**fields, "parts": (_Note("n1"),)})  # type: ignore[arg-type]
    html = render_html(turn)
    assert "note part" in html and "&lt;b&gt;a new kind&lt;/b&gt;" in html
    assert "<b>" not in html
    assert "• a note part" in render_text(turn)
    assert "<code>note</code> part" in render_markdown(turn)


def test_render_submodules_do_not_import_from_the_package() -> None:
    """No cycle through `render/__init__`: a submodule imports its siblings, never a name that
    the package re-exports."""
    render = Path(__file__).parents[2] / "acp_notebook" / "render"
    modules = {p.stem for p in render.glob("*.py")}
    for path in render.glob("*.py"):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module is None:
                    assert {a.name for a in node.names} <= modules, path.name
                assert node.module != "acp_notebook.render", path.name
                assert not (node.level == 2 and node.module == "render"), path.name
