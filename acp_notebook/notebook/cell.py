"""Running one `%%agent` cell: pick the session, send the prompt, stream, and end loudly or not.

A failed turn raises `TurnFailed` so nbclient, papermill and Run All stop on it; a Stop pressed by
the user does not raise. The kernel's interrupt cancels the turn (the agent gets session/cancel),
then raises `TurnInterrupted`, one line, so the run stops.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from ..client import auth
from ..client.serving.permissions import PermissionPolicy
from ..client.session import Session
from ..client.turn import TurnHandle
from ..config import AgentSpec
from ..display import publish, views
from ..display.live import LiveView
from ..display.views import Code
from ..errors import (
    AgentStartError,
    AuthRequiredError,
    CapabilityError,
    InvalidArgumentError,
    TurnInterrupted,
)
from ..errors import TurnFailed as TurnFailed  # defined in errors.py; still importable here
from ..protocol.turn import TurnResult
from .options import CellOptions as CellOptions  # declared in options.py; importable here
from .runtime import Runtime
from .stored_sessions import Memory

#: Characters of terminal logins' command lines a failed cell's advice shows, whole; past it a
#: method's line says where its command is shown (`%agent auth`), not a part of it.
_ADVICE_COMMANDS = 12_000

if TYPE_CHECKING:
    from ..client.client import Client


async def open_session(
    runtime: Runtime,
    spec: AgentSpec,
    name: str,
    new: bool,
    client_options: dict[str, Any],
    memory: Memory | None = None,
    servers: Callable[[Client], Awaitable[list[dict[str, Any]]]] | None = None,
) -> Session:
    """The named session: the kernel's, else (first use after a restart, `memory` given, not
    `new`) the stored one reopened, else a new one; with `memory`, its id is remembered.
    `servers(client)` gives the `mcpServers` of a session opened here (see `mcp_servers`)."""
    changed = runtime.changed_options(spec.name, client_options)
    if changed:
        # fs, terminal, protection and the like are fixed when the agent starts (they are
        # negotiated in initialize): a change takes a fresh agent, or it would silently not apply.
        await runtime.close_agent(spec.name)
        publish.show(
            views.message(
                f"Settings changed ({', '.join(changed)}): agent ",
                Code(spec.name),
                " restarted; its sessions start anew.",
            )
        )
    entry = runtime.find(name)
    if entry is not None and entry.agent != spec.name:
        raise InvalidArgumentError(
            f"session {name!r} belongs to agent {entry.agent!r}; pick another --session name, "
            f"or close it with %agent close --session {name}"
        )
    if entry is not None and not new:
        runtime.last_session = name
        if memory is not None:  # its id changes if a restarted agent could not resume it
            memory.keep(runtime, entry.session.client, spec.name, name, entry.session)
        return entry.session
    if entry is not None:
        await runtime.close_session(name)
    client = await runtime.client(spec, client_options)
    mcp = await servers(client) if servers is not None else []
    session = None
    if memory is not None and not new:
        session = await memory.open(runtime, client, spec.name, name, mcp)
    if session is None:
        session = await client.new_session(mcp_servers=mcp)
    if memory is not None:
        memory.keep(runtime, client, spec.name, name, session)
    runtime.add(name, spec.name, session)
    return session


async def apply_settings(session: Session, opts: CellOptions) -> None:
    if opts.mode:
        # The spec prefers a config option of category "mode" over the legacy modes API.
        mode_option = next((o for o in session.config_options if o.get("category") == "mode"), None)
        if mode_option is not None:
            await session.set_config_option(str(mode_option.get("id")), opts.mode)
        else:
            await session.set_mode(opts.mode)
    for key, value in opts.config:
        option = next((o for o in session.config_options if o.get("id") == key), None)
        if option is not None and option.get("type") == "boolean" and isinstance(value, str):
            value = value.lower() in {"1", "true", "yes", "on"}
        await session.set_config_option(key, value)


def policy_for(opts: CellOptions, base: PermissionPolicy) -> PermissionPolicy:
    if not opts.allow and not opts.deny:
        return base
    return PermissionPolicy(
        allow=set(base.allow) | set(opts.allow),
        deny=set(base.deny) | set(opts.deny),
        default=base.default,
    )


async def wait_turn(
    turn: TurnHandle, timeout: float | None, grace: float, limit: float | None = None
) -> tuple[TurnResult, bool]:
    """Wait for the turn; on timeout cancel it and say so. Returns (result, timed out).

    `timeout` is what is left of the cell's `limit` (its --timeout, which the start used some of).
    """
    if timeout is None:
        return await turn.finished, False
    with anyio.move_on_after(timeout):
        return await turn.finished, False
    with anyio.CancelScope(shield=True), anyio.move_on_after(grace + 3):
        await turn.cancel()
    result = turn.result
    message = f"the turn did not finish within --timeout {limit or timeout:g} s and was cancelled"
    if result is None:  # the agent did not even die in time; nothing more to wait for
        return TurnResult(
            turn_id=turn.id, success=False, text="", error=message, stop_reason="cancelled"
        ), True
    return dataclasses.replace(result, success=False, error=message), True


def failure_message(result: TurnResult, spec: AgentSpec, stderr_tail: str) -> str:
    """One paragraph: what failed, where, the agent's last words, and what to try."""
    what = result.error or f"the agent stopped with {result.stop_reason!r}"
    parts = [f"The turn with agent {_who(spec)} failed: {what}."]
    if stderr_tail and stderr_tail not in what:
        parts.append(f"Last stderr lines of the agent:\n{_last_lines(stderr_tail)}")
    parts.append("What to try: " + _advice(result))
    return "\n".join(parts)


