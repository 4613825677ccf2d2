"""The session's title (`session_info_update`) is in the turn's result, transcript and footer
(issue 11), escaped where it is drawn."""

from __future__ import annotations

import json

import pytest

from acp_notebook.protocol.turn import read_turn
from acp_notebook.render import render_html, render_markdown, render_text
from tests.agents.script import script
from tests.client_helpers import Agent


@pytest.mark.anyio
@pytest.mark.scripted_agent("in_process")
async def test_the_title_the_agent_gave_ends_up_in_the_record(agent: Agent) -> None:
    title = {"sessionUpdate": "session_info_update", "title": "Fix <b>the</b>\n  parser"}
    async with agent.session(bound=30) as session:
        untitled = await (await session.prompt("hello")).finished
        titled = await (await session.prompt(script({"update": title}, {"say": "ok"}))).finished
    assert untitled.title is None and "title" not in untitled.to_json()
    assert titled.title == "Fix <b>the</b> parser"  # one line
    saved = json.loads(json.dumps(titled.to_json()))
    assert saved["title"] == "Fix <b>the</b> parser"
    turn = read_turn(saved)
    assert "session: Fix <b>the</b> parser" in render_text(turn)
    assert "session: Fix &lt;b&gt;the&lt;/b&gt; parser" in render_html(turn)
    assert "<b>the</b>" not in render_markdown(turn)
