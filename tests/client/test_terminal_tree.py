"""A terminal's whole process tree ends with it, on every path; terminals are capped.

An agent's command may leave a grandchild that escaped its process group and session (`setsid`,
a double fork). Each test runs one that writes that grandchild's pid to a file, then takes one
path a terminal can end by (terminal/kill, terminal/release, a cancelled turn, closing the
session or the client, the client's process exiting or being SIGKILLed, a kernel shut down or
SIGKILLed) and checks that the grandchild is gone. Waits are on pidfds or bounded polls of /proc.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from acp_notebook.client.serving import terminal
from acp_notebook.client.serving.supervisor import cgroup_available
from acp_notebook.client.serving.terminal import Terminals
from acp_notebook.protocol.mutations import Delta
from tests.agents.script import script
from tests.client_helpers import Agent, Watcher, alive, gone, reports, run_script
from tests.kernel.test_hygiene import Kernel, assert_no_growth, counts
from tests.nb_util import process_gone, scripted
from tests.polling import wait_until

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")]

INVALID_PARAMS = -32602


@pytest.fixture(autouse=True)
def term_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Terminal ids from term-1 in every test, so a static script can name them."""
    monkeypatch.setattr(Terminals, "_ids", itertools.count(1))


@pytest.fixture
def pid_file(tmp_path: Path) -> Iterator[Path]:
    """Where the command writes its escaped grandchild's pid; that process is killed after the
    test whatever happened, so a failing run leaves nothing either."""
    path = tmp_path / "grandchild.pid"
    yield path
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.kill(int(path.read_text()), signal.SIGKILL)


def escaping(pid_file: Path, then: str = "exit 0") -> str:
    """A shell command that starts `sleep` in a new session (out of the terminal's process
    group), writes its pid, and then runs `then`."""
    return (
        f"setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > {pid_file}.tmp && "
        f"mv {pid_file}.tmp {pid_file}; {then}"
    )


RUNNING = "echo running; exec sleep 1000"  # `then` for a command that keeps running


async def ready(watcher: Watcher) -> None:
    """Until the terminal printed "running": its grandchild's pid file is written."""
    await watcher.wait_for(
        lambda m: isinstance(m, Delta) and m.channel == "terminal" and "running" in m.text,
        timeout=20,
    )


def req(method: str, **params: object) -> dict[str, object]:
    return {"request": method, "params": params}


def grandchild(pid_file: Path, running: bool = True) -> int:
    """The escaped grandchild's pid; `running`: check it is still running now."""
    pid = int(pid_file.read_text())
    assert not running or alive(pid), "the escaped grandchild should have been running"
    return pid


# -- the agent's requests ----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["terminal/kill", "terminal/release"])
@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "subreaper-only"])
async def test_kill_and_release_end_an_escaped_grandchild(
    agent: Agent, pid_file: Path, how: str, cgroup: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a cgroup (not root, not delegated) the supervisor's subreaper finds it alone.
    monkeypatch.setattr(terminal, "USE_CGROUP", cgroup)
    async with agent.session(terminal=True, bound=40) as session:
        # The command exits at once; its setsid grandchild stays (wait_for_exit returns
        # with the pid file written). The turn then ends normally: only `how` kills it.
        result = await run_script(
            session,
            req("terminal/create", command=escaping(pid_file)),
            req("terminal/wait_for_exit", terminalId="term-1"),
            req(how, terminalId="term-1"),
        )
        assert result.success, result
        assert reports(result.text, "RESPONSE ")[2] == {"result": {}}
        # (By now `how` has been answered: the grandchild may be gone already.)
        pid = grandchild(pid_file, running=False)
        assert await gone(pid), f"{how} left the setsid grandchild running"


@pytest.mark.anyio
async def test_a_cancelled_turn_ends_an_escaped_grandchild(agent: Agent, pid_file: Path) -> None:
    async with agent.session(terminal=True, bound=40) as session:
        watcher = Watcher(session)
        turn = await session.prompt(
            script(
                req("terminal/create", command=escaping(pid_file, RUNNING)),
                {"request": "_x/ready", "params": {}, "quiet": True},
                {"say": "started"},
                {"wait_cancel": True},
            )
        )
        await ready(watcher)
        pid = grandchild(pid_file)
        result = await session.stop()  # the agent does not release: the turn's end kills
        assert result is not None and result.stop_reason == "cancelled"
        assert turn.result is result
        assert await gone(pid), "the cancelled turn left the setsid grandchild running"


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["session", "client"])
async def test_closing_the_session_or_client_ends_an_escaped_grandchild(
    agent: Agent, pid_file: Path, how: str
) -> None:
    async with agent.session(terminal=True, bound=40) as session:
        watcher = Watcher(session)
        # The turn ends normally (end_turn) with the terminal running and never released.
        result = await run_script(
            session,
            req("terminal/create", command=escaping(pid_file, RUNNING)),
            req("terminal/output", terminalId="term-1"),
        )
        assert result.success, result
        await ready(watcher)
        pid = grandchild(pid_file)
        if how == "session":
            await session.close()
            assert await gone(pid), "closing the session left the grandchild running"
    assert await gone(pid), "closing the client left the setsid grandchild running"


