"""Prompt suggestions (unstable `prompt_suggestions_update`): folded as one part of the turn that
each update replaces, bounded; drawn under the answer as buttons, listed in the record and the
text; hostile text stays inert."""

from __future__ import annotations

from typing import Any

from acp_notebook.protocol.fold import SessionFold
from acp_notebook.protocol.mutations import Mutation, PartUpdated
from acp_notebook.protocol.state import RawPart, part_from_json
from acp_notebook.protocol.suggestions import (
    MAX_SUGGESTIONS,
    SUGGESTION_CHARS,
    SuggestionsPart,
)
from acp_notebook.protocol.turn import read_turn
from acp_notebook.render import render_html, render_markdown, render_text
from acp_notebook.run.printer import TurnPrinter

EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def update(*prompts: Any) -> dict[str, Any]:
    return {
        "sessionUpdate": "prompt_suggestions_update",
        "suggestions": [
            {"prompt": p if isinstance(p, list) else [{"type": "text", "text": p}]} for p in prompts
        ],
    }


def folded(*updates: dict[str, Any]) -> tuple[SessionFold, list[Mutation]]:
    heard: list[Mutation] = []
    fold = SessionFold(heard.append)
    fold.begin_turn("t1", [])
    fold.apply({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "A"}})
    for u in updates:
        fold.apply(u)
    return fold, heard


def suggestion_parts(fold: SessionFold) -> list[SuggestionsPart]:
    assert fold.turn is not None
    return [p for p in fold.turn.parts if isinstance(p, SuggestionsPart)]


def test_each_update_replaces_the_list_in_place() -> None:
    fold, heard = folded(update("Run the tests", "Fix it"), update("Only this"))
    (part,) = suggestion_parts(fold)
    assert part.suggestions == ["Only this"]
    assert sum(isinstance(m, PartUpdated) and m.part is part for m in heard) == 2
    fold.apply(update())  # an empty list withdraws them
    assert part.suggestions == [] and "Suggested" not in render_html(
        read_turn({"turnId": "t", "parts": [part.to_json()]})
    )


def test_a_prompt_is_its_text_and_links_and_what_has_neither_is_left_out() -> None:
    link = {"type": "resource_link", "uri": "file:///nb/a.py", "name": "a.py"}
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    fold, _ = folded(
        update([{"type": "text", "text": "Read "}, link], [image], "Read file:///nb/a.py")
    )
    (part,) = suggestion_parts(fold)
    assert part.suggestions == ["Read file:///nb/a.py"]  # the duplicate and the image go


def test_hostile_lists_are_bounded_and_malformed_ones_kept_raw() -> None:
    many = update(*(f"s{i}" for i in range(MAX_SUGGESTIONS + 5)))
    huge = update("x" * (SUGGESTION_CHARS * 3), *[[{"type": "text", "text": "y"}] * 500])
    fold, _ = folded(many)
    assert fold.turn is not None and fold.turn.dropped["suggestions"] == 5
    (part,) = suggestion_parts(fold)
    assert len(part.suggestions) == MAX_SUGGESTIONS
    fold.apply(huge)
    assert [len(s) for s in part.suggestions] == [SUGGESTION_CHARS, 20]
    for bad in ({"suggestions": "no"}, {"suggestions": None}, {}):
        fold.apply({"sessionUpdate": "prompt_suggestions_update", **bad})
    raws = [p for p in fold.turn.parts if isinstance(p, RawPart)]
    assert len(raws) == 3 and all("suggestions must be a list" in (r.problem or "") for r in raws)
    fold.apply({"sessionUpdate": "prompt_suggestions_update", "suggestions": [1, {"prompt": 2}]})
    assert part.suggestions == []
    # A huge list: read up to the bound, the rest counted, not compared one by one.
    # Distinct items, so an unbounded reading would compare them pairwise (~10^10 times); 200,000
    # of them, not a million: building the list is what costs the test its time.
    endless = update(*(f"t{i}" for i in range(200_000)))
    fold.apply(endless)
    assert len(part.suggestions) == MAX_SUGGESTIONS
    assert fold.turn.dropped["suggestions"] == 5 + 200_000 - MAX_SUGGESTIONS


def test_buttons_under_the_answer_and_a_list_in_the_record_all_escaped() -> None:
    part = {"type": "suggestions", "id": "g1", "suggestions": ["Run " + EVIL, "Plot it"]}
    view = read_turn({"turnId": "t1", "text": "A", "parts": [part]})
    html = render_html(view)
    assert html.count("class=acpnb-suggestion ") == 2 and "role=button" in html
    assert "&lt;script&gt;" in html and "<script>" not in html and "<img" not in html
    md = render_markdown(view)
    assert "**Suggested next**" in md and "- Plot it" in md and "<script>" not in md
    text = render_text(view)
    assert "💡 suggested next: Plot it" in text and f"💡 suggested next: Run {EVIL}" in text


def test_the_printer_tells_the_list_as_the_turn_ends() -> None:
    part = {"type": "suggestions", "id": "g1", "suggestions": ["Plot it"]}
    done = {"turnId": "t1", "parts": [part], "success": True, "stopReason": "end_turn"}
    lines = [x.text for x in TurnPrinter().feed(done)]
    assert "💡 suggested next: Plot it" in lines


def test_a_saved_part_reads_whatever_it_holds() -> None:
    for junk in ({}, {"suggestions": "x"}, {"suggestions": [1, None, "", "ok", "z" * 10**5]}):
        part = part_from_json({"type": "suggestions", "id": "g", **junk})
        assert isinstance(part, SuggestionsPart)
        assert all(type(s) is str and 0 < len(s) <= SUGGESTION_CHARS for s in part.suggestions)
    saved = part_from_json({"type": "suggestions", "id": "g", "suggestions": ["a"] * 50})
    assert isinstance(saved, SuggestionsPart) and len(saved.suggestions) == MAX_SUGGESTIONS


def test_the_new_cell_goes_on_with_the_turns_agent_and_session_only() -> None:
    from acp_notebook.notebook.cell import next_cell_line
    from acp_notebook.notebook.options import parse_cell_line

    opts = parse_cell_line("--agent 'my agent --flag' -s 'a b' --new --out r -q")
    assert next_cell_line(opts) == "%%agent --agent 'my agent --flag' --session 'a b'"
    assert next_cell_line(parse_cell_line("")) == "%%agent"
