"""Named sessions across kernel restarts: `.acp_notebook/sessions.json`, in real kernels.

A restart is two executions of notebooks in the same workspace (the second in a fresh kernel,
the first maybe in the test process's shared one, reset: tests/shared_kernel.py); the
scripted agent keeps its sessions in a state directory, so a second agent process can resume
(`--resume`) or load (`--load-session`) what the first created.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from jupyter_core.utils import run_sync

from acp_notebook.notebook.stored_sessions import MAX_ENTRIES, NO_NOTEBOOK, SessionStore
from tests.nb_util import data, execute, kernel_env, make_client, new_nb, scripted, text
from tests.shared_kernel import SharedKernel


def agent(tmp_path: Path, *flags: str) -> str:
    return scripted("--state-dir", str(tmp_path / "agent-state"), *flags)


def run(
    tmp_path: Path, line: str, name: str = "r", kernel: SharedKernel | None = None
) -> tuple[str, str]:
    """One kernel: a turn in `line`'s session, then its id. Returns (what the cell showed, id).

    The run before a restart may be in the test process's shared kernel, reset for it; the run after
    a restart is in a fresh kernel, a new process: what it finds comes from the disk."""
    nb = execute(
        [
            f"%%agent {line}\nhello",
            f"%agent status -s {name}\nprint('ID', _agent_status['session_id'])",
        ],
        tmp_path,
        kernel=kernel,
    )
    shown = " ".join(data(nb.cells[0], "text/plain"))
    return shown, text(nb.cells[1]).split("ID ")[-1].strip()


def stored(tmp_path: Path) -> list[dict[str, object]]:
    sessions: list[dict[str, object]] = json.loads(
        (tmp_path / ".acp_notebook" / "sessions.json").read_text()
    )["sessions"]
    return sessions


def test_restart_resumes_the_session(tmp_path: Path, kernel: SharedKernel) -> None:
    line = f"--agent {agent(tmp_path, '--resume')} --session r"
    first, sid = run(tmp_path, line, kernel=kernel)
    assert "Resumed" not in first
    path = tmp_path / ".acp_notebook" / "sessions.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [entry] = stored(tmp_path)
    assert (entry["session"], entry["sessionId"], entry["notebook"]) == ("r", sid, NO_NOTEBOOK)

    second, again = run(tmp_path, line)  # a new kernel: the restart
    assert again == sid
    assert f"Resumed session {sid[:12]}… from before the restart." in second


def test_restart_loads_when_the_agent_cannot_resume(tmp_path: Path, kernel: SharedKernel) -> None:
    line = f"--agent {agent(tmp_path, '--load-session')} --session r"
    _, sid = run(tmp_path, line, kernel=kernel)
    second, again = run(tmp_path, line)
    assert again == sid
    assert "Reloaded session" in second and "(1 earlier turns replayed)" in second


def test_a_forgotten_session_says_so_and_starts_new(tmp_path: Path, kernel: SharedKernel) -> None:
    # No state directory: the second agent process knows nothing of the first one's sessions.
    line = f"--agent {scripted('--resume')} --session r"
    _, sid = run(tmp_path, line, kernel=kernel)
    second, again = run(tmp_path, line)
    assert again != sid
    assert f"Session {sid[:12]}… from before the restart could not be continued" in second
    assert "%agent log" in second and "JSON-RPC" not in second  # one sentence; details logged
    assert [e["sessionId"] for e in stored(tmp_path)] == [again]


def test_an_agent_without_resume_or_load_starts_new(tmp_path: Path, kernel: SharedKernel) -> None:
    line = f"--agent {scripted()} --session r"
    _, sid = run(tmp_path, line, kernel=kernel)
    second, again = run(tmp_path, line)
    assert again != sid and "from before the restart" not in second  # nothing to try: no note


def test_new_does_not_resume_and_replaces_the_stored_id(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    line = f"--agent {agent(tmp_path, '--resume')} --session r"
    _, sid = run(tmp_path, line, kernel=kernel)
    second, again = run(tmp_path, line + " --new")
    assert again != sid and "Resumed" not in second
    assert [e["sessionId"] for e in stored(tmp_path)] == [again]


def test_a_corrupt_file_warns_and_starts_afresh(tmp_path: Path, kernel: SharedKernel) -> None:
    (tmp_path / ".acp_notebook").mkdir()
    path = tmp_path / ".acp_notebook" / "sessions.json"
    path.write_text('{"sessions": [ not json')
    shown, sid = run(tmp_path, f"--agent {agent(tmp_path, '--resume')} --session r", kernel=kernel)
    assert "Warning:" in shown and "is not valid JSON" in shown and "start afresh" in shown
    assert [e["sessionId"] for e in stored(tmp_path)] == [sid]  # rewritten, whole


def test_sessions_lists_live_and_stored(tmp_path: Path, kernel: SharedKernel) -> None:
    command = agent(tmp_path, "--resume")
    run(tmp_path, f"--agent {command} --session old", "old", kernel=kernel)
    nb = execute(
        [f"%%agent --agent {command} --session r\nhi", f"%agent sessions -a {command}"],
        tmp_path,
        kernel=kernel,
    )
    shown = " ".join(data(nb.cells[1], "text/plain"))
    assert "live in this kernel" in shown and "stored (not live)" in shown
    assert "old" in shown and "does not list its sessions" in shown


def test_remember_sessions_off_keeps_nothing(tmp_path: Path, kernel: SharedKernel) -> None:
    nb = execute(
        [
            "%config AcpNotebook.remember_sessions = False",
            f"%%agent --agent {agent(tmp_path, '--resume')} --session r\nhi",
        ],
        tmp_path,
        kernel=kernel,
    )
    assert "echo: hi" in " ".join(data(nb.cells[1], "text/plain"))
    assert not (tmp_path / ".acp_notebook" / "sessions.json").exists()


# -- the file, without a kernel ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"[1, 2]", "does not hold a list of sessions"),
        (b'{"sessions": 3}', "does not hold a list of sessions"),
        (b"[" * 100_000, "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b" " * (1024 * 1024 + 1), "larger than"),
    ],
)
def test_hostile_files_are_ignored_with_a_reason(tmp_path: Path, content: bytes, why: str) -> None:
    store = SessionStore(tmp_path)
    store.directory.mkdir()
    store.path.write_bytes(content)
    assert store.get("nb", "r", "a") is None
    assert any(why in p for p in store.problems), store.problems
    store.put("nb", "r", "a", "sid")
    assert SessionStore(tmp_path).get("nb", "r", "a") == "sid"


def test_bad_entries_are_dropped_and_the_file_is_bounded(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.directory.mkdir()
    good = {"notebook": "nb", "session": "r", "agent": "a", "sessionId": "s1", "updated": 1}
    junk = [{"notebook": 1}, "x", None, {**good, "sessionId": ""}, {**good, "session": "z" * 5000}]
    store.path.write_text(json.dumps({"sessions": [*junk, good]}))
    assert store.get("nb", "r", "a") == "s1" and not store.problems
    # A file already past the bound (written by hand, not by MAX_ENTRIES + 20 puts: each one
    # rewrites and fsyncs the whole file, seconds in all), older entries first in it.
    older = [
        {**good, "session": f"n{i}", "sessionId": f"id{i}", "updated": 10 + i}
        for i in range(MAX_ENTRIES + 17)
    ]
    store.path.write_text(json.dumps({"sessions": [*junk, *older, good]}))
    for i in range(MAX_ENTRIES + 17, MAX_ENTRIES + 20):  # each put keeps the newest
        store.put("nb", f"n{i}", "a", f"id{i}")
        assert len(store.entries()) == MAX_ENTRIES
    entries = store.entries()
    assert entries[0].session_id == f"id{MAX_ENTRIES + 19}"
    # What went: the oldest (the hand-written entry `good`, updated 1, then n0...n19).
    kept = {e.session_id for e in entries}
    assert kept == {f"id{i}" for i in range(20, MAX_ENTRIES + 20)}, sorted(kept)[:5]
    assert not store.problems


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sessions.json").write_text(
        json.dumps(
            {"sessions": [{"notebook": "nb", "session": "r", "agent": "a", "sessionId": "x"}]}
        )
    )
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(outside, work / ".acp_notebook")
    store = SessionStore(work)
    assert store.get("nb", "r", "a") is None and "is a symlink" in store.problems[0]
    store.put("nb", "r", "a", "new")
    assert "x" in (outside / "sessions.json").read_text()  # untouched
    assert not list(outside.glob(".sessions.*"))

    link_file = tmp_path / "w2" / ".acp_notebook"
    link_file.mkdir(parents=True)
    os.symlink(outside / "sessions.json", link_file / "sessions.json")
    assert SessionStore(tmp_path / "w2").get("nb", "r", "a") is None


def test_the_folder_swapped_for_a_link_while_writing_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store checked that `.acp_notebook` was no link, then wrote and renamed in it by
    path: swapped for a link meanwhile (here: at the temporary file's open), the kernel wrote
    its file where the link led. Now it holds the folder's descriptor, opened without
    following a link, and works beneath it."""
    from acp_notebook.notebook import stored_sessions

    outside, work = tmp_path / "outside", tmp_path / "work"
    outside.mkdir()
    folder = work / ".acp_notebook"
    folder.mkdir(parents=True)
    real_open, swapped = os.open, []

    def swap_then_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith(".tmp") and not swapped:  # the agent's shell, at that moment
            folder.rename(work / ".held")
            folder.symlink_to(outside)
            swapped.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(stored_sessions.os, "open", swap_then_open)
    SessionStore(work).put("nb", "r", "a", "id")
    monkeypatch.undo()
    assert swapped and list(outside.iterdir()) == [], "the kernel wrote outside the workspace"
    assert SessionStore(work).get("nb", "r", "a") is None  # the link is not read either
    assert "id" in (work / ".held" / "sessions.json").read_text()  # written where it was


