"""Replay: `%%agent` cells served from a recorded notebook's transcripts, without an agent.

With `ACP_NOTEBOOK_REPLAY=PATH` in the kernel's environment (or `c.AcpNotebook.replay`), every
`%%agent` cell is matched to a cell of the notebook at PATH (`recording`) and answered from the
turn recorded there: no agent process, no key, no network. The cell's value is the recorded
`TurnResult`, folded again within the live limits (`protocol/refold.py`: the recording is hostile
input, and is drawn as a live turn would be), bound to `--out` as a run would; a turn that
failed fails again with the recorded `TurnFailed` paragraph; a line above the record says it was
replayed.

Matching: by the cell id the front-end sends with the execute request (JupyterLab does; nbclient
0.11 does not), else by order: the n-th `%%agent` cell the kernel runs is the recording's n-th.
The cell must ask what the recorded one asked, as the turn's record says it was asked (its
prompt and `cellOptions`, not the recorded cell's source, which may have been edited since): the
same prompt (trailing whitespace aside) and the same options, except those that do not change
what the agent is asked (`--out`, `--quiet`, `--timeout`, `--background`). A cell that
changed, or has no usable recording, fails with `ReplayError` naming it, unless the mode is
`fill` (`ACP_NOTEBOOK_REPLAY_MODE=fill`): then the agent runs for that cell, as without replay.

Sessions: a replayed turn opens no session, so `--session`/`--new` are only compared. In `fill`
mode an agent that runs starts a fresh session: it has not seen the replayed turns before it.
`--background`: the record is displayed at once and the value is a `ReplayedTurn`, a handle whose
turn has already finished (`await h.finished` gives the recorded result).
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Generator
from typing import Any

from IPython.core.error import UsageError

from ..display import publish, views
from ..display.views import Code
from ..errors import ReplayError, TurnFailed
from ..protocol.refold import refold
from ..protocol.structured import OutputSpec
from ..protocol.turn import TurnResult
from ..render import mdsafe
from .host import Host
from .options import CellOptions, parse_cell_line
from .recording import RecordedCell, Recording, load

ENV = "ACP_NOTEBOOK_REPLAY"
ENV_MODE = "ACP_NOTEBOOK_REPLAY_MODE"
MODES = ("strict", "fill")
#: Options that change nothing the agent is asked: a cell may differ in them and still replay.
NOT_COMPARED = frozenset({"out", "quiet", "timeout", "background"})
NOTE = "Replayed from the recorded notebook: no agent ran for this cell."


class Run(enum.Enum):
    """`serve`'s answer when the cell is to run with its agent, as without replay."""

    AGENT = "agent"


RUN = Run.AGENT


@dataclasses.dataclass
class _State:
    """The kernel's replay: the recording (read once) and how many `%%agent` cells ran."""

    recording: Recording | None = None
    count: int = 0


_STATE = _State()


def settings(host: Host) -> tuple[str, str]:
    """The recorded notebook's path ("" when replay is off) and the mode; the environment
    wins over the configuration, as the runner sets the environment."""
    path = os.environ.get(ENV) or host.replay
    mode = (os.environ.get(ENV_MODE) or host.replay_mode or "strict").strip().lower()
    if path and mode not in MODES:
        raise UsageError(f"{ENV_MODE} must be one of {', '.join(MODES)}, not {mode!r}")
    return path, mode


def status(host: Host) -> dict[str, str] | None:
    """What `%agent status` shows under replay while no agent runs (None: replay is off)."""
    path, mode = settings(host)
    if not path:
        return None
    return views.message(
        "Replaying %%agent cells from ",
        Code(path),
        f" (mode {mode}): no agent session is open in this kernel.",
    )


def serve(host: Host, opts: CellOptions, body: str) -> Any:
    """The `%%agent` cell's value from the recording, or `RUN` when its agent is to run.

    Raises `TurnFailed` for a recorded failure, `ReplayError` for a cell that cannot be replayed.
    """
    path, mode = settings(host)
    if not path:
        return RUN
    recording = _recording(path)
    ordinal = _STATE.count
    _STATE.count += 1
    cell_id = current_cell_id()
    recorded = recording.find(cell_id, ordinal)
    if recorded is None:
        why = _unmatched(recording, cell_id, ordinal)
    else:
        # The record keeps the prompt masked: so is the body it is compared with.
        why = difference(recorded, opts, host.runtime.redactor.text(body))
    if why:
        if mode == "fill":
            line = f"Not replayed ({why}): the agent runs for this cell."
            publish.show({"text/markdown": f"*{mdsafe.text(line)}*", "text/plain": line})
            return RUN
        raise ReplayError(
            f"Cannot replay {why}. Record the notebook again, or let such cells run their "
            f"agent with {ENV_MODE}=fill (acp-notebook run --replay=fill)."
        )
    assert recorded is not None and recorded.transcript is not None
    return _replayed(host, opts, recorded, recorded.transcript)


def _replayed(
    host: Host, opts: CellOptions, recorded: RecordedCell, transcript: dict[str, Any]
) -> Any:
    # Folded again within the live limits, and drawn from that: the recording is hostile input,
    # and 200,000 recorded parts drawn as read made a 72.5 MB output.
    result = refold(transcript)
    transcript = result.to_json()
    if opts.schema and result.output_json is not None:
        result = _with_output(host, opts.schema, result)
    if opts.out:
        host.user_ns[opts.out] = result
    publish.show({"text/markdown": f"*{NOTE}*", "text/plain": NOTE})
    if recorded.failure is not None:
        # As the run showed it: the record (which leaves the error to the paragraph below it,
        # `Transcript.raised`), then the paragraph the cell failed with.
        transcript["raised"] = True
        publish.show(publish.turn(transcript))
        raise TurnFailed(views.lines(recorded.failure, 20_000), result)
    if opts.background:
        publish.show(publish.turn(transcript))
        return ReplayedTurn(result)
    return result  # its display is the record, as the run's value was


