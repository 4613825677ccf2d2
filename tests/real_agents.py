"""Launch commands for the real ACP agents (written by others) that tests drive.

The agents are installed by ``tests/setup.sh`` into ``.agents/`` at the repo root
(``.ci/run`` calls it). Wire facts about them are in ``tests/agents/REAL_AGENTS.md``.

Overrides:
  ACP_NB_FAST_AGENT  path of the ``fast-agent`` executable, or of a venv that has it
  ACP_NB_ECHO_AGENT  full command line of the SDK echo agent (split with shlex), e.g.
                     "/some/venv/bin/python /some/dir/echo_agent.py"
  ACP_NB_CLAUDE_CODE_ACP  path of Claude Code's ACP adapter (``claude-code-acp``)
  ACP_NB_CODEX_ACP   path of Codex's ACP adapter (``codex-acp``)

A missing agent skips the test locally, but fails it when ``CI`` is set: in CI a skip
would be a hidden failure.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import NoReturn

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
AGENTS_DIR = REPO_ROOT / ".agents"

FAST_AGENT_VENV = AGENTS_DIR / "fast-agent"
ECHO_AGENT_VENV = AGENTS_DIR / "sdk-echo"
SDK_EXAMPLES = AGENTS_DIR / "sdk-examples"
CLAUDE_CODE_ACP = AGENTS_DIR / "claude-code-acp" / "node_modules" / ".bin" / "claude-code-acp"
CODEX_ACP = AGENTS_DIR / "codex-acp" / "node_modules" / ".bin" / "codex-acp"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _missing(what: str, detail: str) -> NoReturn:
    msg = f"{what} is not installed ({detail}); run `bash tests/setup.sh`"
    if in_ci():
        pytest.fail(f"{msg} [CI is set: a missing real agent is a failure]", pytrace=False)
    pytest.skip(msg)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def fast_agent_executable() -> Path:
    """Path of the ``fast-agent`` executable (skip/fail when it is missing)."""
    override = os.environ.get("ACP_NB_FAST_AGENT")
    if override:
        path = Path(override)
        if path.is_dir():
            path = path / "bin" / "fast-agent"
        if not _executable(path):
            _missing("fast-agent", f"ACP_NB_FAST_AGENT={override!r} is not an executable")
        return path
    path = FAST_AGENT_VENV / "bin" / "fast-agent"
    if not _executable(path):
        _missing("fast-agent", f"no {path.relative_to(REPO_ROOT)}")
    return path


def fast_agent_command(model: str, home: Path, shell: bool = True) -> list[str]:
    """argv for ``fast-agent`` as an ACP stdio agent.

    model: ``passthrough`` (echoes the prompt), ``slow`` (about 3 s per answer), or any
    model spec. home: a fresh directory (``--no-home`` breaks ``session/new``).
    shell: expose the ``execute`` tool (uses the client's ``terminal/*`` when the client
    advertises ``terminal: true``).
    """
    argv = [
        str(fast_agent_executable()),
        "--no-update-check",
        "acp",
        "--model",
        model,
        "--home",
        str(home),
    ]
    if shell:
        argv.append("--shell")
    return argv


def echo_agent_command() -> list[str]:
    """argv for the official Python SDK's ``examples/echo_agent.py`` (skip/fail if missing)."""
    override = os.environ.get("ACP_NB_ECHO_AGENT")
    if override:
        argv = shlex.split(override)
        if not argv:
            _missing("the SDK echo agent", "ACP_NB_ECHO_AGENT is empty")
        return argv
    python = ECHO_AGENT_VENV / "bin" / "python"
    script = SDK_EXAMPLES / "echo_agent.py"
    for needed in (python, script):
        if not needed.exists():
            _missing("the SDK echo agent", f"no {needed.relative_to(REPO_ROOT)}")
    return [str(python), str(script)]


def _npm_agent(what: str, variable: str, default: Path) -> list[str]:
    override = os.environ.get(variable)
    path = Path(override) if override else default
    if not _executable(path):
        where = f"{variable}={override!r}" if override else f"no {path.relative_to(REPO_ROOT)}"
        _missing(what, where)
    return [str(path)]


def claude_code_acp_command() -> list[str]:
    """argv for Claude Code's ACP adapter (npm `@zed-industries/claude-code-acp`; skip/fail if
    missing). It needs a model endpoint: the tests give it `tests/fake_model_server.py` through
    ``ANTHROPIC_BASE_URL``."""
    return _npm_agent("claude-code-acp", "ACP_NB_CLAUDE_CODE_ACP", CLAUDE_CODE_ACP)


def codex_acp_command() -> list[str]:
    """argv for Codex's ACP adapter (npm `@zed-industries/codex-acp`, a native binary; skip/fail
    if missing). It needs a model endpoint: the tests give it `tests/fake_model_server.py` as a
    model provider in ``$CODEX_HOME/config.toml``."""
    return _npm_agent("codex-acp", "ACP_NB_CODEX_ACP", CODEX_ACP)
