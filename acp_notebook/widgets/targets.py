"""ipywidgets' comm targets, registered when the extension loads without importing ipywidgets.

Importing ipywidgets registers the "jupyter.widget.control" comm target, which a widget
front-end (JupyterLab, Notebook 7, VS Code) opens once when it connects to the kernel; an open
that finds no target is refused, and then `AcpNotebook.is_interactive()` never sees a widget
front-end (no Stop or permission buttons). Importing ipywidgets at load cost every kernel tens
of milliseconds, though most never show a widget. So the extension registers both of its targets
with stand-ins that import ipywidgets when a front-end opens one and hand the open to it; the
import registers ipywidgets' own handlers, which take every later open.
"""

from __future__ import annotations

import sys
from typing import Any

CONTROL = "jupyter.widget.control"
WIDGET = "jupyter.widget"


def _open_control(comm: Any, msg: dict[str, Any]) -> None:
    from ipywidgets import Widget

    Widget.handle_control_comm_opened(comm, msg)


def _open_widget(comm: Any, msg: dict[str, Any]) -> None:
    from ipywidgets import Widget

    Widget.handle_comm_opened(comm, msg)


def front_end_connected() -> bool:
    """Whether a widget front-end is connected (someone can click buttons)."""
    from ipywidgets import Widget

    # A widget front-end (JupyterLab, Notebook 7, VS Code) opens the widget control comm when it
    # connects; nbclient, papermill and `jupyter execute` never do. ipywidgets keeps that comm in
    # a private attribute and offers no public way to ask: read, never written.
    return getattr(Widget, "_control_comm", None) is not None


def register_lazily() -> None:
    """Stand-ins for ipywidgets' two targets, unless ipywidgets is imported (its own are)."""
    if "ipywidgets" in sys.modules:
        return
    import comm

    manager = comm.get_comm_manager()  # the kernel's (ipykernel installs it), as ipywidgets uses
    manager.register_target(CONTROL, _open_control)
    manager.register_target(WIDGET, _open_widget)
