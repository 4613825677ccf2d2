"""The agent writes the notebook (issue 22): `insert_cell`, and `notebook_cells` read live.

Both go through the notebook's own front-end, over the JupyterLab extension's comm
(`notebook_link`): the kernel asks, the extension applies the operation to the notebook of the
turn's `%%agent` cell, and only to it.

`insert_cell` is a permission request like `run_code`'s: the client's own card (kind `edit`,
the proposed cell in full), the same policy and buttons (`Session.client_call`,
`Session.ask_for`); headless without `--allow edit`, rejected. With `run=True` the inserted cell
is run as the person would run it, after a second request, of kind `execute`. The kernel runs
one cell at a time: while the turn's `%%agent` cell waits for the agent, the run is queued in
the front-end and happens right after that cell ends (the answer says so); when no cell runs
(a `--background` turn, the chat), the tool waits for the run and answers with its outputs.

Sources are bounded as `run_code`'s code is: what its card shows whole, without characters
that show otherwise than they are (`kernel_server_mcp._unshowable`).
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..protocol.limits import clip_text
from .kernel_context import file_cell
from .kernel_tools import MAX_TEXT, ToolOutput
from .notebook_link import REPLY_TIMEOUT, FrontEndError, Link, link_for, origin_of
from .snapshots import MAX_CELLS, CellSnapshot, cells_text
from .tool_card import (
    GATE_TIMEOUT,
    OPTIONS,
    arg,
    code_span,
    fenced,
    text_part,
    time_left,
    title,
    unshowable,
)

if TYPE_CHECKING:
    from ..client.session import Session
    from ..client.turn import TurnHandle
    from .kernel_tools_run import CellGate


class CellHost(Protocol):
    """What these tools need of the kernel's server (`kernel_server_mcp.ToolHost`)."""

    gate: CellGate

    def session_of(self, grant: Any) -> Session | None: ...


CELL_TYPES = ("code", "markdown")
#: The tools this module answers (`kernel_server_mcp._call` hands them here).
NAMES = frozenset({"insert_cell", "notebook_cells"})

#: The last cell each turn inserted: the next insert goes below it, so several keep their order.
_LAST_INSERTED: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()


async def call(kernel: CellHost, grant: Any, name: str, args: dict[str, Any]) -> ToolOutput | None:
    """Answer the tool `name`, or None to leave it to the reader of today (`notebook_cells`
    with no live notebook to read)."""
    session = kernel.session_of(grant)
    turn = session.running if session is not None else None
    link = link_for(origin_of(turn))
    if name == "notebook_cells":
        count = max(1, min(arg(args, "count", int, 10), MAX_CELLS))
        return None if link is None else await live_cells(link, turn, count)
    source = arg(args, "source", str)
    cell_type = arg(args, "cell_type", str, "code")
    after = args.get("after")
    if after is not None and (
        isinstance(after, bool) or not isinstance(after, int | str) or len(str(after)) > 200
    ):
        raise TypeError("after must be a cell id or a 1-based index, as notebook_cells lists")
    run = arg(args, "run", bool, False)
    if cell_type not in CELL_TYPES:
        raise ValueError(f"cell_type must be one of {', '.join(CELL_TYPES)}")
    if run and cell_type != "code":
        raise ValueError("only a code cell runs: run=True needs cell_type='code'")
    if session is None:
        return ToolOutput("the session is not open: no cell can be inserted", error=True)
    return await insert_cell(session, turn, link, kernel.gate, source, cell_type, after, run)


