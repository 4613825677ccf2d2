"""How `--mode` and `--config` reach the agent (unit tests with a stand-in session)."""

from __future__ import annotations

from typing import Any

import pytest

from acp_notebook.notebook.options import CellOptions
from acp_notebook.notebook.start import apply_settings

pytestmark = pytest.mark.anyio


class FakeSession:
    def __init__(self, config_options: list[dict[str, Any]]) -> None:
        self.config_options = config_options
        self.calls: list[tuple[str, Any]] = []

    async def set_mode(self, mode: str) -> None:
        self.calls.append(("set_mode", mode))

    async def set_config_option(self, key: str, value: Any) -> None:
        self.calls.append((key, value))


async def test_mode_uses_a_mode_config_option_when_the_agent_has_one() -> None:
    session = FakeSession([{"id": "agent_mode", "category": "mode", "type": "select"}])
    await apply_settings(session, CellOptions(mode="plan"))  # type: ignore[arg-type]
    assert session.calls == [("agent_mode", "plan")]


async def test_mode_falls_back_to_legacy_modes() -> None:
    session = FakeSession([{"id": "model", "category": "model", "type": "select"}])
    await apply_settings(session, CellOptions(mode="code"))  # type: ignore[arg-type]
    assert session.calls == [("set_mode", "code")]


async def test_boolean_config_values_are_parsed() -> None:
    session = FakeSession([{"id": "verbose", "type": "boolean"}])
    await apply_settings(
        session,
        CellOptions(
            config=[
                ("verbose", "yes"),  # type: ignore[arg-type]
                ("model", "fast"),
            ]
        ),
    )
    assert session.calls == [("verbose", True), ("model", "fast")]
