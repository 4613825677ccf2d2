"""What a test session starts dies with it: tests/orphans.py, used by the `lab` fixture."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nb_util import process_gone
from tests.polling import wait_until

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's"),
]

# A stand-in for a pytest worker: starts a long-lived child the way conftest starts JupyterLab
# (a session of its own, so no signal to the parent's group reaches it), prints its pid, waits.
PARENT = """
import subprocess, sys, time
from tests.orphans import dies_with_parent
command = [sys.executable, "-c", "import time; time.sleep(120)"]
if sys.argv[1] == "guarded":
    command = dies_with_parent(command)
child = subprocess.Popen(command, start_new_session=True)
print(child.pid, flush=True)
time.sleep(120)
"""


def start_parent(how: str) -> tuple[subprocess.Popen[str], int]:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, how], stdout=subprocess.PIPE, text=True, env=env
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    # The child runs the prelude, then execs the sleeper: wait for the exec, so the kill below
    # tests the guard of the real command, not of the prelude.
    wait_until(
        lambda: "time.sleep" in Path(f"/proc/{child}/cmdline").read_text(), 20, "the child's exec"
    )
    return parent, child


def test_a_guarded_child_dies_when_its_parent_is_killed() -> None:
    parent, child = start_parent("guarded")
    with parent:  # closes its stdout
        parent.kill()  # SIGKILL: the parent runs no cleanup at all
        parent.wait(10)
    wait_until(lambda: process_gone(child), 10, f"the guarded child {child} to die")


def test_an_unguarded_child_outlives_its_killed_parent() -> None:
    """The control: without the guard the same child survives (what the guard is for)."""
    parent, child = start_parent("unguarded")
    try:
        with parent:  # closes its stdout
            parent.kill()
            parent.wait(10)
        with pytest.raises(AssertionError, match="timed out"):
            wait_until(lambda: process_gone(child), 2, "the unguarded child to die")
    finally:
        if not process_gone(child):
            os.kill(child, signal.SIGKILL)