@pytest.mark.anyio
async def test_the_agent_dying_ends_its_terminals(agent: Agent, pid_file: Path) -> None:
    with anyio.fail_after(40):
        async with agent.client(terminal=True) as client:
            session = await client.new_session()
            result = await run_script(
                session,
                req("terminal/create", command=escaping(pid_file)),
                req("terminal/wait_for_exit", terminalId="term-1"),  # the pid file is written
                {"kill_self": True},
            )
            assert not result.success
            # Nobody can release them now: the next agent process does not know their ids.
            pid = grandchild(pid_file, running=False)  # killed with the agent already, maybe
            assert await gone(pid), "the dead agent's terminal kept running"
            assert client.terminal_slots.used == 0


# -- limits -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_17th_terminal_is_refused_and_a_released_one_frees_a_slot(agent: Agent) -> None:
    creates = [req("terminal/create", command="sleep", args=["1000"]) for _ in range(17)]
    with anyio.fail_after(60):
        async with agent.client(terminal=True) as client:
            session = await client.new_session()
            result = await run_script(
                session,
                *creates,
                req("terminal/release", terminalId="term-3"),
                req("terminal/create", command="echo", args=["still", "spawning"]),
                req("terminal/wait_for_exit", terminalId="term-17"),
                req("terminal/output", terminalId="term-17"),
            )
            answers = reports(result.text, "RESPONSE ")
            assert all("result" in a for a in answers[:16]), answers[:16]
            refused = answers[16]["error"]
            assert "too many terminals" in refused["message"]
            assert "limit is 16" in refused["message"]
            assert answers[18] == {"result": {"terminalId": "term-17"}}
            assert answers[20]["result"]["output"] == "still spawning\n"
            # This process can still start processes of its own.
            done = await anyio.run_process(["true"], check=False)
            assert done.returncode == 0
            assert client.terminal_slots.used == 16
    assert client.terminal_slots.used == 0


@pytest.mark.anyio
async def test_terminals_that_failed_or_were_released_leave_nothing(agent: Agent) -> None:
    grandchildren: list[int] = []
    try:
        await released_terminals_leave_nothing(agent, grandchildren)
    finally:  # a failing run leaves nothing either
        for pid in grandchildren:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def released_terminals_leave_nothing(agent: Agent, grandchildren: list[int]) -> None:
    # A command that cannot start takes no slot; 40 released terminals (more than the cap),
    # each with a setsid grandchild that holds the output pipe, leave no process, file
    # descriptor or task behind.
    cycle = [
        req("terminal/create", command="sh", args=["-c", "setsid sleep 1000 & echo $!"]),
        req("terminal/wait_for_exit", terminalId="term-{}"),
        req("terminal/release", terminalId="term-{}"),
    ]
    with anyio.fail_after(100):
        async with agent.client(terminal=True) as client:
            session = await client.new_session()
            missing = await run_script(
                session, req("terminal/create", command="/nonexistent/command")
            )
            error = reports(missing.text, "RESPONSE ")[0]["error"]
            assert "could not start '/nonexistent/command'" in error["message"]
            assert client.terminal_slots.used == 0
            before = counts()
            for batch in range(4):  # (in batches: the scripted agent's turn text stays small)
                steps = [
                    {**step, "params": {**step["params"], "terminalId": f"term-{n}"}}
                    if "terminalId" in step["params"]
                    else step
                    for n in range(batch * 10 + 1, batch * 10 + 11)
                    for step in cycle
                ]
                result = await run_script(session, *steps)
                answers = reports(result.text, "RESPONSE ")
                assert all("result" in a for a in answers), answers
                grandchildren.extend(int(t["output"]) for t in result.terminals)
            assert client.terminal_slots.used == 0
            after = counts()  # release answers once the tree and its pipes are gone
            assert_no_growth(before, after, 40)
            assert len(grandchildren) == 40
            assert not [pid for pid in grandchildren if alive(pid)]


