"""The `%%agent` flow, from parsed options to the cell's value."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import anyio
from IPython.core.error import UsageError

from ..config import AgentSpec
from ..display import publish, views
from ..display.live import LiveView
from ..errors import (
    AcpError,
    ConfigError,
    PromptError,
    RequestTimeoutError,
    SchemaError,
    TurnFailed,
    TurnInterrupted,
)
from ..protocol.turn import TurnResult
from . import mcp_servers, replay
from .cell import (
    apply_settings,
    failure_message,
    interrupted,
    is_interrupt,
    open_session,
    policy_for,
    start_error_message,
    wait_turn,
)
from .host import Host, Starting
from .notebook_link import note_origin
from .options import CellOptions
from .stored_sessions import Memory

if TYPE_CHECKING:
    from ..client.client import Client
    from ..client.session import Session
    from ..client.turn import TurnHandle


async def run(host: Host, opts: CellOptions, body: str, line: str = "") -> Any:
    """One `%%agent` cell: its value is the `TurnResult` (the `TurnHandle` with --background);
    a failed turn raises `TurnFailed`, a bad option a usage error. The record keeps `line`, the
    options as written (`cell_options`): a replay compares with it, not with an edited source."""
    opts.check()
    if (replayed := replay.serve(host, opts, body)) is not replay.RUN:
        return replayed  # ACP_NOTEBOOK_REPLAY: the recorded turn, no agent
    limit = host.runtime.ledger.turn_limit(opts.max_cost, host.max_cost_total)
    spec, note = _resolve(host, opts)
    client_options = host.client_options()
    try:
        policy = policy_for(opts, client_options["permission_policy"])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    prompt = _prompt(host, opts, body)
    servers = mcp_servers.planned(host, spec, opts.mcp)  # a bad --mcp fails before the agent
    # One budget for the whole cell: starting the agent and the session count, not only the turn.
    timeout = opts.timeout if opts.timeout is not None else (host.timeout or None)
    deadline = anyio.current_time() + timeout if timeout is not None else math.inf
    # Once per kernel, with --quiet too: a successful turn's live display is cleared (the cell's
    # value shows the record, and the renderers do not draw the transcript's "note"), so this
    # line is where a saved notebook tells that the demo agent answered; every cell is too many.
    if note and host.runtime.first_time(note):  # our own words, no agent text: safe as Markdown
        publish.show({"text/markdown": f"*{note}*", "text/plain": note})
    starting = _starting_view(host, opts)
    if starting is None:
        session = await _start(host, spec, opts, client_options, timeout)
    else:
        shown = await _start_shown(host, spec, opts, client_options, timeout, starting)
        if shown is None:
            return None  # stopped before the agent or its session was ready
        session = shown
    mcp_servers.check_reused(session, opts.session or spec.name, servers)
    stderr_mark = session.client.stderr_mark
    try:
        turn = await session.prompt(
            prompt,
            permission_policy=policy,
            output_type=_schema(host, opts.schema),
            max_cost=limit,
        )
    except BaseException as exc:
        if starting is not None:  # no turn: the view must not say "starting agent" for ever
            starting.end({"text/plain": ""})
        if isinstance(exc, PromptError | SchemaError):
            schema = "--schema: " if isinstance(exc, SchemaError) else ""
            raise UsageError(f"{schema}{exc}") from None
        raise
    _kernel_tools_terms(host, opts, turn, deadline)
    host.runtime.ledger.watch(turn, session, spec.name, host.execution_count)
    view = _live_view(host, spec, session, turn, opts, starting)
    view.start()
    left = None if timeout is None else max(deadline - anyio.current_time(), 0.001)
    if opts.background:
        _bind(host, opts, turn)  # for good: `NAME.result` holds the result once the turn ends
        _spawn(_finish_later(host, opts, turn, view, left, timeout, line))
        return turn
    return await _finish(host, opts, spec, session, turn, view, left, timeout, line, stderr_mark)


def _kernel_tools_terms(host: Host, opts: CellOptions, turn: TurnHandle, deadline: float) -> None:
    """What the kernel tools hold this turn to: the cell's deadline stops the agent's code run
    for it too; `--no-kernel-tools` in a session that has them makes them refuse its calls."""
    note_origin(turn, host.is_interactive())  # where its cell tools act (notebook_edit)
    if deadline != math.inf:
        turn.bound(deadline)
    if opts.no_kernel_tools:
        from .kernel_server import refuse_turn

        refuse_turn(host.runtime, turn)


def _resolve(host: Host, opts: CellOptions) -> tuple[AgentSpec, str]:
    registry = host.registry()
    try:
        return registry.resolve(opts.agent)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _starting_view(host: Host, opts: CellOptions) -> Starting | None:
    """In a widget front-end, the turn's view shown before the agent starts (else None)."""
    if not host.is_interactive() or opts.quiet:
        return None
    return host.widgets.starting()  # on_stop is set by _start_shown


