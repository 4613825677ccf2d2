"""Runs one terminal command and guarantees that nothing it started outlives the terminal.

Started by `terminal.py` as `python -I -S supervisor.py PARENT_PID ARGV...` (a plain script,
standard library only, so it starts in a few milliseconds). On Linux it makes itself the child
subreaper of its subtree (`PR_SET_CHILD_SUBREAPER`): a grandchild that escapes with `setsid`, a
double fork or a daemon's re-parenting becomes *its* child instead of init's, so it can still be
found and killed. It asks for SIGTERM when the thread that started it dies
(`PR_SET_PDEATHSIG`), which covers a client killed with SIGKILL, and treats end-of-file on its
stdin (its parent's end closed, on any platform) the same way.

File descriptors:
  0  control: any byte, or end-of-file, means "kill everything and exit"; so do SIGTERM/SIGHUP
  1  the command's stdout and stderr; the supervisor keeps no copy of it
  2  status lines: `started PID`, `error MESSAGE`, then `exit CODE` or `signal NUMBER`

The command's exit is reported as soon as it happens; background processes it left keep running
until the terminal is killed or released (as in a shell), and the supervisor exits once they are
all gone. Killing walks `/proc` for every descendant, SIGKILLs them, reaps, and repeats until it
has no child left: a process forking during the walk is caught on the next round.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> None:
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _report(line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (line.replace("\n", " ") + "\n").encode("utf-8", "replace"))


def _die_with_supervisor() -> None:
    # In the command, between fork and exec: if the supervisor is killed, so is the command.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # exited meanwhile
            continue
        # The command name (field 2) may hold spaces and parentheses: parse after the last ")".
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    return children


def descendants(root: int) -> list[int]:
    """Every live process below `root`, by the parent links in /proc."""
    if not os.path.isdir("/proc/self"):
        return []
    children = _children_map()
    found: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


class Supervisor:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.command_pid = 0
        self.reported = False
        self.stop = False

    def on_exit(self, pid: int, status: int) -> None:
        if pid != self.command_pid or self.reported:
            return
        self.reported = True
        if os.WIFSIGNALED(status):
            _report(f"signal {os.WTERMSIG(status)}")
        else:
            _report(f"exit {os.waitstatus_to_exitcode(status)}")

    def reap(self) -> bool:
        """Reap every child that has exited; False once no child is left at all."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            self.on_exit(pid, status)

    def kill_all(self) -> None:
        with contextlib.suppress(OSError):  # the command's group first: cheap, and not /proc
            os.killpg(self.command_pid, signal.SIGKILL)
        me = os.getpid()
        while True:
            for pid in descendants(me):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            self.on_exit(pid, status)
            if not self.reap():
                return

    def run(self) -> int:
        try:
            child = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=1, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_supervisor)
        except OSError as exc:
            _report(f"error {exc.strerror or exc}: {self.argv[0]!r}")
            return 127
        self.command_pid = child.pid
        # Keep no copy of the output pipe: the reader sees end-of-file when the tree is done.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        _report(f"started {child.pid}")
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        while not self.stop:
            if not self.reap() and self.reported:
                return 0  # the command and everything it left have exited
            readable, _, _ = select.select([0, wake_r], [], [])
            if 0 in readable:
                self.stop = True  # a kill request, or the client is gone
            if wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
        self.kill_all()
        return 0


def main(argv: list[str]) -> int:
    parent, command = int(argv[0]), argv[1:]
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        return 1  # the client died before we could ask to be told
    supervisor = Supervisor(command)

    def stop(signum: int, frame: object) -> None:
        supervisor.stop = True

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # only to wake select
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
