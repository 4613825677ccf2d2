"""A pytest plugin that prints, per test and per file, the CPU time of the test process and of
every process below it, and the wall time. Wall time lies on a shared machine; CPU does not.

    PYTHONPATH=$PWD .venv/bin/python -m pytest -n 0 -p bench.cpu_per_test \
        tests/kernel/test_magics.py

Run it with `-n 0`: with xdist the workers' own CPU is not seen. A thread reads /proc every
0.1 s and keeps, for each process below this one (kernels, agents, the JupyterLab server,
Chromium), the CPU it has used itself. `time` and the parent's rusage miss much of Chromium:
a renderer's CPU is lost when it exits, and each test's browser context had its own. A test's
CPU is this process's own (less the thread's) plus what the processes below used, over its
setup, call and teardown; a process that lived less than 0.1 s is missed, up to 0.1 s of one
that exits. A session fixture's start is charged to the first test that uses it. Linux only.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

_TICK = os.sysconf("SC_CLK_TCK")
_INTERVAL = 0.1


class _Tree:
    """The most CPU seen of every process below this one, by (pid, start time)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, str], float] = {}
        self.thread_cpu = 0.0  # the sampling thread's own CPU, not the tests'
        self.lock = threading.Lock()
        self.stop = threading.Event()
        threading.Thread(target=self._run, name="cpu_per_test", daemon=True).start()

    def _run(self) -> None:
        while not self.stop.wait(_INTERVAL):
            self.scan()

    def scan(self) -> None:
        start = time.thread_time()
        parent_of: dict[int, int] = {}
        cpu_of: dict[int, tuple[tuple[int, str], float]] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
            except OSError:  # gone meanwhile
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
            pid = int(name)
            parent_of[pid] = int(fields[1])
            # proc(5): utime and stime are fields 14-15, the start time field 22.
            cpu_of[pid] = ((pid, fields[19]), (int(fields[11]) + int(fields[12])) / _TICK)
        me = os.getpid()
        with self.lock:
            for pid, (key, cpu) in cpu_of.items():
                p = parent_of.get(pid)
                while p is not None and p not in (0, 1, me):
                    p = parent_of.get(p)
                if p == me and cpu > self.seen.get(key, 0.0):
                    self.seen[key] = cpu
            self.thread_cpu += time.thread_time() - start

    def total(self) -> float:
        self.scan()
        with self.lock:
            return time.process_time() - self.thread_cpu + sum(self.seen.values())


_tree: _Tree | None = None
_rows: list[tuple[str, float, float]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _tree
    if _tree is None:
        _tree = _Tree()
    cpu, wall = _tree.total(), time.monotonic()
    yield
    _rows.append((item.nodeid, _tree.total() - cpu, time.monotonic() - wall))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _rows:
        return
    write = terminalreporter.write_line
    write("")
    write("CPU s   wall s  test (bench/cpu_per_test.py)")
    per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for nodeid, cpu, wall in sorted(_rows, key=lambda r: -r[1]):
        write(f"{cpu:6.2f}  {wall:6.2f}  {nodeid}")
        totals = per_file[nodeid.split("::")[0]]
        totals[0] += cpu
        totals[1] += wall
        totals[2] += 1
    write("CPU s   wall s  tests  file")
    for name, (cpu, wall, n) in sorted(per_file.items(), key=lambda kv: -kv[1][0]):
        write(f"{cpu:6.1f}  {wall:6.1f}  {int(n):5d}  {name}")