def test_agent_resume_names_the_session_for_later_restarts(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    # The session made and resumed by name in the shared kernel; the later restart, the run
    # that finds the name on the disk, in a fresh kernel (in the shared one, reset, the last
    # run did not resume: unexplained).
    command = agent(tmp_path, "--resume")
    _, sid = run(tmp_path, f"--agent {command} --session x", "x", kernel=kernel)
    execute([f"%agent resume {sid} -a {command} -s r"], tmp_path, kernel=kernel)
    shown, again = run(tmp_path, f"--agent {command} --session r")
    assert again == sid and f"Resumed session {sid[:12]}…" in shown


def test_km_restart_kernel_resumes(tmp_path: Path) -> None:
    """The kernel manager's own restart, as the Restart Kernel button does, in one client."""
    cell = f"%%agent --agent {agent(tmp_path, '--resume')} --session r\nhello"
    status = "%agent status -s r\nprint('ID', _agent_status['session_id'])"
    nb = new_nb(cell, status, cell, status)
    client = make_client(nb, tmp_path)
    with client.setup_kernel(env=kernel_env(tmp_path)):
        client.execute_cell(nb.cells[0], 0)
        client.execute_cell(nb.cells[1], 1)
        run_sync(client.km.restart_kernel)(now=True)
        run_sync(client.kc.wait_for_ready)(timeout=60)
        client.execute_cell(nb.cells[2], 2)
        client.execute_cell(nb.cells[3], 3)
    before, after = (text(nb.cells[i]).split("ID ")[-1].strip() for i in (1, 3))
    assert before == after
    assert f"Resumed session {before[:12]}…" in " ".join(data(nb.cells[2], "text/plain"))


WRITER = """
import sys
from acp_notebook.notebook import stored_sessions
from acp_notebook.notebook.stored_sessions import SessionStore
# What this tests is the race (no entry lost), not the bounded wait, which has its own test: on
# a loaded machine the other writer, descheduled while it holds the lock, kept it past 2 s.
stored_sessions.LOCK_WAIT = 60
store = SessionStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()  # the go: both processes write at once
for i in range(150):
    store.put("nb", f"{sys.argv[2]}{i}", "a", f"id-{sys.argv[2]}{i}")
print("\\n".join(store.problems) or "done", flush=True)
"""


def test_two_processes_writing_at_once_keep_every_entry(tmp_path: Path) -> None:
    import subprocess
    import sys

    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("x", "y")
    ]
    try:
        for w in writers:
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        for w in writers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
        said = [w.communicate(timeout=200)[0].strip() for w in writers]
    finally:
        for w in writers:
            w.kill()
    assert said == ["done", "done"]
    names = {e.name for e in SessionStore(tmp_path).entries()}
    assert names == {f"{n}{i}" for n in "xy" for i in range(150)}, len(names)


