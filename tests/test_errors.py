"""One exception family: every exception in `errors.py`, exported, an `AcpError`; the call sites
that used to raise a bare `ValueError` raise one of them (and still a `ValueError`)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

import acp_notebook
from acp_notebook import errors
from acp_notebook.client.permissions import PermissionPolicy
from acp_notebook.config import AgentSpec, Registry
from acp_notebook.notebook.cell import open_session
from acp_notebook.notebook.runtime import Runtime
from tests.client_helpers import Agent

PUBLIC = [
    obj
    for _, obj in inspect.getmembers(errors, inspect.isclass)
    if issubclass(obj, BaseException) and obj.__module__ == errors.__name__
]


def test_errors_module_holds_the_whole_family() -> None:
    names = {cls.__name__ for cls in PUBLIC}
    assert {
        "AcpError",
        "ConfigError",
        "RpcError",
        "TurnFailed",
        "InvalidArgumentError",
        "NotOfferedError",
        "InvalidCommandError",
    } <= names


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda cls: cls.__name__)
def test_every_exception_is_exported_and_an_acp_error(cls: type[BaseException]) -> None:
    assert issubclass(cls, errors.AcpError)
    assert cls.__name__ in acp_notebook.__all__
    assert getattr(acp_notebook, cls.__name__) is cls


def test_no_exception_class_is_defined_outside_errors_py() -> None:
    # The old homes still import them (code written against them keeps working).
    from acp_notebook import config
    from acp_notebook.client import connection
    from acp_notebook.notebook import cell

    assert connection.RpcError is errors.RpcError
    assert config.ConfigError is errors.ConfigError
    assert cell.TurnFailed is errors.TurnFailed


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (errors.InvalidArgumentError, ValueError),
        (errors.NotOfferedError, ValueError),
        (errors.InvalidCommandError, TypeError),
        (errors.ConfigError, ValueError),
        (errors.PromptError, ValueError),
        (errors.RequestTimeoutError, TimeoutError),
        (errors.TurnInterrupted, KeyboardInterrupt),
    ],
)
def test_errors_keep_the_builtin_meaning(cls: type[BaseException], builtin: type) -> None:
    assert issubclass(cls, builtin)


def test_turn_failed_shows_one_paragraph_in_ipython() -> None:
    exc = errors.TurnFailed("the agent exited", result=None)
    assert exc._render_traceback_() == ["\x1b[31mTurnFailed\x1b[0m: the agent exited"]


def test_turn_interrupted_shows_one_line_in_ipython() -> None:
    exc = errors.TurnInterrupted("the turn was cancelled")
    assert exc._render_traceback_() == ["\x1b[31mTurnInterrupted\x1b[0m: the turn was cancelled"]


# -- the former bare-ValueError sites ---------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"default": "maybe"}, "default must be"),
        ({"allow": ["bogus"]}, "unknown tool kind"),
        ({"deny": "read, nonsense"}, "unknown tool kind"),
    ],
)
def test_permission_policy_raises_invalid_argument(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(errors.InvalidArgumentError, match=match):
        PermissionPolicy(**kwargs)


def test_an_unknown_agent_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError, match="unknown agent 'no-such-agent'"):
        Registry.build({}, None, "/nonexistent/agents.toml").resolve("no-such-agent")


@pytest.mark.anyio
async def test_a_session_name_of_another_agent_is_an_invalid_argument() -> None:
    runtime = Runtime()
    other = SimpleNamespace(closed=False, client=SimpleNamespace(closed=False))
    runtime.add("work", "gemini", other)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgumentError, match="belongs to agent 'gemini'"):
        await open_session(runtime, AgentSpec("demo", ("true",)), "work", False, {})


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_what_the_agent_does_not_offer_is_not_offered(agent: Agent) -> None:
    cases: list[tuple[str, Any, str]] = [
        ("mode", "yolo", "unknown mode"),
        ("nonexistent", "x", "unknown config option"),
        ("verbose", "yes", "takes true or false"),
        ("model", True, "takes one of its values"),
        ("model", "huge", "is not a value of"),
    ]
    with anyio.fail_after(20):
        async with agent.client("--modes", "--config-options") as client:
            session = await client.new_session()
            for key, value, match in cases:
                with pytest.raises(errors.NotOfferedError, match=match):
                    if key == "mode":
                        await session.set_mode(value)
                    else:
                        await session.set_config_option(key, value)
    assert agent.sent("session/set_mode") == agent.sent("session/set_config_option") == []