def difference(recorded: RecordedCell, opts: CellOptions, body: str) -> str:
    """What stops `recorded` from answering this cell, naming the cell ("" when nothing)."""
    name = recorded.name()
    if recorded.problem:
        return f"{name}: {recorded.problem}"
    try:
        then = parse_cell_line(recorded.line)
    except UsageError:
        return f"{name}: its recorded %%agent line does not parse"
    changed = [
        f"{each.metadata['flags'][0]} (recorded {_value(getattr(then, each.name))}, "
        f"now {_value(getattr(opts, each.name))})"
        for each in dataclasses.fields(CellOptions)
        if each.name not in NOT_COMPARED and getattr(then, each.name) != getattr(opts, each.name)
    ]
    if body.rstrip() != recorded.body.rstrip():
        changed.insert(0, "the prompt" + _first_difference(recorded.body, body))
    if changed:
        return f"{name}: changed since the recording: {'; '.join(changed)}"
    return ""


def _unmatched(recording: Recording, cell_id: str | None, ordinal: int) -> str:
    if cell_id is not None and any(c.cell_id for c in recording.cells):
        return (
            f"the %%agent cell with id {views.text(cell_id, 60)!r}: the recording has no such cell"
        )
    return (
        f"%%agent cell #{ordinal + 1}: the recording has only {len(recording.cells)} %%agent cells"
    )


def _first_difference(then: str, now: str) -> str:
    old, new = then.rstrip().splitlines(), now.rstrip().splitlines()
    for number, (a, b) in enumerate(zip(old, new, strict=False), start=1):
        if a != b:
            return f" (line {number}: recorded {_value(a)}, now {_value(b)})"
    return f" (recorded {len(old)} lines, now {len(new)})"


def _value(value: Any) -> str:
    return repr(views.text(value, 80)) if isinstance(value, str) else views.text(value, 80)


def _recording(path: str) -> Recording:
    """The recorded notebook, read at the first replayed cell of the kernel."""
    full = os.path.abspath(os.path.expanduser(path))
    if _STATE.recording is None or _STATE.recording.path != full:
        _STATE.recording, _STATE.count = load(full), 0
    return _STATE.recording


def reset() -> None:
    """Forget the recording and the count (a test, or a new run in the same kernel)."""
    _STATE.recording, _STATE.count = None, 0


def current_cell_id() -> str | None:
    """The id of the cell being executed, when the front-end sent it (`cellId` in the execute
    request's metadata: JupyterLab and Notebook do, nbclient 0.11 does not)."""
    metadata = _current_request().get("metadata")
    cell_id = metadata.get("cellId") if isinstance(metadata, dict) else None
    return cell_id if isinstance(cell_id, str) and cell_id else None


def current_run_id() -> str | None:
    """The id of the execute request that runs now: one run of a cell (a cell that prompts
    twice in one run is one run; run again, another)."""
    header = _current_request().get("header")
    msg_id = header.get("msg_id") if isinstance(header, dict) else None
    return msg_id if isinstance(msg_id, str) and msg_id else None


def _current_request() -> dict[str, Any]:
    from IPython import get_ipython

    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    parent: Any = None
    if kernel is not None and hasattr(kernel, "get_parent"):
        parent = kernel.get_parent()
    if not parent and shell is not None:
        parent = getattr(shell, "parent_header", None)
    return parent if isinstance(parent, dict) else {}


class ReplayedTurn:
    """What a replayed `%%agent --background` cell gives: a turn that has already finished.

    It answers as a `TurnHandle` does: `await h.finished` (as often as asked) and `h.result`
    give the recorded `TurnResult`; `done` is true; `cancel()` has nothing to cancel.
    """

    def __init__(self, result: TurnResult) -> None:
        self.id = result.turn_id
        self.result = result
        self.done = True
        self.cancel_requested = False

    @property
    def finished(self) -> _Finished:
        return _Finished(self.result)

    async def wait(self) -> TurnResult:
        return self.result

    async def cancel(self) -> TurnResult:
        return self.result

    def __repr__(self) -> str:
        return f"<TurnHandle {views.text(self.id, 40)} replayed: already finished>"


class _Finished:
    __slots__ = ("_result",)

    def __init__(self, result: TurnResult) -> None:
        self._result = result

    def __await__(self) -> Generator[Any, None, TurnResult]:
        return self._value().__await__()

    async def _value(self) -> TurnResult:
        return self._result


def _with_output(host: Host, schema: str, result: TurnResult) -> TurnResult:
    """The recorded answer made into the `--schema`'s object again (a model instance, not its
    JSON), validated anew: a schema that changed since the recording fails the cell here."""
    try:
        spec = OutputSpec.of(host.user_ns[schema])
        return dataclasses.replace(result, output=spec.rebuild(result.output_json))
    except KeyError:
        raise ReplayError(
            f"--schema {schema}: no pydantic model or JSON-schema dict here"
        ) from None
    except ValueError as exc:
        raise ReplayError(f"the recorded answer no longer fits --schema {schema}: {exc}") from None
