"""What the notebook layer needs from the object that registered the magics.

`magics.AcpNotebook` is that object (its traitlets configuration, the kernel's namespace); the
`%%agent` flow (`cell`) and the `%agent` commands (`commands`) take it as a `Host` and
use nothing else of it, so they never import `magics.py`.

The widget views come the same way (`Host.widgets`, typed as `Widgets` here): the notebook layer
never imports `widgets/`, which sits beside it on the display layer (tests/unit/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..config import Registry
from .runtime import Runtime

if TYPE_CHECKING:
    from ..client.session import Session
    from ..client.turn import TurnHandle
    from ..display.live import LiveView
    from ..protocol.redact import Redactor


class Starting(Protocol):
    """A turn's view shown while its agent and session start, with Stop (`on_stop`, set by the
    cell to cancel the start; `stopping` once pressed); `end` replaces it when no turn came."""

    on_stop: Callable[[], object]
    stopping: bool

    def end(self, bundle: dict[str, Any]) -> None:
        """No turn came of it: `bundle` (ours, static) in place of the view."""


class Widgets(Protocol):
    """The widget views of a front-end that can show them (widgets/kit.py's `WidgetKit`)."""

    def starting(self) -> Starting:
        """A view saying "starting agent…", shown at once."""

    def turn_view(
        self,
        session: Session,
        turn: TurnHandle,
        *,
        on_stop: Callable[[], object],
        max_rate: float,
        redactor: Redactor,
        permission_timeout: float,
        start: Starting | None,
        next_cell: str = "%%agent",
    ) -> LiveView:
        """The live view of `turn`, drawn by a widget, in the place of `start` if given;
        `next_cell` is the first line of the cell a prompt suggestion is put in."""

    def chat(self, session: Session, *, redactor: Redactor) -> Any:
        """A chat widget on `session` (the value of `%agent chat`)."""


class Host(Protocol):
    """The kernel's agents and settings, as the magics see them."""

    @property
    def runtime(self) -> Runtime:
        """The kernel's agents and named sessions."""

    @property
    def user_ns(self) -> dict[str, Any]:
        """The kernel's namespace: `--with` reads it, `--out` and `_agent_status` write it."""

    @property
    def shell(self) -> Any:
        """IPython's shell: its history and last error (`--cells`, `--error`)."""

    @property
    def timeout(self) -> float:
        """The default `--timeout` in seconds (0: none)."""

    @property
    def cancel_grace(self) -> float:
        """Seconds an agent gets to answer session/cancel before it is killed."""

    @property
    def max_update_rate(self) -> float:
        """Display updates per second while a turn streams."""

    @property
    def view_update_rate(self) -> float:
        """Messages per second to a turn's widget view while a turn streams."""

    @property
    def remember_sessions(self) -> bool:
        """Whether named sessions' ids are kept in `.acp_notebook/sessions.json` to resume them
        after a kernel restart."""

    @property
    def fork_cells(self) -> bool:
        """Whether a cell run again runs on a fork of its turn's point (`cell_forks.py`)."""

    @property
    def permission_timeout(self) -> float:
        """Seconds a permission request waits for a click (0: no limit)."""

    @property
    def max_cost_total(self) -> float:
        """USD this kernel's turns may cost in all (0: no limit); see `notebook.ledger`."""

    @property
    def execution_count(self) -> int | None:
        """The number of the cell being run (for the ledger), when the shell says."""

    @property
    def replay(self) -> str:
        """The recorded notebook `%%agent` cells are replayed from ("": run the agents)."""

    @property
    def replay_mode(self) -> str:
        """`strict` (a changed cell fails) or `fill` (its agent runs)."""

    @property
    def kernel_tools(self) -> bool:
        """Whether new sessions get the kernel's MCP tools (`kernel_tools/server.py`)."""

    def registry(self) -> Registry:
        """The agents one can name, read anew (config, TOML file, built-ins)."""

    def client_options(self) -> dict[str, Any]:
        """`connect()` options from the configuration (fs, terminal, policy...)."""

    def is_interactive(self) -> bool:
        """Whether someone can click buttons (a widget front-end is connected)."""

    @property
    def widgets(self) -> Widgets:
        """The widget views (ipywidgets is imported when this is first read)."""
