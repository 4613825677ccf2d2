"""Starting a cell's agent and session: the named session found, reopened or opened, its
--mode/--config applied, within the cell's --timeout, under a view whose Stop cancels the start;
and what a failed start says (`start_error_message`, with the login lines to run).

`%%agent` (`cell.py`) starts here before its turn; `%agent chat` and `%agent mode/config`
(`commands.py`) open and set sessions with `open_named` and `apply_settings`.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from IPython.core.error import UsageError

from ..client import auth
from ..client.opening import system_prompt
from ..client.session import Session
from ..config import AgentSpec
from ..display import publish, views
from ..display.views import Code
from ..errors import (
    AcpError,
    AgentStartError,
    AuthRequiredError,
    CapabilityError,
    InvalidArgumentError,
    RequestTimeoutError,
    TurnFailed,
    TurnInterrupted,
)
from . import cell_forks, mcp_servers
from .cell_forks import Story
from .host import Host, Starting
from .options import CellOptions
from .replay import current_cell_id, current_run_id
from .runtime import Runtime
from .stored_sessions import Memory

if TYPE_CHECKING:
    from ..client.client import Client


async def start(
    host: Host,
    spec: AgentSpec,
    opts: CellOptions,
    client_options: dict[str, Any],
    timeout: float | None,
) -> Session:
    """The cell's session with its --mode/--config applied, within the cell's --timeout.

    An agent that does not answer in time (the --timeout, or a request's own deadline) is
    stopped, unless another named session uses it, so the next cell starts a fresh one.
    """
    name = opts.session or spec.name
    doing = ""
    try:
        with anyio.fail_after(timeout):
            await prestarted(host, spec, opts)
            session = await _session(host, spec, opts, client_options)
            doing = "apply --mode/--config (session/set_mode, session/set_config_option)"
            await settings_applied(host, session, opts)
            return session
    except TimeoutError as exc:
        agent = host.runtime.hosts.get(spec.name)
        doing = doing or (
            "open a session (session/new)"
            if agent is not None and agent.running
            else "start (initialize)"
        )
        stop = not host.runtime.other_sessions(spec.name, name)
        if stop:
            with anyio.CancelScope(shield=True):
                await host.runtime.close_agent(spec.name)
        limit = f"within --timeout {timeout:g} s" if timeout is not None else "in time"
        what = str(exc) if isinstance(exc, AcpError) else f"the agent did not {doing} {limit}"
        what += "; it was stopped" if stop and "stopped" not in what else ""
        raise TurnFailed(agent_text(host, start_error_message(what, spec))) from None


async def start_shown(
    host: Host,
    spec: AgentSpec,
    opts: CellOptions,
    client_options: dict[str, Any],
    timeout: float | None,
    view: Starting,
) -> Session | None:
    """`start` under a view saying "starting agent…" whose Stop cancels the start: the agent,
    if this cell started it, is stopped, and the cell ends quietly (None). A failure or the
    kernel's interrupt replaces the view too."""
    agent = host.runtime.hosts.get(spec.name)
    was_running = agent is not None and agent.running
    with anyio.CancelScope() as scope:
        view.on_stop = scope.cancel
        try:
            session = await start(host, spec, opts, client_options, timeout)
        except BaseException as exc:
            if not scope.cancel_called:
                view.end({"text/plain": ""})  # the error says what happened
                if is_interrupt(exc):
                    raise TurnInterrupted(
                        "the agent's start was cancelled by the kernel's interrupt"
                    ) from None
            raise
    if not view.stopping:
        return session
    with anyio.CancelScope(shield=True):
        stopped = not was_running and not host.runtime.other_sessions(
            spec.name, opts.session or spec.name
        )
        if stopped:  # no agent process outlives a start the user stopped
            await host.runtime.close_agent(spec.name)
    words = "⏹ Stopped before the turn started" + ("; the agent was stopped." if stopped else ".")
    view.end(views.message(words))
    return None


async def prestarted(host: Host, spec: AgentSpec, opts: CellOptions) -> None:
    """Before a cell of `spec` starts: wait for a background start of it (`prestart.py`); if
    that failed and the cell would have used its session, raise `TurnFailed` saying so, once (the
    next cell starts the agent as usual). A cell of another agent does not wait."""
    pre = host.runtime.prestart
    if pre is None or pre.agent != spec.name:
        return
    try:
        # Cancelling the cell (--timeout, Stop, interrupt) cancels the start: its agent stops.
        error = await pre.task
    finally:
        if host.runtime.prestart is pre:
            host.runtime.prestart = None
    if error is not None and (opts.session or spec.name) == pre.session and not opts.new:
        raise TurnFailed(prestart_failure(error))


def prestart_failure(error: str) -> str:
    """What the first cell (or `%agent status`) says of a failed background start."""
    return (
        "The agent's start in the background (c.AcpNotebook.prestart or %agent start) "
        f"failed, so this cell did not run; running it again starts the agent anew.\n{error}"
    )


async def _session(
    host: Host, spec: AgentSpec, opts: CellOptions, client_options: dict[str, Any]
) -> Session:
    """The cell's named session, opened if need be, then forked for this cell's turn
    (`cell_forks.py`); its id and story remembered."""
    name = opts.session or spec.name
    try:
        memory = Memory.of(host.remember_sessions, host.user_ns)

        async def servers(client: Client) -> list[dict[str, Any]]:
            return await mcp_servers.session_servers(host, spec, client, opts)

        await open_session(
            host.runtime,
            spec,
            name,
            opts.new,
            client_options,
            memory,
            servers,
            opts.system_prompt,
        )
        entry = host.runtime.sessions[name]
        client = await host.runtime.client(spec, client_options)  # running: the same one
        cell = current_cell_id() if host.fork_cells else None
        session = await cell_forks.turn_session(host.runtime, entry, client, cell, current_run_id())
        if memory is not None:
            memory.keep(host.runtime, session.client, spec.name, name, session, entry.story)
        return session
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except RequestTimeoutError:
        raise  # start stops the agent
    except AcpError as exc:
        raise TurnFailed(agent_text(host, start_error_message(exc, spec))) from None


async def open_session(
    runtime: Runtime,
    spec: AgentSpec,
    name: str,
    new: bool,
    client_options: dict[str, Any],
    memory: Memory | None = None,
    servers: Callable[[Client], Awaitable[list[dict[str, Any]]]] | None = None,
    system_prompt: str | None = None,
) -> Session:
    """The named session: the kernel's, else (first use after a restart, `memory` given, not
    `new`) the stored one reopened, else a new one; with `memory`, its id is remembered.
    `servers(client)` gives the `mcpServers` of a session opened here (see `mcp_servers`),
    `system_prompt` its instructions (None: the client's; a live session opened with other
    ones is a usage error: they are given when a session opens)."""
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
        _same_prompt(entry.session, name, system_prompt)
        runtime.last_session = name
        if memory is not None:  # its id changes if a restarted agent could not resume it
            memory.keep(runtime, entry.session.client, spec.name, name, entry.session, entry.story)
        return entry.session
    if entry is not None:
        await runtime.close_session(name)
    client = await runtime.client(spec, client_options)
    _prompt_taken(runtime, client, spec.name, system_prompt)
    mcp = await servers(client) if servers is not None else []
    session, story = None, Story()
    if memory is not None and not new:
        session, story = await memory.open(runtime, client, spec.name, name, mcp, system_prompt)
    if session is None:
        session = await client.new_session(mcp_servers=mcp, system_prompt=system_prompt)
    if memory is not None:
        memory.keep(runtime, client, spec.name, name, session, story)
    runtime.add(name, spec.name, session, story)
    return session


def _same_prompt(session: Session, name: str, requested: str | None) -> None:
    """A live session keeps the system prompt it was opened with: another one is an error."""
    if requested is None or system_prompt(session.client, requested) == session.system_prompt:
        return
    raise InvalidArgumentError(
        f"session {name!r} was opened with another system prompt; add --new to open one with "
        "this --system-prompt (the agent takes instructions only when a session opens)"
    )


def _prompt_taken(runtime: Runtime, client: Client, agent: str, requested: str | None) -> None:
    """Say once when a --system-prompt cannot be sent: the agent takes none."""
    if requested and not system_prompt(client, requested):
        if runtime.first_time(f"no system prompt {agent}"):
            publish.show(
                views.message(
                    "Agent ",
                    Code(agent),
                    " takes no system prompt (no sessionCapabilities.systemPrompt): "
                    "--system-prompt is not sent.",
                    mask=runtime.redactor.text,
                )
            )


async def open_named(host: Host, spec: AgentSpec, name: str) -> Session:
    """The named session of the kernel, opened if need be (with the agent's MCP servers and the
    kernel's tools), for the `%agent` commands that need one (`%agent chat`)."""

    async def servers(client: Client) -> list[dict[str, Any]]:
        return await mcp_servers.session_servers(host, spec, client)

    return await open_session(host.runtime, spec, name, False, host.client_options(), None, servers)


async def settings_applied(host: Host, session: Session, opts: CellOptions) -> None:
    try:
        await apply_settings(session, opts)
    except RequestTimeoutError:
        raise
    except (ValueError, AcpError) as exc:  # unknown mode, no modes, the agent refused it
        raise UsageError(agent_text(host, f"cannot apply --mode/--config: {exc}")) from None


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
    return f"Could not start agent {who(spec)}: {what}.\nWhat to try: {advice}."


#: Characters of terminal logins' command lines a failed cell's advice shows, whole; past it a
#: method's line says where its command is shown (`%agent auth`), not a part of it.
_ADVICE_COMMANDS = 12_000


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


def who(spec: AgentSpec) -> str:
    # A raw --agent command line is its own name: say it once.
    if spec.name == spec.command_line:
        return repr(spec.name)
    return f"{spec.name!r} ({spec.command_line})"


def agent_text(host: Host, message: str) -> str:
    # The agent's error and stderr, shown as text: masked, without escape sequences of its own.
    return views.lines(host.runtime.redactor.text(message), 20_000)


def is_interrupt(exc: BaseException) -> bool:
    return isinstance(exc, KeyboardInterrupt | asyncio.CancelledError)