def _who(spec: AgentSpec) -> str:
    # A raw --agent command line is its own name: say it once.
    if spec.name == spec.command_line:
        return repr(spec.name)
    return f"{spec.name!r} ({spec.command_line})"


def _advice(result: TurnResult) -> str:
    error = (result.error or "").lower()
    if result.stop_reason == "refusal":
        return "the agent refused and dropped this prompt from its context; rephrase it."
    if result.stop_reason in {"max_tokens", "max_turn_requests"}:
        return "ask for less in one turn, or raise the agent's limits in its configuration."
    if result.over_budget:
        return "raise --max-cost (or c.AcpNotebook.max_cost_total), or ask for less in one turn."
    if result.output_json is None and "does not match the schema" in error:
        return "say more in the prompt about the answer you expect, or loosen the schema."
    if "timeout" in error or "did not finish" in error:
        return "raise --timeout, or split the task."
    if "exited" in error or "stopped" in error:
        return (
            "check the agent's stderr above (authentication, API key, network), then run "
            "the cell again: a fresh agent process starts."
        )
    return "run the cell again; if it keeps failing, check the agent's setup and logs."


def _last_lines(text: str, n: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def start_error_message(exc: BaseException | str, spec: AgentSpec) -> str:
    what = str(exc).rstrip(".")
    if isinstance(exc, TimeoutError | str):
        advice = (
            "run the cell again (a fresh agent process starts), raise --timeout or "
            "c.AcpNotebook.request_timeout if the agent is just slow, or check its setup"
        )
    elif isinstance(exc, AuthRequiredError):
        advice = _login_advice(exc.auth_methods, spec)
    elif isinstance(exc, AgentStartError):
        advice = (
            "install the agent or fix its command (see %agent list), or pick another with --agent"
        )
    else:
        advice = "check the agent's setup"
    return f"Could not start agent {_who(spec)}: {what}.\nWhat to try: {advice}."


def _login_advice(offered: list[dict[str, Any]], spec: AgentSpec) -> str:
    """Which login methods exist and the exact line to run for each (the agent's words bounded,
    shown as text by the caller)."""
    if not offered:
        return "the agent needs a login but offers no method: log in with its own tools"
    ways = []
    budget = _ADVICE_COMMANDS  # the paragraph is bounded: a command cut there would hide its end
    for method in offered[:10]:
        method_id = views.text(method.get("id"), 80)
        line = f"%agent auth {method_id} -a {shlex.quote(spec.name)}"
        if method.get("type") == "terminal":
            try:  # whole, with the variables it sets: what will run, not its first 300 characters
                command = auth.login_line(spec.command, method)
            except CapabilityError as exc:
                line += f" (unusable: {exc})"
            else:
                if len(command) <= budget:
                    budget -= len(command)
                    line += f" (runs {command}; or run that in a terminal)"
                else:
                    line += f" (%agent auth -a {shlex.quote(spec.name)} shows what it runs)"
        ways.append(f"{views.text(method.get('name') or method_id, 80)}: {line}")
    return "log in first, then run the cell again. " + "; ".join(ways)


async def interrupted(turn: TurnHandle, view: LiveView | None, grace: float) -> NoReturn:
    """The kernel's interrupt: cancel the turn, show how it ended, then raise `TurnInterrupted`
    (one line, where the interrupt itself would show a traceback through our frames and anyio's)
    so the run stops."""
    with anyio.CancelScope(shield=True):
        with anyio.move_on_after(grace + 3):
            await turn.cancel()
        if view is not None and turn.result is not None:
            view.finish(turn.result, keep_record=True)
            await view.aclose()
    raise TurnInterrupted(
        "the turn was cancelled by the kernel's interrupt (the agent was sent session/cancel)",
        turn.result,
    ) from None


def is_interrupt(exc: BaseException) -> bool:
    return isinstance(exc, KeyboardInterrupt | asyncio.CancelledError)
