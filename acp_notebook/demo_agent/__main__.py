"""`python -m acp_notebook.demo_agent`: serve ACP on stdin/stdout until stdin closes."""

from __future__ import annotations

import os
import sys

from .agent import VERSION, DemoAgent
from .wire import Wire, log

SPEED_ENV = "ACP_NOTEBOOK_DEMO_SPEED"


def read_speed() -> float:
    """The delay multiplier from the environment; a bad value must not stop the demo."""
    raw = os.environ.get(SPEED_ENV, "1")
    try:
        speed = float(raw)
    except ValueError:
        speed = -1.0
    if not speed >= 0:  # also rejects NaN
        log(f"ignoring {SPEED_ENV}={raw!r}; using 1")
        return 1.0
    return speed


def main() -> int:
    agent = DemoAgent(Wire(sys.stdout.buffer), read_speed())
    log(f"demo agent {VERSION} ready (pid {os.getpid()})")
    try:
        for raw in sys.stdin.buffer:  # returns each line as soon as it is complete
            agent.handle_line(raw)
    except KeyboardInterrupt:
        pass
    agent.shutdown()  # stdin closed: the client is gone, so stop every turn
    return 0


if __name__ == "__main__":
    sys.exit(main())
