"""One exception family: every exception in `errors.py`, exported, an `AcpError`; the call sites
that used to raise a bare `ValueError` raise one of them (and still a `ValueError`)."""

from __future__ import annotations

import ast
import builtins
import inspect
from types import SimpleNamespace
from typing import Any

import pytest

import acp_notebook
from acp_notebook import errors
from acp_notebook.client.serving.permissions import PermissionPolicy
from acp_notebook.config import AgentSpec, Registry
from acp_notebook.notebook.ledger import Ledger
from acp_notebook.notebook.runtime import Runtime
from acp_notebook.notebook.start import open_session
from acp_notebook.protocol.costs import CostLimit
from tests.client_helpers import Agent
from tests.unit.test_layers import PACKAGE, REPO, load_package

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
    # But the interrupt: an AcpError is an Exception, which `except Exception` would swallow.
    assert issubclass(cls, errors.AcpError) != (cls is errors.TurnInterrupted)
    assert cls.__name__ in acp_notebook.__all__
    assert getattr(acp_notebook, cls.__name__) is cls


# The two separate programs (stdlib only, nothing of the package) keep their own exceptions.
SEPARATE_PROGRAMS = ("acp_notebook/demo_agent/", "acp_notebook/kernel_tools/relay.py")
BUILTIN_EXCEPTIONS = {
    name for name, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, Exception)
}

# Exception classes outside errors.py: internal signals caught in their own subsystem, never
# reaching a user.
INTERNAL_CLASSES = {
    "acp_notebook/kernel_tools/notebook_link.py: FrontEndError": "the front-end did not do an "
    "operation; notebook_edit.py catches it and tells the agent, as the tool's answer",
    "acp_notebook/protocol/notes.py: NotFolded": "an update not shaped as the spec says (notes, "
    "plans, subagents); fold.py catches it (a ValueError) and keeps the update as a raw part",
    "acp_notebook/client/serving/safe_fs.py: Cancelled": "a worker thread's stop; workspace.py "
    "catches it",
    "acp_notebook/kernel_tools/run.py: CodeTimedOut": "raised in the agent's code at its "
    "turn's deadline; run_code catches it and reports it as that code's error",
}

# Where the package raises a built-in exception itself, by "file: exception". Each is an
# internal signal or a protocol of Python's, caught at the boundary named here; none reaches
# a user as a bare ValueError. A new one fails the test below: raise an errors.py class
# instead, or add it here with the place that catches it.
INTERNAL_RAISES = {
    "acp_notebook/__init__.py: AttributeError": "a module __getattr__ must raise it",
    "acp_notebook/protocol/methods.py: ImportError": "the SDK is missing: at import, as Python",
    "acp_notebook/client/process.py: FileNotFoundError": "what a failed spawn raises; "
    "Process.start turns it into AgentStartError",
    "acp_notebook/client/process.py: PermissionError": "the same",
    "acp_notebook/protocol/structured.py: ValueError": "a validator's answer: client/"
    "structured.py makes it a re-ask or the turn's error, notebook/replay.py a ReplayError",
    "acp_notebook/run/cli.py: ValueError": "a bad command line: main() prints it, exits 2",
    "acp_notebook/client/acp_registry.py: ValueError": "a registry that is not one: load() "
    "catches it, and reads the cached copy or raises RegistryUnavailable",
    "acp_notebook/client/acp_registry.py: TimeoutError": "a fetch past its time: the same",
    "acp_notebook/run/params.py: ValueError": "the same",
    "acp_notebook/kernel_tools/run.py: EOFError": "input() in the agent's code, as "
    "at the end of its input: run_code reports it as that code's error",
    "acp_notebook/kernel_tools/run.py: TypeError": "bytes written to stdout by the "
    "agent's code, as a text stream refuses them: run_code reports it as that code's error",
    "acp_notebook/kernel_tools/card.py: TypeError": "a tool argument of the agent's: "
    "answered as a tool error",
    "acp_notebook/kernel_tools/notebook_edit.py: TypeError": "a tool argument of the agent's: "
    "tools.py answers it as a tool error",
    "acp_notebook/kernel_tools/notebook_edit.py: ValueError": "a tool argument of the agent's: "
    "tools.py answers it as a tool error",
    "acp_notebook/client/serving/regular_file.py: OSError": "a path in a setting that is not a "
    "regular file: config.py makes it a ConfigError, recording.py a ReplayError",
    "acp_notebook/notebook/stored_sessions.py: OSError": "caught in _write, kept as a problem",
    "acp_notebook/run/execute.py: OSError": "a folder at the output's name: run_notebook "
    "reports the save's failure as that notebook's",
    "acp_notebook/widgets/elicit_form.py: TimeoutError": "a handler's timeout: the client "
    "declines the request (client/serving/elicit.py)",
    "acp_notebook/widgets/kit.py: TypeError": "a bug, not an input: the notebook hands "
    "`turn_view` only what this kit's `starting` made; nothing should catch it",
    "acp_notebook/widgets/turn_view.py: TimeoutError": "a permission handler's timeout: the "
    "client rejects the request, fail closed, and records why (client/serving/requests.py)",
}


