"""The turn view's widget (widgets/turn_view.py's `TurnWidget`), pure: what its state carries."""

from __future__ import annotations

from acp_notebook.widgets import turn_view


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
