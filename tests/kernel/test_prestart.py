"""The agent started in the background (`c.AcpNotebook.prestart`, `%agent start`): the first cell
uses the session it opened, a failed start is said by the first cell that would use it, and
closing the agents stops a start under way with its process."""

from __future__ import annotations

from pathlib import Path

from tests.nb_util import errors, execute, process_gone, scripted, text, transcripts
from tests.polling import wait_until
from tests.shared_kernel import SharedKernel

# The kernel's own view of the start: the runtime's `prestart` and its named sessions.
RUNTIME = "from acp_notebook.magics import instance\nrt = instance(get_ipython()).runtime\n"


def test_prestart_opens_the_session_the_first_cell_uses(tmp_path: Path) -> None:
    nb = execute(
        [
            # The start runs as the kernel starts: awaited here, it has opened the session.
            RUNTIME + "pre = rt.prestart\nprint('error:', await pre.task)\n"
            "entry = rt.sessions[pre.session]\nsid, pid = entry.session.id, "
            "entry.session.client.pid",
            "%%agent --out r\nhello",
            "print(rt.sessions[pre.session].session.id == sid, r.session_id == sid, "
            "rt.sessions[pre.session].session.client.pid == pid, rt.prestart)",
        ],
        tmp_path,
        extra_arguments=["--AcpNotebook.prestart=True"],
    )
    assert text(nb.cells[0]).startswith("error: None")
    assert transcripts(nb.cells[1]), text(nb.cells[1])
    # The same session, on the same agent process: the cell started nothing of its own.
    assert text(nb.cells[2]).strip() == "True True True None"


def test_a_failed_start_is_said_by_status_and_by_the_first_cell_once(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    agent = scripted("--exit-during-initialize", "3")
    nb = execute(
        [
            f"%agent start -a {agent}",
            RUNTIME + "print('error is kept:', bool(await rt.prestart.task))",
            "%agent status",
            f"%%agent --agent {agent}\nhello",
            f"%%agent --agent {agent}\nhello",
        ],
        tmp_path,
        kernel=kernel,
        allow_errors=True,
    )
    assert "in the background" in text(nb.cells[0])
    assert "error is kept: True" in text(nb.cells[1])
    status = text(nb.cells[2])
    assert "start in the background" in status and "Could not start agent" in status
    first, again = text(nb.cells[3]), text(nb.cells[4])
    assert "TurnFailed" in first and "start in the background" in first, first
    assert "Could not start agent" in first and "exited" in first, first
    # Said once: the next cell starts the agent anew (and fails on its own).
    assert "start in the background" not in again and "Could not start agent" in again, again
    assert [i for i, _ in errors(nb)] == [3, 4]


def test_agent_start_then_the_cell_uses_its_session(tmp_path: Path, kernel: SharedKernel) -> None:
    nb = execute(
        [
            "%agent start",
            RUNTIME + "pre = rt.prestart\nassert await pre.task is None\n"
            "sid = rt.sessions[pre.session].session.id",
            "%%agent --out r\nhello",
            "print(r.session_id == sid, rt.prestart)",
            "%agent start",
        ],
        tmp_path,
        kernel=kernel,
    )
    assert "Starting agent demo" in text(nb.cells[0])
    assert transcripts(nb.cells[2])
    assert text(nb.cells[3]).strip() == "True None"
    assert "already open" in text(nb.cells[4])


#: A cell that waits (in the kernel: the start runs on its loop) for the agent `%agent start`
#: started, and prints its pid.
STARTED_AGENTS_PID = (
    RUNTIME + "import asyncio\nfor _ in range(1000):\n"
    "    host = next(iter(rt.hosts.values()), None)\n"
    "    if host is not None and host.running:\n        break\n"
    "    await asyncio.sleep(0.01)\nprint('pid', host.pids()[0])"
)


def test_closing_the_agents_stops_a_start_under_way(tmp_path: Path, kernel: SharedKernel) -> None:
    agent = scripted("--hang-method", "session/new")  # started, its session never comes
    nb = execute(
        [
            f"%agent start -a {agent}",
            STARTED_AGENTS_PID,
            "%agent close --all",
            "print(rt.prestart, rt.hosts)",
        ],
        tmp_path,
        kernel=kernel,
    )
    pid = int(text(nb.cells[1]).split()[-1])
    assert text(nb.cells[3]).strip() == "None {}"
    wait_until(lambda: process_gone(pid), 15, f"the agent {pid} to stop")


def test_a_cell_out_of_time_while_it_waits_stops_the_start_and_its_agent(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    agent = scripted("--hang-method", "session/new")
    nb = execute(
        [
            f"%agent start -a {agent}",
            STARTED_AGENTS_PID,
            f"%%agent --agent {agent} --timeout 1\nhello",
            "print(rt.prestart, rt.hosts)",
        ],
        tmp_path,
        kernel=kernel,
        allow_errors=True,
    )
    pid = int(text(nb.cells[1]).split()[-1])
    failed = text(nb.cells[2])
    assert "TurnFailed" in failed and "--timeout 1" in failed and "stopped" in failed, failed
    assert text(nb.cells[3]).strip() == "None {}"
    wait_until(lambda: process_gone(pid), 15, f"the agent {pid} to stop")
