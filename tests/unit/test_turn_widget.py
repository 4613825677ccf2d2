"""The turn view (widgets/turn_view.py): what its widget's state carries, and its record drawn
again for prompt suggestions sent after the turn (on the in-process scripted agent)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.protocol.mutations import Mutation, PartUpdated
from acp_notebook.protocol.suggestions import SuggestionsPart
from acp_notebook.widgets import turn_view
from tests.agents.script import script
from tests.client_helpers import Watcher


def test_the_views_widget_carries_a_loader_and_the_module_goes_once_a_page() -> None:
    """Issue 23, item 12: a turn view's state holds a loader of 2 KB, not its module and
    stylesheet (48 KB), which the page asks for once (static/loader.js) by their version."""
    loader = turn_view.TurnWidget._esm
    assert len(loader) <= 2_500 and turn_view.TurnWidget._css == ""
    assert f'const KEY = "{turn_view.MODULE_KEY}";' in loader
    assert "export default { render }" in turn_view.MODULE
    assert len(turn_view.MODULE) + len(turn_view.STYLE) > 40_000
    # Comment lines and indentation go; code, strings and a `//` inside a line stay.
    source = 'const a = "x"; // why\n  // a comment\n\n  if (a) { b("//"); }\n'
    assert turn_view.compact_js(source) == 'const a = "x"; // why\nif (a) { b("//"); }'


class Handle:
    """The record's display handle: what each drawing of it showed (`publish.update`)."""

    def __init__(self) -> None:
        self.drawn: list[str] = []

    def update(self, bundle: dict[str, Any], raw: bool = False) -> None:
        self.drawn.append(bundle["text/html"])


@pytest.mark.scripted_agent("in_process")
def test_late_suggestions_redraw_the_record_when_they_change_and_at_most_max_times(
    agent: Any, tmp_path: Path
) -> None:
    """An agent that sends prompt suggestions in a loop after its turn ended: the record is
    drawn again for a list that changed only (the same list three times: one drawing), and
    `MAX_LATE_REDRAWS` times at most; after that the view stops listening, the record stays."""
    same = [["Run the tests"]] * 3
    changed = [[f"Try number {i}"] for i in range(turn_view.MAX_LATE_REDRAWS + 10)]
    fifo = tmp_path / "late.fifo"  # the agent sends them once the record is drawn
    os.mkfifo(fifo)
    after = [{"wait_fifo": str(fifo)}, *({"suggest": s} for s in same + changed)]

    def last_list(m: Mutation) -> bool:
        part = m.part if isinstance(m, PartUpdated) else None
        return isinstance(part, SuggestionsPart) and part.suggestions == changed[-1]

    async def main() -> tuple[Handle, int]:
        async with agent.client() as client:
            session = await client.new_session()
            watcher = Watcher(session)
            turn = await session.prompt(script({"say": "Done."}, {"after_turn": after}))
            view = turn_view.TurnView(session, turn, on_stop=lambda: None)
            handle = Handle()
            view.view_handle = handle  # type: ignore[assignment]  # as the cell's, recorded
            view.start()
            view.finish(await turn.finished, keep_record=True)
            await view.aclose()
            first = len(handle.drawn)  # the record in the view's place
            await asyncio.to_thread(fifo.write_text, "go")
            await watcher.wait_for(last_list, timeout=30)  # heard after the view: all sent
            return handle, first

    handle, first = asyncio.run(main())
    late = handle.drawn[first:]
    assert len(late) == turn_view.MAX_LATE_REDRAWS, len(late)
    assert "Run the tests" in late[0] and "Run the tests" not in late[1]
    # The last drawing is the last list within the limit: the record stays as it was drawn.
    assert f"Try number {turn_view.MAX_LATE_REDRAWS - 2}" in late[-1]
    assert all(f"Try number {turn_view.MAX_LATE_REDRAWS - 1}" not in d for d in late)