async def _start_shown(
    host: Host,
    spec: AgentSpec,
    opts: CellOptions,
    client_options: dict[str, Any],
    timeout: float | None,
    view: Starting,
) -> Session | None:
    """`_start` under a view saying "starting agent…" whose Stop cancels the start: the agent,
    if this cell started it, is stopped, and the cell ends quietly (None). A failure or the
    kernel's interrupt replaces the view too."""
    agent = host.runtime.hosts.get(spec.name)
    was_running = agent is not None and agent.running
    with anyio.CancelScope() as scope:
        view.on_stop = scope.cancel
        try:
            session = await _start(host, spec, opts, client_options, timeout)
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


def _live_view(
    host: Host,
    spec: AgentSpec,
    session: Session,
    turn: TurnHandle,
    opts: CellOptions,
    starting: Starting | None = None,
) -> LiveView:
    if host.is_interactive() and not opts.quiet:
        # A widget front-end: one live view per turn, patched in place (widgets/turn_view.py).
        return host.widgets.turn_view(
            session,
            turn,
            on_stop=lambda: _spawn(turn.cancel()),
            max_rate=host.max_update_rate,
            redactor=host.runtime.redactor,
            permission_timeout=host.permission_timeout,
            start=starting,
        )
    # The note is its own line above (see run), not repeated in the live footer.
    return LiveView(
        session,
        turn,
        max_rate=host.max_update_rate,
        show=not opts.quiet,
        redactor=host.runtime.redactor,
        permission_timeout=host.permission_timeout,
    )


async def _finish_later(
    host: Host,
    opts: CellOptions,
    turn: TurnHandle,
    view: LiveView,
    left: float | None,
    timeout: float | None,
    line: str,
) -> None:
    result, _ = await wait_turn(turn, left, host.cancel_grace, timeout)
    view.finish(dataclasses.replace(result, cell_options=line), keep_record=True)
    await view.aclose()


async def _finish(
    host: Host,
    opts: CellOptions,
    spec: AgentSpec,
    session: Session,
    turn: TurnHandle,
    view: LiveView,
    left: float | None,
    timeout: float | None,
    line: str,
    stderr_mark: int,
) -> TurnResult:
    try:
        result, timed_out = await wait_turn(turn, left, host.cancel_grace, timeout)
    except BaseException as exc:
        if is_interrupt(exc):
            await interrupted(turn, view, host.cancel_grace)
        raise
    result = dataclasses.replace(result, cell_options=line)  # the record says what was asked
    _bind(host, opts, result)
    # A Stop pressed by the user is not a failure, even if the agent had to be killed for it.
    # Only a cancel somebody asked for counts: a turn ended by a client failure is a failure.
    # A turn its budget stopped is a failure: the client cancelled it, not the user.
    failed = not result.success and not (
        result.cancelled and turn.cancel_requested and not timed_out and not result.over_budget
    )
    view.finish(result, keep_record=failed)
    await view.aclose()
    if failed:
        # What the agent wrote during this turn: its start-up banner says nothing of the failure.
        message = failure_message(result, spec, session.client.stderr_since(stderr_mark))
        raise TurnFailed(_agent_text(host, message), result)
    return result


