"""The `%%agent` flow, from parsed options to the cell's value."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..config import AgentSpec, ConfigError
from ..errors import AcpError, PromptError
from ..protocol.result import TurnResult
from . import publish
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
    session = await _session(magics, spec, opts, client_options)
    try:
        await apply_settings(session, opts)
    except (ValueError, AcpError) as exc:  # unknown mode, no modes, the agent refused it
        raise UsageError(f"cannot apply --mode/--config: {exc}") from None
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
    if note:
        publish.show(publish.text(f"*{note}*"))
    view.start()
    timeout = opts.timeout if opts.timeout is not None else (magics.timeout or None)

    if opts.background:
        async def finish_later() -> None:
            result, _ = await wait_turn(turn, timeout, magics.cancel_grace)
            view.finish(result, keep_record=True)
            await view.aclose()
            _bind(magics, opts, result)

        _spawn(finish_later())
        return turn

    try:
        result, timed_out = await wait_turn(turn, timeout, magics.cancel_grace)
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
        raise TurnFailed(magics.runtime.redactor.text(message), result)
    return result


async def _session(magics: AcpNotebook, spec: AgentSpec, opts: CellOptions,
                   client_options: dict[str, Any]) -> Any:
    name = opts.session or spec.name
    try:
        return await open_session(magics.runtime, spec, name, opts.new, client_options)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except AcpError as exc:
        raise TurnFailed(start_error_message(exc, spec)) from None


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
