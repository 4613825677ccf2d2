"""The record says which notebook cells the agent's cell tools touched (issue 22 item 5).

A card of the client's own (`insert_cell`, `edit_cell`, `run_cell`) carries a link to the cell
(`labels.cell_link`): the HTML draws it as a link the JupyterLab extension follows (a click
scrolls the notebook to the cell), plain text with the cell's name elsewhere; the text and
Markdown views name the cell. The agent's own cards get no such link, and nothing of the
agent's reaches an attribute unescaped.
"""

from __future__ import annotations

from typing import Any

from acp_notebook.render import render_bundle
from acp_notebook.render.labels import CELL_URI, cell_link
from tests.unit.test_render import audit, turn


def card(by_client: bool, *links: tuple[str, str]) -> dict[str, Any]:
    content = [{"type": "content", "content": {"type": "text", "text": "Inserted."}}]
    content += [cell_link(CELL_URI + cell_id, name) for cell_id, name in links]
    part: dict[str, Any] = {
        "type": "tool_call",
        "id": "p1",
        "toolCallId": "c1",
        "title": "Insert a code cell",
        "kind": "edit",
        "status": "completed",
        "content": content,
    }
    if by_client:
        part["byClient"] = True
    return turn(parts=[part])


def test_a_client_card_links_its_cell_in_every_view() -> None:
    bundle = render_bundle(card(True, ("ab-12_c", "cell 3 (id ab-12_c)")))
    html = bundle["text/html"]
    assert (
        "<a class=acpnb-cell data-cell=ab-12_c title='Show the cell in the notebook'>"
        "cell 3 (id ab-12_c)</a>" in html
    )
    assert CELL_URI not in html  # drawn as the cell's link, not as a link of the agent's
    assert "→ cell 3 (id ab-12_c)" in bundle["text/plain"]
    assert "↪ cell 3 \\(id ab\\-12\\_c\\)" in bundle["text/markdown"]  # escaped Markdown


def test_the_agents_cards_and_bad_ids_link_no_cell() -> None:
    hostile = "x' onclick='alert(1)"
    for bundle in (
        render_bundle(card(False, ("ab", "cell 1 (id ab)"))),
        render_bundle(card(True, (hostile, "cell <b>1</b>"))),
    ):
        html = bundle["text/html"]
        assert "acpnb-cell" not in html and "data-cell" not in html
        assert audit(html) == []
        assert "→" not in bundle["text/plain"]
    # A name of the agent's words is escaped and one line.
    html = render_bundle(card(True, ("ok", "<img src=x>\nsecond")))["text/html"]
    assert ">&lt;img src=x&gt; second</a>" in html and audit(html) == []