def _where(path: Any) -> str:
    return path.relative_to(REPO).as_posix()


def builtin_raises() -> dict[str, int]:
    """Every `raise <built-in exception>` in the package, outside the separate programs."""
    found: dict[str, int] = {}
    for module in load_package(REPO, PACKAGE).values():
        where = _where(module.path)
        if where.startswith(SEPARATE_PROGRAMS):
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in BUILTIN_EXCEPTIONS:
                    found.setdefault(f"{where}: {exc.id}", node.lineno)
    return found


def exception_classes() -> dict[str, int]:
    """Every class deriving from an exception, outside errors.py and the separate programs."""
    found: dict[str, int] = {}
    for module in load_package(REPO, PACKAGE).values():
        where = _where(module.path)
        if where.startswith(SEPARATE_PROGRAMS) or where == "acp_notebook/errors.py":
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                if bases & (BUILTIN_EXCEPTIONS | {"BaseException"}) or any(
                    b.endswith(("Error", "Exception")) for b in bases
                ):
                    found[f"{where}: {node.name}"] = node.lineno
    return found


def test_builtin_exceptions_are_raised_only_where_a_boundary_catches_them() -> None:
    found = builtin_raises()
    new = {k: line for k, line in found.items() if k not in INTERNAL_RAISES}
    assert not new, (
        "bare built-in exception(s) raised; raise an errors.py class (InvalidArgumentError is "
        "also a ValueError), or list the site in INTERNAL_RAISES with what catches it: "
        + "; ".join(f"{k} (line {line})" for k, line in new.items())
    )
    gone = sorted(set(INTERNAL_RAISES) - set(found))
    assert not gone, f"no longer raised, delete from INTERNAL_RAISES: {gone}"


def test_no_exception_class_is_defined_outside_errors_py_by_the_source() -> None:
    found = exception_classes()
    assert "acp_notebook/client/serving/safe_fs.py: Cancelled" in found  # the walk sees classes
    new = {k: line for k, line in found.items() if k not in INTERNAL_CLASSES}
    assert not new, f"exception class(es) outside errors.py, define them there: {new}"


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


def test_turn_interrupted_is_an_interrupt_only_and_carries_the_result() -> None:
    result = object()
    with pytest.raises(KeyboardInterrupt) as caught:
        try:
            raise errors.TurnInterrupted("the turn was cancelled", result)
        except Exception:  # a person's catch-all around a turn: not their interrupt
            pytest.fail("except Exception caught TurnInterrupted")
    assert isinstance(caught.value, errors.TurnInterrupted) and caught.value.result is result
    assert errors.TurnInterrupted("before any turn").result is None


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
async def test_what_the_agent_does_not_offer_is_not_offered(agent: Agent) -> None:
    cases: list[tuple[str, Any, str]] = [
        ("mode", "yolo", "unknown mode"),
        ("nonexistent", "x", "unknown config option"),
        ("verbose", "yes", "takes true or false"),
        ("model", True, "takes one of its values"),
        ("model", "huge", "is not a value of"),
    ]
    async with agent.session("--modes", "--config-options") as session:
        for key, value, match in cases:
            with pytest.raises(errors.NotOfferedError, match=match):
                if key == "mode":
                    await session.set_mode(value)
                else:
                    await session.set_config_option(key, value)
    assert agent.sent("session/set_mode") == agent.sent("session/set_config_option") == []


@pytest.mark.parametrize("value", [10**400, -1, float("nan"), float("inf")])
def test_a_bad_cost_limit_is_an_invalid_argument(value: float) -> None:
    with pytest.raises(errors.InvalidArgumentError):
        CostLimit.of(value)


def test_a_kernel_budget_that_is_no_number_of_usd_is_an_invalid_argument() -> None:
    # c.AcpNotebook.max_cost_total = inf reaches CostLimit through the ledger, not CostLimit.of
    with pytest.raises(errors.InvalidArgumentError, match="finite"):
        Ledger().turn_limit(None, float("inf"))