async def _start(
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
            session = await _session(host, spec, opts, client_options)
            doing = "apply --mode/--config (session/set_mode, session/set_config_option)"
            await _settings(host, session, opts)
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
        raise TurnFailed(_agent_text(host, start_error_message(what, spec))) from None


async def _session(
    host: Host, spec: AgentSpec, opts: CellOptions, client_options: dict[str, Any]
) -> Session:
    name = opts.session or spec.name
    try:
        memory = Memory.of(host.remember_sessions, host.user_ns)

        async def servers(client: Client) -> list[dict[str, Any]]:
            return await mcp_servers.session_servers(host, spec, client, opts)

        return await open_session(
            host.runtime, spec, name, opts.new, client_options, memory, servers
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except RequestTimeoutError:
        raise  # _start stops the agent
    except AcpError as exc:
        raise TurnFailed(_agent_text(host, start_error_message(exc, spec))) from None


async def open_named(host: Host, spec: AgentSpec, name: str) -> Session:
    """The named session of the kernel, opened if need be (with the agent's MCP servers and the
    kernel's tools), for the `%agent` commands that need one (`%agent chat`)."""

    async def servers(client: Client) -> list[dict[str, Any]]:
        return await mcp_servers.session_servers(host, spec, client)

    return await open_session(host.runtime, spec, name, False, host.client_options(), None, servers)


def _agent_text(host: Host, message: str) -> str:
    # The agent's error and stderr, shown as text: masked, without escape sequences of its own.
    return views.lines(host.runtime.redactor.text(message), 20_000)


async def _settings(host: Host, session: Session, opts: CellOptions) -> None:
    try:
        await apply_settings(session, opts)
    except RequestTimeoutError:
        raise
    except (ValueError, AcpError) as exc:  # unknown mode, no modes, the agent refused it
        raise UsageError(_agent_text(host, f"cannot apply --mode/--config: {exc}")) from None


def _prompt(host: Host, opts: CellOptions, body: str) -> str | list[Any]:
    """The cell's body, with the context its options ask for: `--with` variables, `--error`,
    `--cells`, `--file` attachments."""
    from . import context

    parts: list[dict[str, Any]] = []
    for name in opts.variables:
        if name not in host.user_ns:
            raise UsageError(f"--with {name}: no variable {name!r} in this kernel")
        parts += context.variable_parts(name, host.user_ns[name], host.shell)
    if opts.error:
        error = context.error_parts(host.shell)
        if error is None:
            raise UsageError(
                "--error: no cell of this kernel has raised an exception yet (it gives the "
                "agent the last one)"
            )
        parts += error
    if opts.cells is not None:
        parts += context.cells_parts(host.shell, opts.cells)
    if not parts and not opts.files:
        return body
    return [
        *parts,
        {"type": "text", "text": body},
        *({"type": "file", "url": f} for f in opts.files),
    ]


def _schema(host: Host, name: str | None) -> Any:
    if name is not None and name not in host.user_ns:
        raise UsageError(f"--schema {name}: no pydantic model or JSON-schema dict {name!r} here")
    return host.user_ns[name] if name is not None else None


def _bind(host: Host, opts: CellOptions, value: TurnResult | TurnHandle) -> None:
    if opts.out:
        host.user_ns[opts.out] = value


_TASKS: set[Any] = set()


def _spawn(coro: Any) -> None:
    import asyncio

    task = asyncio.get_running_loop().create_task(coro)
    _TASKS.add(task)  # the loop keeps only weak references to tasks
    task.add_done_callback(_TASKS.discard)
