"""`edit_cell` and `run_cell` under `acp-notebook run` (issue 22 item 4): headless, no front-end.

The kernel does not hold the notebook the runner executes: it asks (the client's own card and
permission, kinds `edit` and `execute`, decided by the run's `--allow`), then hands the
operation to the runner as a display message of the turn's cell (`MIME_CELL`, with the run's
token, as `notebook_edit._to_runner` hands an inserted cell). The runner applies it when the
turn's cell ends (run/execute.py): an edit replaces the source of the cell in the notebook it
saves (a cell that ran already keeps its outputs and is marked, not run again; a cell below
runs with the new source in its turn); a run executes a cell that ran already once more, right
after the agent's cell. Never an `%%agent` cell, neither edited nor run; the runner checks all
of it again by its own `--allow` (the message could be forged by code run in the kernel).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ..display import publish
from ..protocol.agent_cell import is_agent_source
from ..protocol.limits import MAX_RUNNER_CELLS
from ..render import MIME_CELL
from .card import OPTIONS, code_span, fenced, text_part, title, unshowable
from .notebook_link import runner_token
from .variables import ToolOutput

if TYPE_CHECKING:
    from ..client.session import Session
    from ..client.turn import TurnHandle

#: The edits and runs each turn handed to the runner (at most `MAX_RUNNER_CELLS`).
_OPS: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
APPLIED = "acp-notebook run applies it when your %%agent cell ends, to the notebook it saves"


async def edit(
    session: Session, turn: TurnHandle | None, cell: int | str, source: str
) -> ToolOutput:
    """Ask to replace cell `cell`'s source (the new source in full), then hand it over."""
    refused = unshowable(source) or _agent_cell(source)
    if refused is not None:
        return ToolOutput(refused.replace("the code", "the new source"), error=True)
    named = f"cell {code_span(str(cell))}"
    block = fenced(source, "python")
    return await _hand(session, turn, "edit", f"Replace the source of {named}", source, block, cell)


async def run(session: Session, turn: TurnHandle | None, cell: int | str) -> ToolOutput:
    """Ask to run cell `cell` (as the saved notebook holds it then), then hand it over."""
    named = f"cell {code_span(str(cell))}"
    what = text_part(
        f"Run {named} of the notebook `acp-notebook run` saves, with the source it holds when "
        "the agent's cell ends (not an `%%agent` cell)."
    )
    return await _hand(session, turn, "execute", f"Run {named}", f"Run {cell}", what, cell)


async def _hand(
    session: Session,
    turn: TurnHandle | None,
    kind: str,
    head: str,
    shown: str,
    block: dict[str, Any],
    cell: int | str,
) -> ToolOutput:
    op = "edit" if kind == "edit" else "run"
    if turn is not None and _OPS.get(turn, 0) >= MAX_RUNNER_CELLS:
        return ToolOutput(
            f"not done: a turn edits or runs at most {MAX_RUNNER_CELLS} cells", error=True
        )
    call = session.client_call(kind, title(head, shown), [block])
    if call is None:
        return ToolOutput("not done: the turn is past its size limits", error=True)
    answer = await session.ask_for(call, OPTIONS)
    outcome = answer.get("outcome", {}) if isinstance(answer, dict) else {}
    if not isinstance(outcome, dict) or outcome.get("optionId") != "allow":
        session.client_update(call, "failed", [block, text_part("Not done: not allowed.")])
        return ToolOutput(
            f"cell {cell}: not {'edited' if op == 'edit' else 'run'}, the user (or the "
            "permission policy) did not allow it"
        )
    if turn is not None:
        _OPS[turn] = _OPS.get(turn, 0) + 1
    sent: dict[str, Any] = {"token": runner_token(), "op": op, "cell": cell}
    if op == "edit":
        sent["source"] = shown
    publish.show({MIME_CELL: sent})  # masked as every output is
    session.client_update(call, "completed", [block, text_part(f"Handed over: {APPLIED}.")])
    if op == "edit":
        return ToolOutput(
            f"cell {cell}: edit handed over; {APPLIED}: a cell that ran already keeps its "
            "outputs and is marked as edited, not run again; a cell below yours runs with the "
            "new source in its turn; an %%agent cell is never edited"
        )
    return ToolOutput(
        f"cell {cell}: run handed over; {APPLIED}: a cell that ran already runs again right "
        "after your %%agent cell (its output is not available in this turn), a cell below "
        "yours runs in its turn anyway; an %%agent cell is never run"
    )


def _agent_cell(source: str) -> str | None:
    if is_agent_source(source):
        return "an %%agent cell is never written by an agent: not edited"
    return None