@pytest.mark.anyio
async def test_a_huge_output_byte_limit_is_clamped_to_the_clients(agent: Agent) -> None:
    code = "import sys; sys.stdout.write('x' * 5000)"
    async with agent.session(terminal=True, terminal_output_limit=1000, bound=40) as session:
        result = await run_script(
            session,
            req(
                "terminal/create",
                command=sys.executable,
                args=["-c", code],
                outputByteLimit=10**15,
            ),
            req("terminal/wait_for_exit", terminalId="term-1"),
            req("terminal/output", terminalId="term-1"),
        )
    output = reports(result.text, "RESPONSE ")[2]["result"]
    assert output["output"] == "x" * 1000 and output["truncated"] is True


@pytest.mark.anyio
async def test_released_terminals_keep_a_bounded_total_of_output(agent: Agent) -> None:
    # Released one at a time, 12 terminals stay under the cap of live ones; what they printed
    # is kept up to 8 output limits per session, the newest whole, the oldest dropped.
    code = "import sys; sys.stdout.write('x' * 1000)"
    steps = []
    for n in range(1, 13):
        tid = f"term-{n}"
        steps += [
            req("terminal/create", command=sys.executable, args=["-c", code]),
            req("terminal/wait_for_exit", terminalId=tid),
            req("terminal/release", terminalId=tid),
        ]
    async with agent.session(terminal=True, terminal_output_limit=1000, bound=60) as session:
        result = await run_script(session, *steps)
    assert result.success, result
    outputs = {t["terminalId"]: t for t in result.terminals}
    assert sum(len(t["output"]) for t in outputs.values()) <= 8 * 1000
    assert outputs["term-12"]["output"] == "x" * 1000
    assert outputs["term-1"]["output"] == "" and outputs["term-1"]["truncated"] is True
    assert outputs["term-1"]["exitStatus"] == {"exitCode": 0, "signal": None}


# -- the process that holds the client ends -----------------------------------------------------

# A client in its own process: a terminal that leaves a setsid grandchild holding the output pipe
# (no redirection), then the turn ends, and the process either exits normally (closing the
# client) or waits to be SIGKILLed.
CLIENT = textwrap.dedent("""
    import os, sys, anyio, acp_notebook
    from tests.agents.script import agent_command, script
    async def main(command, wait, pid_file):
        async with acp_notebook.connect(agent_command(), terminal=True) as client:
            session = await client.new_session()
            create = {"request": "terminal/create", "params": {"command": command}}
            result = await (await session.prompt(script(create))).finished
            assert result.success, result
            while not os.path.exists(pid_file):  # the grandchild has started
                await anyio.sleep(0.02)
            print("ready", flush=True)
            if wait:
                await anyio.sleep_forever()
    anyio.run(main, sys.argv[1], sys.argv[2] == "wait", sys.argv[3])
""")


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["exit", "sigkill"])
async def test_no_terminal_outlives_the_clients_process(
    tmp_path: Path, pid_file: Path, how: str
) -> None:
    command = (
        f"setsid sleep 1000 & echo $! > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; "
        "exec sleep 1000"
    )
    repo = Path(__file__).resolve().parents[2]
    argv = [
        sys.executable,
        "-c",
        CLIENT,
        command,
        "wait" if how == "sigkill" else "exit",
        str(pid_file),
    ]
    async with await anyio.open_process(
        argv, cwd=tmp_path, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(repo)}
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        with anyio.fail_after(60):
            assert b"ready" in await proc.stdout.receive()
        pid = int(pid_file.read_text())
        if how == "sigkill":
            assert alive(pid)
            proc.kill()  # no clean-up code of the client runs: PDEATHSIG does the work
        with anyio.fail_after(30):
            await proc.wait()
            stderr = b""
            with contextlib.suppress(anyio.EndOfStream):
                while True:
                    stderr += await proc.stderr.receive()
    assert await gone(pid, timeout=10), f"the grandchild outlived the client ({how})"
    assert b"Event loop is closed" not in stderr, stderr.decode()
    if how == "exit":
        assert proc.returncode == 0, stderr.decode()


