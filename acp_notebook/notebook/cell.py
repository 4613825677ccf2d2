"""One `%%agent` cell: options to prompt, the session started (`start.py`), the turn sent and
streamed in its live view, and its end, loud or not; the cell's value is the turn's result.

A failed turn raises `TurnFailed` so nbclient, papermill and Run All stop on it; a Stop pressed by
the user does not raise. The kernel's interrupt cancels the turn (the agent gets session/cancel),
then raises `TurnInterrupted`, one line, so the run stops.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import anyio
from IPython.core.error import UsageError

from ..client.serving.permissions import PermissionPolicy
from ..config import AgentSpec
from ..display import publish
from ..display.live import LiveView
from ..errors import ConfigError, PromptError, SchemaError, TurnFailed, TurnInterrupted
from ..kernel_tools.notebook_link import note_origin
from ..protocol.turn import TurnResult
from . import mcp_servers, replay
from .host import Host, Starting
from .options import CellOptions
from .start import agent_text, is_interrupt, start, start_shown, who

if TYPE_CHECKING:
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
        session = await start(host, spec, opts, client_options, timeout)
    else:
        shown = await start_shown(host, spec, opts, client_options, timeout, starting)
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
    cell = CellTurn(host, opts, spec, session, turn, view, left, timeout, line, stderr_mark)
    if opts.background:
        _bind(host, opts, turn)  # for good: `NAME.result` holds the result once the turn ends
        _spawn(cell.finish_later())
        return turn
    return await cell.finish()


@dataclass
class CellTurn:
    """A cell's turn once sent: what ending it needs, in one place (for `finish`, awaited by the
    cell, or `finish_later`, which --background leaves running)."""

    host: Host
    opts: CellOptions
    spec: AgentSpec
    session: Session
    turn: TurnHandle
    view: LiveView
    left: float | None  # seconds left of the cell's --timeout when the turn was sent
    timeout: float | None  # the cell's --timeout, as the message about it says
    line: str  # the options as written: the record keeps them (`cell_options`)
    stderr_mark: int  # the agent's stderr before the turn: a failure shows what came after

    async def finish(self) -> TurnResult:
        """Wait for the turn, show its end, bind --out; `TurnFailed` if it failed, not for a
        Stop the user pressed."""
        try:
            result, timed_out = await wait_turn(
                self.turn, self.left, self.host.cancel_grace, self.timeout
            )
        except BaseException as exc:
            if is_interrupt(exc):
                await interrupted(self.turn, self.view, self.host.cancel_grace)
            raise
        result = dataclasses.replace(
            result, cell_options=self.line
        )  # the record says what was asked
        _bind(self.host, self.opts, result)
        # A Stop pressed by the user is not a failure, even if the agent had to be killed for it.
        # Only a cancel somebody asked for counts: a turn ended by a client failure is a failure.
        # A turn its budget stopped is a failure: the client cancelled it, not the user.
        failed = not result.success and not (
            result.cancelled
            and self.turn.cancel_requested
            and not timed_out
            and not result.over_budget
        )
        # A failure is stated once: by the error raised below the record (`raised`).
        self.view.finish(result, keep_record=failed, raised=failed)
        await self.view.aclose()
        if failed:
            # What the agent wrote in this turn (its start-up banner says nothing of the failure).
            message = failure_message(
                result, self.spec, self.session.client.stderr_since(self.stderr_mark)
            )
            raise TurnFailed(agent_text(self.host, message), result)
        return result

    async def finish_later(self) -> None:
        """--background: the turn's end shown and its record kept, whenever it comes."""
        result, _ = await wait_turn(self.turn, self.left, self.host.cancel_grace, self.timeout)
        self.view.finish(dataclasses.replace(result, cell_options=self.line), keep_record=True)
        await self.view.aclose()


def _kernel_tools_terms(host: Host, opts: CellOptions, turn: TurnHandle, deadline: float) -> None:
    """What the kernel tools hold this turn to: the cell's deadline stops the agent's code run
    for it too; `--no-kernel-tools` in a session that has them makes them refuse its calls."""
    note_origin(turn, host.is_interactive())  # where its cell tools act (notebook_edit)
    if deadline != math.inf:
        turn.bound(deadline)
    if opts.no_kernel_tools:
        from ..kernel_tools.server import refuse_turn

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
    return host.widgets.starting()  # on_stop is set by start_shown


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
            max_rate=host.view_update_rate,
            redactor=host.runtime.redactor,
            permission_timeout=host.permission_timeout,
            start=starting,
            next_cell=next_cell_line(opts),
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


def next_cell_line(opts: CellOptions) -> str:
    """The first line of a cell that goes on from this one (a prompt suggestion is put in one):
    the same agent and session, none of this cell's other options."""
    words = ["%%agent"]
    if opts.agent is not None:
        words += ["--agent", shlex.quote(opts.agent)]
    if opts.session is not None:
        words += ["--session", shlex.quote(opts.session)]
    return " ".join(words)


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


def policy_for(opts: CellOptions, base: PermissionPolicy) -> PermissionPolicy:
    if not opts.allow and not opts.deny:
        return base
    return PermissionPolicy(
        allow=set(base.allow) | set(opts.allow),
        deny=set(base.deny) | set(opts.deny),
        default=base.default,
    )


def failure_message(result: TurnResult, spec: AgentSpec, stderr_tail: str) -> str:
    """One paragraph: what failed, where, the agent's last words, and what to try."""
    what = result.error or f"the agent stopped with {result.stop_reason!r}"
    parts = [f"The turn with agent {who(spec)} failed: {what}."]
    if stderr_tail and stderr_tail not in what:
        parts.append(f"Last stderr lines of the agent:\n{_last_lines(stderr_tail)}")
    parts.append("What to try: " + _advice(result))
    return "\n".join(parts)


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


def _prompt(host: Host, opts: CellOptions, body: str) -> str | list[Any]:
    """The cell's body, with the context its options ask for: `--with` variables, `--error`,
    `--cells`, `--file` attachments."""
    from ..kernel_tools import context

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
