"""Runs one terminal command and guarantees that nothing it started outlives the terminal.

Started by `terminal.py` as `python -I -S supervisor.py PARENT_PID cgroup|nocgroup ARGV...` (a
plain script, standard library only, so it starts quickly). On Linux it makes itself the child
subreaper of its subtree (`PR_SET_CHILD_SUBREAPER`): a grandchild that escapes with `setsid`, a
double fork or a daemon's re-parenting becomes *its* child instead of init's, so it can still be
found and killed. It asks for SIGTERM when the thread that started it dies
(`PR_SET_PDEATHSIG`), which covers a client killed with SIGKILL, and treats end-of-file on its
stdin (its parent's end closed, on any platform) the same way.

Where a cgroup v2 is writable (root, or a delegated subtree), it also moves itself into a fresh
cgroup before starting the command, so every process the command starts is born in it. That
cgroup is what the client kills (`cgroup.kill`) if the supervisor itself was killed, by the
command for instance, and could not do its work.

File descriptors:
  0  control: any byte, or end-of-file, means "kill everything and exit"; so do SIGTERM/SIGHUP
  1  the command's stdout and stderr; the supervisor keeps no copy of it
  2  status lines: `cgroup PATH` (once it is in a cgroup of its own, before the command starts:
     a command that kills the supervisor at once must not leave the client without the path),
     then `started PID CGROUP` (CGROUP is `-` when there is none) or `error MESSAGE`, then
     `exit CODE` or `signal NUMBER`

The command's exit is reported as soon as it happens; background processes it left keep running
until the terminal is killed or released (as in a shell), and the supervisor exits once they are
all gone. Killing walks `/proc` for every descendant, SIGKILLs them, reaps, and repeats until it
has no child left: a process forking during the walk is caught on the next round.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _prctl(option: int, value: int) -> None:
    if _LIBC is not None:
        _LIBC.prctl(option, value, 0, 0, 0)


def _report(line: str) -> None:
    try:
        os.write(2, (line.replace("\n", " ") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass  # the client is gone; the kill that follows needs no audience


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass  # exited meanwhile


# -- cgroup v2 ------------------------------------------------------------------------------------


def _own_cgroup() -> str | None:
    """The directory of our cgroup v2, or None (cgroup v1 only, another namespace, not Linux)."""
    try:
        with open("/proc/self/cgroup") as f:
            own = next((line[3:].strip() for line in f if line.startswith("0::")), None)
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f if " - cgroup2 " in line]
    except OSError:
        return None
    # The hierarchy's root must be mounted (fields: 3 root inside the hierarchy, 4 mount point).
    mount = next((m[4] for m in mounts if m[3] == "/"), None)
    if own is None or mount is None:
        return None
    return os.path.join(mount, own.lstrip("/"))


def cgroup_available() -> bool:
    """Whether terminals get a cgroup of their own here (root, or a delegated cgroup)."""
    own = _own_cgroup()
    return (
        own is not None
        and os.access(own, os.W_OK)
        and os.access(os.path.join(own, "cgroup.procs"), os.W_OK)
    )


def _join(cgroup: str) -> bool:
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write("0")  # this process
    except OSError:
        return False
    return True


def enter_new_cgroup() -> tuple[str, str] | None:
    """Move this process into a fresh cgroup v2 below its own, so the command is born in it.

    Returns (new, old), or None where there is none we may write (not root and not delegated,
    cgroup v1 only): the subreaper alone then finds the descendants.
    """
    old = _own_cgroup()
    if old is None:
        return None
    new = os.path.join(old, f"acp-terminal-{os.getpid()}")
    try:
        os.mkdir(new)
    except OSError:
        return None
    if not _join(new):
        os.rmdir(new)
        return None
    return new, old


def kill_cgroup(path: str) -> bool:
    """SIGKILL everything in the cgroup and remove it; False while it still holds processes."""
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
    except FileNotFoundError:
        return True  # already removed
    except OSError:  # a kernel before 5.14: no cgroup.kill, kill the members one by one
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                for pid in f.read().split():
                    _kill(int(pid))
        except OSError:
            pass
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # busy: its last processes are still exiting
    return True


# -- the process tree -----------------------------------------------------------------------------


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
        fields = stat[stat.rfind(b")") + 2 :].split()
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
    def __init__(self, argv: list[str], use_cgroup: bool = True) -> None:
        self.argv = argv
        self.use_cgroup = use_cgroup
        self.command_pid = 0
        self.cgroups: tuple[str, str] | None = None  # (ours, the one we came from)
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
        try:  # the command's group first: cheap, and not /proc
            os.killpg(self.command_pid, signal.SIGKILL)
        except OSError:
            pass
        me = os.getpid()
        while True:
            for pid in descendants(me):
                _kill(pid)
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            self.on_exit(pid, status)
            if not self.reap():
                return

    def spawn(self) -> None:
        # posix_spawn, not subprocess: importing subprocess doubled the supervisor's start-up.
        self.cgroups = enter_new_cgroup() if self.use_cgroup else None
        if self.cgroups is not None:
            _report(f"cgroup {self.cgroups[0]}")
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        self.command_pid = os.posix_spawnp(
            self.argv[0], self.argv, os.environ, file_actions=actions, setsid=True
        )

    def leave_cgroup(self) -> None:
        """Step out of the (now empty) cgroup and remove it; anything left in it is killed."""
        if self.cgroups is not None:
            ours, old = self.cgroups
            if _join(old):
                kill_cgroup(ours)

    def run(self) -> int:
        try:
            self.spawn()
        except OSError as exc:
            _report(f"error {exc.strerror or exc}: {self.argv[0]!r}")
            self.leave_cgroup()
            return 127
        # Keep no copy of the output pipe: the reader sees end-of-file when the tree is done.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        _report(f"started {self.command_pid} {self.cgroups[0] if self.cgroups else '-'}")
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        while not self.stop:
            if not self.reap() and self.reported:
                break  # the command and everything it left have exited
            readable, _, _ = select.select([0, wake_r], [], [])
            if 0 in readable:
                self.stop = True  # a kill request, or the client is gone
            if wake_r in readable:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
        self.kill_all()
        self.leave_cgroup()
        return 0


def main(argv: list[str]) -> int:
    parent, use_cgroup, command = int(argv[0]), argv[1] == "cgroup", argv[2:]
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        return 1  # the client died before we could ask to be told
    supervisor = Supervisor(command, use_cgroup)

    def stop(signum: int, frame: object) -> None:
        supervisor.stop = True

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # only to wake select
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