# -- kernels ------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["shutdown", "kill"])
def test_no_terminal_outlives_its_kernel(tmp_path: Path, pid_file: Path, how: str) -> None:
    kernel = Kernel(tmp_path)
    kernel.start()
    try:
        kernel.run("%config AcpNotebook.terminal = True")
        create = req("terminal/create", command=escaping(pid_file, RUNNING))
        kernel.run(f"%%agent --agent {scripted()}\n{script(create)}")
        wait_until(pid_file.exists, 20, "the terminal's command to start its grandchild")
        pid = grandchild(pid_file)
        if how == "shutdown":  # JupyterLab's "Shut Down Kernel": a shutdown_request
            kernel.km.shutdown_kernel(now=False)
        else:  # SIGKILL: no atexit, no clean-up code runs in the kernel
            kernel.km.shutdown_kernel(now=True)
        wait_until(lambda: process_gone(pid), 20, f"terminal grandchild {pid} to exit ({how})")
    finally:
        kernel.stop()


@pytest.mark.anyio
@pytest.mark.skipif(not cgroup_available(), reason="needs a writable cgroup v2 (root or delegated)")
async def test_a_command_that_kills_its_supervisor_still_loses_its_grandchild(
    agent: Agent, pid_file: Path
) -> None:
    # Without the supervisor nothing walks the tree; the cgroup the command was born in is killed.
    # (Only a supervisor: on a client without one, $PPID would be the test process itself.)
    suicide = "grep -q supervisor.py /proc/$PPID/cmdline && kill -9 $PPID"
    command = escaping(pid_file, f"{suicide}; exec sleep 1000")
    async with agent.session(terminal=True, bound=40) as session:
        result = await run_script(
            session,
            req("terminal/create", command=command),
            req("terminal/wait_for_exit", terminalId="term-1"),
        )
        assert result.success, result
        pid = grandchild(pid_file, running=False)
        assert await gone(pid), "the grandchild outlived the supervisor the command killed"


# A supervisor killed by its command before it could say "started": it said its cgroup first.
# (The real race, a command that kills its supervisor at once, is decided by the scheduler; this
# stand-in loses it every time.)
_KILLED_BEFORE_STARTED = """
import os, runpy, signal, sys, time
real = runpy.run_path(sys.argv[1], run_name="supervisor")
ours, _ = real["enter_new_cgroup"]()
real["_report"](f"cgroup {ours}")
actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, 1, 2)]
os.posix_spawnp(sys.argv[3], sys.argv[3:], os.environ, file_actions=actions, setsid=True)
deadline = time.monotonic() + 20
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.01)  # until the command wrote its grandchild's pid; then "we are killed"
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.anyio
@pytest.mark.skipif(not cgroup_available(), reason="needs a writable cgroup v2 (root or delegated)")
async def test_a_supervisor_killed_before_it_said_started_still_loses_the_tree(
    agent: Agent, pid_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "killed_supervisor.py"
    fake.write_text(_KILLED_BEFORE_STARTED)
    real = terminal._SUPERVISOR
    # argv: python -I -S SUPERVISOR PARENT cgroup COMMAND...: the stand-in gets the real
    # supervisor's path and the pid file in the places of PARENT and "cgroup".
    monkeypatch.setattr(terminal, "_SUPERVISOR", f"{fake}")
    original = anyio.open_process

    async def open_process(argv: list[str], **kwargs: object) -> object:
        if argv[3:4] == [str(fake)]:
            argv = [*argv[:4], real, str(pid_file), *argv[6:]]
        return await original(argv, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(terminal.anyio, "open_process", open_process)
    async with agent.session(terminal=True, bound=40) as session:
        await run_script(session, req("terminal/create", command=escaping(pid_file, RUNNING)))
        pid = grandchild(pid_file, running=False)
        assert await gone(pid), "the grandchild outlived a supervisor killed before 'started'"
