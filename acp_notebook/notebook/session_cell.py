"""The `%%agent` flow, from parsed options to the cell's value."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

import anyio
from IPython.core.error import UsageError

from ..config import AgentSpec
from ..errors import AcpError, ConfigError, PromptError, RequestTimeoutError
from ..protocol.result import TurnResult
from . import publish, views
from .cell import (
    CellOptions,
    TurnFailed,
    apply_settings,
    failure_message,
    interrupted,
    is_interrupt,
    open_session,
    policy_for,
    start_error_message,
    wait_turn,
)
from .live import LiveView

if TYPE_CHECKING:
    from ..client.session import Session
    from ..magics import AcpNotebook


def options_from(args: argparse.Namespace) -> CellOptions:
    return CellOptions(
        agent=args.agent, session=args.session, new=args.new, mode=args.mode,
        config=list(args.config), out=args.out, background=args.background,
        timeout=args.timeout, allow=[k for ks in args.allow for k in ks],
        deny=[k for ks in args.deny for k in ks], quiet=args.quiet, files=list(args.file),
        variables=list(args.variables))


async def run(magics: AcpNotebook, args: argparse.Namespace, body: str) -> Any:
    opts = options_from(args)
    if opts.out is not None and not opts.out.isidentifier():
        raise UsageError(f"--out needs a Python name, not {opts.out!r}")
    if opts.timeout is not None and opts.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    registry = magics.registry()
    try:
        spec, note = registry.resolve(opts.agent)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    client_options = magics.client_options()
    try:
        policy = policy_for(opts, client_options["permission_policy"])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    prompt: str | list[Any] = body
    if opts.files or opts.variables:
        prompt = [*_variables(magics, opts.variables), {"type": "text", "text": body},
                  *({"type": "file", "url": f} for f in opts.files)]
    # One budget for the whole cell: starting the agent and the session count, not only the turn.
    timeout = opts.timeout if opts.timeout is not None else (magics.timeout or None)
    deadline = anyio.current_time() + timeout if timeout is not None else math.inf
    session = await _start(magics, spec, opts, client_options, timeout)
    try:
        turn = await session.prompt(prompt, permission_policy=policy)
    except PromptError as exc:
        raise UsageError(str(exc)) from None

    interactive = magics.is_interactive()
    controls = None
    if interactive and not opts.quiet:
        from ..widgets.controls import TurnControls

        label = f"{spec.name} · session {session.id[:12]} · running…"
        controls = TurnControls(lambda: _spawn(turn.cancel()), label, magics.runtime.redactor)
    # The note is its own line above (see below), not repeated in the live footer.
    view = LiveView(session, turn, max_rate=magics.max_update_rate, controls=controls,
                    show=not opts.quiet, redactor=magics.runtime.redactor,
                    permission_timeout=magics.permission_timeout)
    # Shown for every turn, not only with --quiet: a successful turn's live display is cleared
    # (the cell's value shows the record, and the renderers do not draw the transcript's "note"),
    # so this line is the only place a saved notebook tells that the demo agent answered.
    if note:  # our own words, no agent text: safe as Markdown
        publish.show({"text/markdown": f"*{note}*", "text/plain": note})
    view.start()
    left = None if timeout is None else max(deadline - anyio.current_time(), 0.001)

    if opts.background:
        async def finish_later() -> None:
            result, _ = await wait_turn(turn, left, magics.cancel_grace, timeout)
            view.finish(result, keep_record=True)
            await view.aclose()
            _bind(magics, opts, result)

        _spawn(finish_later())
        return turn

    try:
        result, timed_out = await wait_turn(turn, left, magics.cancel_grace, timeout)
    except BaseException as exc:
        if is_interrupt(exc):
            await interrupted(turn, view, magics.cancel_grace)
        raise
    _bind(magics, opts, result)
    # A Stop pressed by the user is not a failure, even if the agent had to be killed for it.
    # Only a cancel somebody asked for counts: a turn ended by a client failure is a failure.
    failed = not result.success and not (result.cancelled and turn.cancel_requested
                                         and not timed_out)
    view.finish(result, keep_record=failed)
    await view.aclose()
    if failed:
        client = session.client
        message = failure_message(result, spec, client.stderr_tail)
        raise TurnFailed(_agent_text(magics, message), result)
    return result


async def _start(magics: AcpNotebook, spec: AgentSpec, opts: CellOptions,
                 client_options: dict[str, Any], timeout: float | None) -> Session:
    """The cell's session with its --mode/--config applied, within the cell's --timeout.

    An agent that does not answer in time (the --timeout, or a request's own deadline) is
    stopped, unless another named session uses it, so the next cell starts a fresh one.
    """
    name = opts.session or spec.name
    doing = ""
    try:
        with anyio.fail_after(timeout):
            session = await _session(magics, spec, opts, client_options)
            doing = "apply --mode/--config (session/set_mode, session/set_config_option)"
            await _settings(magics, session, opts)
            return session
    except TimeoutError as exc:
        host = magics.runtime.hosts.get(spec.name)
        doing = doing or ("open a session (session/new)" if host is not None and host.running
                          else "start (initialize)")
        stop = not magics.runtime.other_sessions(spec.name, name)
        if stop:
            with anyio.CancelScope(shield=True):
                await magics.runtime.close_agent(spec.name)
        limit = f"within --timeout {timeout:g} s" if timeout is not None else "in time"
        what = str(exc) if isinstance(exc, AcpError) else f"the agent did not {doing} {limit}"
        what += "; it was stopped" if stop and "stopped" not in what else ""
        raise TurnFailed(_agent_text(magics, start_error_message(what, spec))) from None


async def _session(magics: AcpNotebook, spec: AgentSpec, opts: CellOptions,
                   client_options: dict[str, Any]) -> Session:
    name = opts.session or spec.name
    try:
        return await open_session(magics.runtime, spec, name, opts.new, client_options)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except RequestTimeoutError:
        raise  # _start stops the agent
    except AcpError as exc:
        raise TurnFailed(_agent_text(magics, start_error_message(exc, spec))) from None


def _agent_text(magics: AcpNotebook, message: str) -> str:
    # The agent's error and stderr, shown as text: masked, without escape sequences of its own.
    return views.lines(magics.runtime.redactor.text(message), 20_000)


async def _settings(magics: AcpNotebook, session: Session, opts: CellOptions) -> None:
    try:
        await apply_settings(session, opts)
    except RequestTimeoutError:
        raise
    except (ValueError, AcpError) as exc:  # unknown mode, no modes, the agent refused it
        raise UsageError(_agent_text(magics, f"cannot apply --mode/--config: {exc}")) from None


def _variables(magics: AcpNotebook, names: list[str]) -> list[dict[str, Any]]:
    from .context import variable_parts

    parts: list[dict[str, Any]] = []
    for name in names:
        if name not in magics.user_ns:
            raise UsageError(f"--with {name}: no variable {name!r} in this kernel")
        parts += variable_parts(name, magics.user_ns[name])
    return parts


def _bind(magics: AcpNotebook, opts: CellOptions, result: TurnResult) -> None:
    if opts.out:
        magics.user_ns[opts.out] = result


_TASKS: set[Any] = set()


def _spawn(coro: Any) -> None:
    import asyncio

    task = asyncio.get_running_loop().create_task(coro)
    _TASKS.add(task)  # the loop keeps only weak references to tasks
    task.add_done_callback(_TASKS.discard)
