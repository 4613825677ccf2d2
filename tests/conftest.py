"""Fixtures for the client-core tests (tests/test_client_*.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.client_helpers import Agent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    return Agent(tmp_path)
