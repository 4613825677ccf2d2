"""Authentication of both kinds, logout and session/delete (issue 11), with the scripted agent:
the client API, then `%agent auth`, `%agent logout`, `%agent delete` and the failing cell's
advice in a real kernel."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import anyio
import pytest

from acp_notebook.errors import AuthFailedError, AuthRequiredError, CapabilityError
from tests.client_helpers import Agent
from tests.nb_util import execute, kernel_env, scripted, text
from tests.shared_kernel import SharedKernel

pytestmark = [pytest.mark.anyio]


async def test_a_terminal_login_runs_the_agents_command_then_the_agent_restarts(
    agent: Agent, tmp_path: Path
) -> None:
    token = tmp_path / "logged-in"
    output: list[str] = []
    with anyio.fail_after(40):
        async with agent.client("--auth-terminal", str(token)) as client:
            with pytest.raises(AuthRequiredError) as info:
                await client.new_session()
            (offered,) = info.value.auth_methods
            assert offered["type"] == "terminal" and offered["args"][-1] == str(token)
            assert "login (Log in)" in str(info.value)
            before = client.processes_started
            await client.authenticate("login", on_output=output.append)
            assert token.read_text() == "logged in\n"
            session = await client.new_session()  # on a fresh, re-initialized agent
            assert session.id and client.processes_started == before + 1
    assert "Logged in." in "".join(output)
    assert len(agent.sent("initialize")) == 2  # the spec: reconnect and initialize again
    assert not agent.sent("authenticate")  # a terminal method is never `authenticate`d


async def test_the_auth_method_option_logs_in_with_a_terminal_method_and_retries(
    agent: Agent, tmp_path: Path
) -> None:
    token = tmp_path / "logged-in"
    with anyio.fail_after(40):
        async with agent.client("--auth-terminal", str(token), auth_method="login") as client:
            session = await client.new_session()
            assert session.id and token.exists()
    assert [m["method"] for m in agent.messages() if m.get("method") == "session/new"] == [
        "session/new",
        "session/new",
    ]


async def test_a_failed_login_says_so_with_the_command_to_run(agent: Agent, tmp_path: Path) -> None:
    token = tmp_path / "no-such-dir" / "logged-in"  # the login cannot write it: exits 1
    output: list[str] = []
    with anyio.fail_after(40):
        async with agent.client("--auth-terminal", str(token)) as client:
            with pytest.raises(AuthFailedError) as info:
                await client.authenticate("login", on_output=output.append)
            with pytest.raises(AuthRequiredError):
                await client.new_session()
    message = str(info.value)
    assert "exited with code 1" in message and "SCRIPTED_LOGIN=yes" in message
    assert "--login-to" in message and "Traceback" in "".join(output)


async def test_logout_where_offered_and_a_clear_error_where_not(
    agent: Agent, tmp_path: Path
) -> None:
    token = tmp_path / "logged-in"
    with anyio.fail_after(40):
        async with agent.client("--auth-terminal", str(token), "--logout") as client:
            await client.authenticate("login")
            await client.new_session()
            await client.logout()
            assert not token.exists()
            with pytest.raises(AuthRequiredError):
                await client.new_session()
        async with agent.client() as client:
            with pytest.raises(CapabilityError, match="does not offer logout"):
                await client.logout()


async def test_delete_closes_the_session_and_it_leaves_the_list(agent: Agent) -> None:
    with anyio.fail_after(40):
        async with agent.client("--delete", "--list") as client:
            kept, gone = await client.new_session(), await client.new_session()
            await gone.delete()
            assert gone.closed and not kept.closed
            listed = {s["sessionId"] for s in await client.list_sessions()}
            assert kept.id in listed and gone.id not in listed
            await client.delete_session("never-existed")  # the spec: succeeds silently
        async with agent.client() as client:
            with pytest.raises(CapabilityError, match="cannot delete"):
                await client.delete_session("x")
    assert [m["params"]["sessionId"] for m in agent.sent("session/delete")] == [
        gone.id,
        "never-existed",
    ]


def test_auth_commands_and_the_failing_cells_advice_in_a_kernel(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    token = tmp_path / "logged-in"
    agent = scripted("--auth-terminal", str(token), "--logout", "--delete", "--list")
    nb = execute(
        [
            f"%%agent -a {agent}\nhello",
            f"%agent auth -a {agent}",
            f"%agent auth login -a {agent}",
            f"%%agent -a {agent} --out r\nhello",
            f"%agent delete {{r.session_id}} -a {agent}",
            f"%agent logout -a {agent}",
        ],
        tmp_path,
        allow_errors=True,
        kernel=kernel,
    )
    failed, listed, login, ok, deleted, logged_out = (text(c) for c in nb.cells)
    assert "TurnFailed" in failed and "%agent auth login -a" in failed
    assert "--login-to" in failed  # the exact command, to run in a terminal instead
    assert "login" in listed and "Log in" in listed and "SCRIPTED_LOGIN=yes" in listed
    assert "Logged in." in login and "logged in; the agent restarted" in login
    assert "echo: hello" in ok and "Error" not in ok
    assert "Deleted session" in deleted
    assert "logged out" in logged_out and not token.exists()


def test_a_terminal_logins_whole_command_line_is_shown_escaped_and_masked(
    tmp_path: Path,
    kernel: SharedKernel,
) -> None:
    # The method's variables come first, then the agent's command and the method's args: cut at
    # 200 characters (300 in a cell's advice, without the variables), the end was hidden.
    token = tmp_path / "logged-in"
    agent = scripted("--auth-terminal", str(token))
    command = shlex.split(shlex.split(agent)[0])  # `scripted` gives one quoted word
    extra = {"LONG_VAR": "v" * 300, "ESC_VAR": "\x1b[2Jx\u202e", "LOGIN_TOKEN": "s3cr3t-v4lue-99"}
    nb = execute(
        [f"%%agent -a {agent}\nhello", f"%agent auth -a {agent}"],
        tmp_path,
        env=kernel_env(tmp_path, SCRIPTED_LOGIN_VARS=json.dumps(extra)),
        allow_errors=True,
        kernel=kernel,
    )
    failed, listed = (text(c) for c in nb.cells)
    whole = (
        f"SCRIPTED_LOGIN=yes LONG_VAR={'v' * 300} ESC_VAR=$'\\x1b[2Jx\\u202e' "
        "LOGIN_TOKEN=[redacted] "
    )
    for shown in (failed, listed):
        assert whole in shown, shown
        # Then the agent's command and the method's args, to the end (the login's file is
        # masked: the agent's --auth-terminal names it, a secret-looking option).
        rest = shown.split(whole, 1)[1]
        runs = " ".join([*command[:-1], "[redacted]", "--login-to", "[redacted]"])
        assert rest.startswith(runs), rest
        assert "s3cr3t-v4lue-99" not in shown and "\x1b[2J" not in shown and "\u202e" not in shown


def test_a_login_line_that_would_read_otherwise_is_not_run() -> None:
    from acp_notebook.client.auth import MAX_LINE_CHARS, login_line

    terminal = {"type": "terminal", "args": ["--login"]}
    assert (
        login_line(["agent"], {**terminal, "env": {"A": "it's"}}) == "A='it'\"'\"'s' agent --login"
    )
    with pytest.raises(CapabilityError, match="not a name"):
        login_line(["agent"], {**terminal, "env": {"X=1 rm -rf ~;": "y"}})
    long = {**terminal, "env": {f"V{i}": "\x1b" * 1000 for i in range(20)}}  # 4x when escaped
    with pytest.raises(CapabilityError, match=f"longer than {MAX_LINE_CHARS:,}"):
        login_line(["agent"], long)


async def test_a_login_that_never_ends_is_killed_with_what_it_started(tmp_path: Path) -> None:
    import os
    import sys

    from acp_notebook.client.auth import run_login
    from tests.client_helpers import gone

    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    said: list[str] = []
    with anyio.fail_after(30):
        code = await run_login(
            [sys.executable, "-c", script], dict(os.environ), str(tmp_path), said.append, 2.0
        )
        assert code is None  # killed at its timeout
        assert await gone(int("".join(said).split()[0]))  # and the process it started
