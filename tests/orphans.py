"""Child processes that die with the test process that started them, even when it is SIGKILLed.

A killed pytest worker runs no teardown: a server started in a session of its own (the `lab`
fixture's JupyterLab) would outlive it, and so would that server's kernels. On Linux the command
is started through a small Python prelude that asks the kernel for SIGTERM when its parent dies
(prctl PR_SET_PDEATHSIG, kept across exec) and then execs the real command; JupyterLab shuts its
kernels down on SIGTERM, and a kernel also exits by itself when its parent is gone.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["dies_with_parent"]

PR_SET_PDEATHSIG = 1

# argv: the parent's pid, then the command. The parent may die between fork and prctl: then the
# child has been reparented already and exits instead of starting the command.
_PRELUDE = (
    "import ctypes, os, sys\n"
    f"ctypes.CDLL(None, use_errno=True).prctl({PR_SET_PDEATHSIG}, {int(signal.SIGTERM)}, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def dies_with_parent(command: list[str]) -> list[str]:
    """`command`, started so that it gets SIGTERM when this process dies (Linux; elsewhere
    unchanged). Start it from a thread that lives as long as this process: the signal follows
    the death of the thread that forked."""
    if not sys.platform.startswith("linux"):
        return list(command)
    return [sys.executable, "-c", _PRELUDE, str(os.getpid()), *command]
