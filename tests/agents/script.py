"""Helpers for driving tests/agents/scripted_agent.py from tests."""

import json
import sys
from pathlib import Path
from typing import Any

AGENT_PATH = Path(__file__).with_name("scripted_agent.py")
SCRIPT_PREFIX = "#script "


def script(*steps: dict[str, Any]) -> str:
    """Prompt text that makes the scripted agent run ``steps`` in order during one turn."""
    return SCRIPT_PREFIX + json.dumps(list(steps))


def agent_command(*flags: str) -> list[str]:
    """The argv that starts the scripted agent with this interpreter and ``flags``."""
    return [sys.executable, str(AGENT_PATH), *flags]