async def live_cells(link: Link, turn: TurnHandle | None, count: int) -> ToolOutput:
    """The notebook's cells as its front-end has them now (unsaved edits included): the
    `count` cells ending at the last one this turn inserted, else at the turn's cell."""
    origin = origin_of(turn)
    end = _LAST_INSERTED.get(turn) if turn is not None else None
    end = end or (origin.cell_id if origin is not None else None)
    try:
        reply = await link.request("cells", REPLY_TIMEOUT, count=count, end=end)
    except FrontEndError as exc:
        return ToolOutput(f"the notebook's cells could not be read: {exc}", error=True)
    cells = reply.get("cells")
    snapshots = (
        [_snapshot(c) for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []
    )
    total = reply.get("total")
    head = (
        f"The live notebook ({total} cells; unsaved edits included)"
        if isinstance(total, int)
        else "The live notebook"
    )
    text = cells_text(snapshots) or "(no cells)"
    # Masked field by field (snapshots.safe), then as a whole with every answer.
    return ToolOutput(_clip(f"{head}:\n{text}"))


def _snapshot(cell: dict[str, Any]) -> CellSnapshot:
    """A cell the front-end sent (nbformat's shape, with its id and index), as the agent is
    shown cells: masked and bounded."""
    index = cell.get("index")
    cell_id = cell.get("id")
    snapshot = file_cell(cell, index if isinstance(index, int) else 0)
    return dataclasses.replace(
        snapshot, cell_id=cell_id[:100] if isinstance(cell_id, str) else None
    )


async def insert_cell(
    session: Session,
    turn: TurnHandle | None,
    link: Link | None,
    gate: CellGate,
    source: str,
    cell_type: str,
    after: int | str | None,
    run: bool,
) -> ToolOutput:
    """Ask (card + permission), insert through the front-end, run if asked (and allowed)."""
    refused = unshowable(source)
    if refused is not None:
        return ToolOutput(refused.replace("the code", "the cell"), error=True)
    origin = origin_of(turn)
    below = after if after is not None else (_LAST_INSERTED.get(turn) if turn is not None else None)
    below = below if below is not None else (origin.cell_id if origin is not None else None)
    where = "below the agent's cell" if after is None else f"below cell {code_span(str(after))}"
    block = fenced(source, "python" if cell_type == "code" else "markdown")
    call = session.client_call("edit", title(f"Insert a {cell_type} cell {where}", source), [block])
    if call is None:
        return ToolOutput(
            "the turn is past its size limits: the cell could not be shown, so it was not inserted",
            error=True,
        )
    answer = await session.ask_for(call, OPTIONS)
    if not _allowed(answer):
        session.client_update(call, "failed", [block, text_part("Not inserted: not allowed.")])
        return ToolOutput(
            "not inserted: the user (or the permission policy) did not allow it; "
            "the notebook is unchanged"
        )
    if link is None or below is None:
        why = (
            "this notebook's front-end cannot take cells (JupyterLab or Notebook 7 with "
            "acp_notebook's extension can)"
            if link is None
            else "the front-end did not say which cell the agent's is: name one with `after`"
        )
        session.client_update(call, "failed", [block, text_part(f"Not inserted: {why}.")])
        return ToolOutput(f"not inserted: {why}", error=True)
    try:
        reply = await link.request(
            "insert", REPLY_TIMEOUT, source=source, cell_type=cell_type, after=below
        )
    except FrontEndError as exc:
        session.client_update(call, "failed", [block, text_part(f"Not inserted: {exc}.")])
        return ToolOutput(f"not inserted: {exc}", error=True)
    cell_id = str(reply.get("id", ""))[:100]
    index = reply.get("index")
    if turn is not None and cell_id:
        _LAST_INSERTED[turn] = cell_id
    named = f"cell {index} (id {cell_id})"
    session.client_update(call, "completed", [block, text_part(f"Inserted as {named}.")])
    if not run:
        return ToolOutput(f"inserted as {named}")
    return await _run(session, turn, link, gate, cell_id, named, source, block)


async def _run(
    session: Session,
    turn: TurnHandle | None,
    link: Link,
    gate: CellGate,
    cell_id: str,
    named: str,
    source: str,
    block: dict[str, Any],
) -> ToolOutput:
    call = session.client_call("execute", title(f"Run the inserted {named}", source), [block])
    if call is None:
        return ToolOutput(f"inserted as {named}, not run: the turn is past its size limits")
    answer = await session.ask_for(call, OPTIONS)
    if not _allowed(answer):
        session.client_update(call, "failed", [block, text_part("Not run: not allowed.")])
        return ToolOutput(
            f"inserted as {named}, not run: the user (or the permission policy) did not allow it"
        )
    if gate.cell_running:
        # The kernel runs one cell at a time, and the turn's own cell waits for this answer.
        try:
            await link.request("run", REPLY_TIMEOUT, cell=cell_id, wait=False)
        except FrontEndError as exc:
            session.client_update(call, "failed", [block, text_part(f"Not run: {exc}.")])
            return ToolOutput(f"inserted as {named}, not run: {exc}", error=True)
        queued = "Queued: it runs as soon as the cell running now (the agent's) ends."
        session.client_update(call, "completed", [block, text_part(queued)])
        return ToolOutput(
            f"inserted as {named} and queued to run: the kernel runs one cell at a time, and "
            "runs it once the cell running now (your turn's own %%agent cell) ends, so its "
            "output is not available in this turn"
        )
    session.client_update(call, "in_progress", [block])
    left = time_left(turn)
    try:
        with anyio.fail_after(GATE_TIMEOUT if left is None else max(left, 0)):
            reply = await link.request("run", None, cell=cell_id, wait=True)
    except (FrontEndError, TimeoutError) as exc:
        why = str(exc) or "the turn's time ran out"
        session.client_update(call, "failed", [block, text_part(f"Not run: {why}.")])
        return ToolOutput(f"inserted as {named}; the run failed: {why}", error=True)
    ran = reply.get("cell")
    text = _snapshot(ran).to_text() if isinstance(ran, dict) else "(no outputs were sent)"
    session.client_update(call, "completed", [block, fenced(text, "text")])
    return ToolOutput(_clip(f"inserted as {named} and run:\n{text}"))


def _clip(text: str) -> str:
    return clip_text(text, MAX_TEXT)


def _allowed(answer: Any) -> bool:
    outcome = answer.get("outcome", {}) if isinstance(answer, dict) else {}
    return isinstance(outcome, dict) and outcome.get("optionId") == "allow"
