"""A pytest plugin that prints, per test and per file, the CPU time of the test process and of
every process below it, and the wall time. Wall time lies on a shared machine; CPU does not.

    PYTHONPATH=$PWD .venv/bin/python -m pytest -n 0 -p bench.cpu_per_test tests/test_magics.py

Run it with `-n 0`: with xdist the workers' own CPU is not seen. The CPU of a test is the change,
over its setup, call and teardown, of: this process's own CPU, that of its reaped children
(nbclient's kernels, agents), and that of every live descendant with what it reaped (the session's
JupyterLab server and its kernels, Chromium). A session fixture's start is charged to the first
test that uses it; its teardown to the last, which can come out negative (a killed server's
kernels, orphaned, drop out of the tree). The total printed last is the session's, as time(1)
counts it. Linux only (/proc).
"""

from __future__ import annotations

import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

_TICK = os.sysconf("SC_CLK_TCK")


def _descendants_cpu() -> float:
    """CPU seconds of the live descendants of this process, each with its reaped children."""
    parent_of: dict[int, int] = {}
    cpu_of: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        parent_of[int(name)] = int(fields[1])
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), 12-15 here.
        cpu_of[int(name)] = sum(int(x) for x in fields[11:15]) / _TICK
    me, total = os.getpid(), 0.0
    for pid, cpu in cpu_of.items():
        p = parent_of.get(pid)
        while p is not None and p not in (0, 1, me):
            p = parent_of.get(p)
        if p == me:
            total += cpu
    return total


def _tree_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime + _descendants_cpu()


_rows: list[tuple[str, float, float]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu, wall = _tree_cpu(), time.monotonic()
    yield
    _rows.append((item.nodeid, _tree_cpu() - cpu, time.monotonic() - wall))


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
    # Everything has been reaped by now: the session's total, with what the last test's teardown
    # lost from the tree (processes orphaned when a server is killed).
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    write(f"{total:6.1f}  CPU s of the session: pytest and every process it reaped")
