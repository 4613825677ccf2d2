"""What a session knows, as the agent last told it: modes, config options, commands, title,
usage, and its turns. Read-only views of the session's fold, shared by `Session`."""

from __future__ import annotations

from typing import Any

from ..protocol.fold import SessionFold
from ..protocol.state import Usage
from ..protocol.turn import TurnRecord


class SessionState:
    """The fold's session-level state, read-only (the fold alone changes it)."""

    _fold: SessionFold

    @property
    def mode(self) -> str | None:
        return self._fold.facts.current_mode_id

    @property
    def modes(self) -> list[dict[str, Any]]:
        return self._fold.facts.modes

    @property
    def config_options(self) -> list[dict[str, Any]]:
        return self._fold.facts.config_options

    @property
    def commands(self) -> list[dict[str, Any]]:
        return self._fold.facts.commands

    @property
    def title(self) -> str | None:
        title = self._fold.facts.info.get("title")
        return title if isinstance(title, str) else None

    @property
    def info(self) -> dict[str, Any]:
        return self._fold.facts.info

    @property
    def usage(self) -> Usage | None:
        return self._fold.facts.usage

    @property
    def history(self) -> list[TurnRecord]:
        """Every finished turn, including turns replayed by `session/load`."""
        return self._fold.history

    @property
    def ambient(self) -> TurnRecord:
        """Updates that arrived outside any turn."""
        return self._fold.ambient

    @property
    def turn_record(self) -> TurnRecord | None:
        """The live record of the turn in progress (what the agent sent so far), or None.

        For views that redraw a running turn; it is mutated as updates arrive: read, don't keep.
        """
        return self._fold.turn
