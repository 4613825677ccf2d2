"""Helpers for driving the scripted agent (tests/agents/scripted/) from tests.

Tests choose how it runs: `agent_command(*flags)` is the argv of a real process (for tests of
the process, its exit, stderr pipe, signals, process tree); `in_process()` is the client option
that runs the agent those flags name on a thread of the test's own process instead, behind the
client's in-process transport (for tests of the client's logic: no spawn per test).
"""

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from acp_notebook.client.transport import InProcessTransport, TransportFactory
from tests.agents.scripted import serve_streams

AGENT_PATH = Path(__file__).with_name("scripted_agent.py")
SCRIPT_PREFIX = "#script "


def script(*steps: dict[str, Any]) -> str:
    """Prompt text that makes the scripted agent run ``steps`` in order during one turn."""
    return SCRIPT_PREFIX + json.dumps(list(steps))


def agent_command(*flags: str) -> list[str]:
    """The argv that starts the scripted agent with this interpreter and ``flags``."""
    return [sys.executable, str(AGENT_PATH), *flags]


def _flags(command: Sequence[str]) -> list[str]:
    """The flags of an `agent_command()` argv: what follows the agent's path."""
    return list(command[list(command).index(str(AGENT_PATH)) + 1 :])


def _start(
    command: Sequence[str], env: Mapping[str, str | None], cwd: str, stderr_limit: int
) -> InProcessTransport:
    # Named by its command line, as the process would be: messages quote it.
    return InProcessTransport(
        partial(serve_streams, _flags(command)),
        name=shlex.join(command),
        env=env,
        argv=command,
        stderr_limit=stderr_limit,
    )


def in_process() -> TransportFactory:
    """`ClientOptions.transport` for the scripted agent in this process: the client's command
    stays an `agent_command()` argv, whose flags the in-process agent takes."""
    return _start