def test_a_lock_that_cannot_be_had_is_said_and_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fcntl

    from acp_notebook.notebook import stored_sessions

    store = SessionStore(tmp_path)
    store.put("nb", "r", "a", "kept")
    monkeypatch.setattr(stored_sessions, "LOCK_WAIT", 0.2)
    # Another holder of the lock (another open file description: flock is per description).
    fd = os.open(store.directory / stored_sessions.LOCKNAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        store.put("nb", "s", "a", "not saved")
    finally:
        os.close(fd)
    assert any("cannot lock" in p and "held it for 0.2 s" in p for p in store.problems)
    assert {e.session_id for e in SessionStore(tmp_path).entries()} == {"kept"}


def test_the_lock_file_is_not_followed_nor_a_fifo(tmp_path: Path) -> None:
    from acp_notebook.notebook.stored_sessions import LOCKNAME

    outside = tmp_path / "outside"
    outside.write_text("theirs")
    store = SessionStore(tmp_path / "w")
    store.directory.mkdir(parents=True)
    os.symlink(outside, store.directory / LOCKNAME)
    store.put("nb", "r", "a", "sid")
    assert outside.read_text() == "theirs" and any("cannot lock" in p for p in store.problems)
    assert not store.path.exists()
    os.unlink(store.directory / LOCKNAME)
    os.mkfifo(store.directory / LOCKNAME)
    fifo = SessionStore(tmp_path / "w")
    fifo.put("nb", "r", "a", "sid")  # returns: a FIFO is opened without blocking, and refused
    assert any("not a regular file" in p for p in fifo.problems)


def test_a_held_lock_never_holds_the_kernels_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's shell holds `sessions.lock`: keeping a new session's id waited `LOCK_WAIT`
    on the kernel's loop (every turn and widget of the kernel stalled), then gave the id up. Now
    `Memory.keep` returns at once and the id is written once the lock is free."""
    import fcntl
    import time
    from types import SimpleNamespace

    from acp_notebook.notebook import stored_sessions
    from acp_notebook.notebook.stored_sessions import Memory

    class Runtime:  # the kernel's key in the module's table (held weakly)
        pass

    monkeypatch.setattr(stored_sessions, "LOCK_WAIT", 10.0)
    store = SessionStore(tmp_path)
    store.put("nb", "old", "a", "kept")
    runtime: Any = Runtime()
    client: Any = SimpleNamespace(cwd=str(tmp_path))
    fd = os.open(store.directory / stored_sessions.LOCKNAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: another holder
        started = time.monotonic()
        for n in range(3):
            session: Any = SimpleNamespace(id=f"sid-{n}")
            Memory("nb").keep(runtime, client, "a", f"r{n}", session)
        took = time.monotonic() - started
    finally:
        os.close(fd)
    assert took < stored_sessions.LOCK_WAIT  # on the old code: 3 waits of LOCK_WAIT
    assert stored_sessions.wait_for_writes(timeout=60)
    ids = {e.name: e.session_id for e in SessionStore(tmp_path).entries()}
    assert ids == {"old": "kept", "r0": "sid-0", "r1": "sid-1", "r2": "sid-2"}
