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
Headless under `acp-notebook run`, the allowed cells go to the runner instead, which saves them
below the turn's cell and runs those allowed to run after it (`_to_runner`).

Sources are bounded as `run_code`'s code is: what its card shows whole, without characters
that show otherwise than they are (`card.unshowable`).
"""

from __future__ import annotations

import dataclasses
import secrets
import weakref
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..display import publish
from ..protocol import limits
from ..protocol.agent_cell import is_agent_source
from ..protocol.limits import clip_text
from ..render import MIME_CELL
from ..render.diff import unified
from ..render.labels import CELL_URI, cell_link
from . import notebook_undo, runner_cells
from .card import (
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
from .cells import file_cell
from .notebook_link import REPLY_TIMEOUT, FrontEndError, Link, link_for, origin_of, runner_token
from .notebook_undo import CellChange
from .snapshots import MAX_CELLS, CellSnapshot, cells_text
from .variables import MAX_TEXT, ToolOutput

if TYPE_CHECKING:
    from ..client.session import Session
    from ..client.turn import TurnHandle
    from ..protocol.state import ToolCallPart
    from .run import CellGate


class CellHost(Protocol):
    """What these tools need of the kernel's server (`tools.ToolHost`)."""

    gate: CellGate

    def session_of(self, grant: Any) -> Session | None: ...


CELL_TYPES = ("code", "markdown")
#: The tools this module answers (`tools._call` hands them here).
NAMES = frozenset({"insert_cell", "notebook_cells", "edit_cell", "run_cell"})

#: The last cell each turn inserted: the next insert goes below it, so several keep their order.
_LAST_INSERTED: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
#: The turns that proposed their cell as the next input (one a turn: see `_propose`).
_PROPOSED: weakref.WeakSet[object] = weakref.WeakSet()
#: How many cells each turn handed to `acp-notebook run` (`_to_runner`; `limits` caps it).
_TO_RUNNER: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()


async def call(kernel: CellHost, grant: Any, name: str, args: dict[str, Any]) -> ToolOutput | None:
    """Answer the tool `name`, or None to leave it to the reader of today (`notebook_cells`
    with no live notebook to read)."""
    session = kernel.session_of(grant)
    turn = session.running if session is not None else None
    link = link_for(origin_of(turn))
    if name == "notebook_cells":
        count = max(1, min(arg(args, "count", int, 10), MAX_CELLS))
        return None if link is None else await live_cells(link, turn, count)
    if session is None:
        return ToolOutput("the session is not open: the notebook is not changed", error=True)
    headless = link is None and _runner_takes(turn, kernel.gate)  # `acp-notebook run`'s
    if name == "edit_cell":
        cell, source = _cell_arg(args, "cell"), arg(args, "source", str)
        if headless:
            return await runner_cells.edit(session, turn, cell, source)
        return await edit_cell(session, turn, link, cell, source)
    if name == "run_cell":
        cell = _cell_arg(args, "cell")
        if headless:
            return await runner_cells.run(session, turn, cell)
        return await run_cell(session, turn, link, kernel.gate, cell)
    source = arg(args, "source", str)
    cell_type = arg(args, "cell_type", str, "code")
    after = None if args.get("after") is None else _cell_arg(args, "after")
    run = arg(args, "run", bool, False)
    if cell_type not in CELL_TYPES:
        raise ValueError(f"cell_type must be one of {', '.join(CELL_TYPES)}")
    if run and cell_type != "code":
        raise ValueError("only a code cell runs: run=True needs cell_type='code'")
    if run and is_agent_source(source):
        raise ValueError("an %%agent cell runs only when the user runs it: insert it without run")
    if link is None and runner_token() is not None and turn is not None and _full(turn):
        return ToolOutput(
            f"not inserted: a turn inserts at most {limits.MAX_RUNNER_CELLS} cells in the notebook "
            "acp-notebook run saves",
            error=True,
        )
    return await insert_cell(session, turn, link, kernel.gate, source, cell_type, after, run)


def _propose(
    turn: TurnHandle | None, gate: CellGate, source: str, cell_type: str, run: bool
) -> tuple[str, str] | None:
    """Without the extension, the turn's first cell goes to the front-end as IPython's "next
    input" (`set_next_input`: a payload of the running cell's reply, which JupyterLab, Notebook
    and VS Code insert below that cell as it ends). Only while the turn's own cell runs, with a
    person there (nbclient and the headless runner drop it), once a turn (a reply holds one).
    What the card and the agent are told, or None when it cannot be proposed."""
    from IPython import get_ipython

    origin = origin_of(turn)
    shell = get_ipython()
    if (
        turn is None
        or shell is None
        or origin is None
        or not origin.interactive
        or turn in _PROPOSED
        or not gate.cell_running
        or not gate.may_run(turn)
    ):
        return None
    _PROPOSED.add(turn)
    code = source if cell_type == "code" else f"%%markdown\n{source}"
    shell.set_next_input(code, replace=False)
    not_run = " It is not run: the user runs it." if run else ""
    return (
        "Proposed as the next cell: the notebook shows it below the agent's cell when that "
        f"cell ends.{not_run}",
        "shown for the user to insert: this front-end has no acp_notebook extension, so the "
        "cell was proposed as the next input (set_next_input), which the notebook shows below "
        "your %%agent cell when it ends; the user keeps it or not"
        + ("; it was not run" if run else "")
        + ". Only one cell per turn can be proposed this way.",
    )


def _cell_arg(args: dict[str, Any], name: str) -> int | str:
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int | str) or len(str(value)) > 200:
        raise TypeError(f"{name} must be a cell id or a 1-based index, as notebook_cells lists")
    return value


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


def _not_linked(
    turn: TurnHandle | None,
    gate: CellGate,
    link: Link | None,
    source: str,
    cell_type: str,
    after: int | str | None,
    run: bool,
) -> tuple[str, str, bool]:
    """An allowed insert with no extension to apply it, or no cell to put it below: proposed
    as the next input when it can be (`_propose`), else, with no extension, listed in the
    record (its card holds the whole cell, with a Copy button where the view has one: VS Code,
    classic Notebook, nbclient and papermill), else refused. What the card says, what the agent
    is told, and whether that is an error."""
    if link is None and after is None:
        proposed = _propose(turn, gate, source, cell_type, run)
        if proposed is not None:
            return proposed[0], proposed[1], False
    if link is None:
        not_run = " or run" if run else ""
        return (
            "Listed here for you to copy: this notebook's front-end cannot insert cells.",
            f"not inserted{not_run}: {NO_FRONT_END}; the cell is listed in the turn's record "
            "for the user to copy into the notebook",
            False,
        )
    why = "the front-end did not say which cell the agent's is: name one with `after`"
    return f"Not inserted: {why}.", f"not inserted: {why}", True


def _below(turn: TurnHandle | None, after: int | str | None) -> int | str | None:
    """The cell to insert below: `after`, else the last one this turn inserted, else the
    turn's own cell (None if the front-end did not say which)."""
    if after is not None:
        return after
    last = _LAST_INSERTED.get(turn) if turn is not None else None
    origin = origin_of(turn)
    return last if last is not None else (origin.cell_id if origin is not None else None)


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
    below = _below(turn, after)
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
    if link is None and _runner_takes(turn, gate):
        return await _to_runner(session, turn, call, block, (source, cell_type, after), run)
    if link is None or below is None:
        said, answer_text, error = _not_linked(turn, gate, link, source, cell_type, after, run)
        status = "failed" if error else "completed"
        session.client_update(call, status, [block, text_part(said)])
        return ToolOutput(answer_text, error=error)
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
        notebook_undo.note(session, turn.id, CellChange("inserted", cell_id, link.client, source))
    named = f"cell {index} (id {cell_id})"
    inserted = [block, text_part(f"Inserted as {named}."), _link(cell_id, named)]
    session.client_update(call, "completed", inserted)
    if not run:
        return ToolOutput(f"inserted as {named}")
    ran = await _run(session, turn, link, gate, cell_id, f"the inserted {named}", source, block)
    # "inserted as cell 2 (id …); the inserted cell 2 (id …) ran: …" or "… queued to run …"
    return ToolOutput(f"inserted as {named}; {ran.text}", ran.images, ran.error)


def _runner_takes(turn: TurnHandle | None, gate: CellGate) -> bool:
    """Whether `acp-notebook run` runs this kernel and the turn's own cell is running (the
    cell the runner saves the inserted cells below: a `--background` turn's cell has ended)."""
    return (
        runner_token() is not None and turn is not None and gate.cell_running and gate.may_run(turn)
    )


async def _to_runner(
    session: Session,
    turn: TurnHandle | None,
    call: ToolCallPart,
    block: dict[str, Any],
    cell: tuple[str, str, int | str | None],
    run: bool,
) -> ToolOutput:
    """Headless under `acp-notebook run` (issue 22 item 4): the allowed cell (its source, type
    and `after`) goes to the runner as a display message of the turn's cell (`MIME_CELL`,
    marked with the run's token), which saves it below that cell (or below `after`, a cell at
    or below the turn's), after the ones the turn inserted there before, and runs it in its
    place when `run` was allowed too (a second card, kind `execute`)."""
    source, cell_type, after = cell
    if turn is not None:
        _TO_RUNNER[turn] = _TO_RUNNER.get(turn, 0) + 1
    # The id the runner gives the saved cell (unless the notebook holds it already), so the
    # record and the agent can name it.
    cell_id = f"agent-{secrets.token_hex(4)}"
    where = "the agent's cell" if after is None else f"cell {after}"
    said = (
        f"Inserted below {where} as cell id {cell_id}, in the notebook `acp-notebook run` "
        "saves (below a cell above the agent's, it is not)."
    )
    session.client_update(call, "completed", [block, text_part(said), _link(cell_id, cell_id)])
    runs = False
    ran = ""
    if run:
        asked = session.client_call("execute", title("Run the inserted cell", source), [block])
        runs = asked is not None and _allowed(await session.ask_for(asked, OPTIONS))
        if asked is not None:
            note = "Queued: it runs after the agent's cell." if runs else "Not run: not allowed."
            session.client_update(
                asked, "completed" if runs else "failed", [block, text_part(note)]
            )
        ran = (
            "; it runs after your %%agent cell ends, in order, so its output is not available "
            "in this turn"
            if runs
            else "; not run: the user (or the permission policy) did not allow it"
        )
    # Masked as every output is (`publish.show`): the saved cell holds what the card showed.
    sent = {
        "token": runner_token(),
        "op": "insert",
        "after": after,
        "id": cell_id,
        "source": source,
        "cell_type": cell_type,
        "run": runs,
    }
    publish.show({MIME_CELL: sent})
    below = "below your %%agent cell" if after is None else f"below cell {after} (if it is"
    below += "" if after is None else " your %%agent cell or one below it: else not)"
    return ToolOutput(
        f"inserted {below} (after the cells you inserted there before in this turn), "
        f"in the notebook acp-notebook run saves, as cell id {cell_id}{ran}"
    )


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
    call = session.client_call("execute", title(f"Run {named}", source), [block])
    if call is None:
        return ToolOutput(f"{named}: not run, the turn is past its size limits")
    answer = await session.ask_for(call, OPTIONS)
    if not _allowed(answer):
        session.client_update(call, "failed", [block, text_part("Not run: not allowed.")])
        return ToolOutput(f"{named}: not run, the user (or the permission policy) did not allow it")
    if gate.cell_running:
        # The kernel runs one cell at a time, and the turn's own cell waits for this answer.
        try:
            await link.request("run", REPLY_TIMEOUT, cell=cell_id, wait=False, expected=source)
        except FrontEndError as exc:
            session.client_update(call, "failed", [block, text_part(f"Not run: {exc}.")])
            return ToolOutput(f"{named}: not run, {exc}", error=True)
        queued = "Queued: it runs as soon as the cell running now (the agent's) ends."
        session.client_update(call, "completed", [block, text_part(queued), _link(cell_id, named)])
        return ToolOutput(
            f"{named}: queued to run; the kernel runs one cell at a time, and "
            "runs it once the cell running now (your turn's own %%agent cell) ends, so its "
            "output is not available in this turn"
        )
    session.client_update(call, "in_progress", [block])
    left = time_left(turn)
    try:
        with anyio.fail_after(GATE_TIMEOUT if left is None else max(left, 0)):
            reply = await link.request("run", None, cell=cell_id, wait=True, expected=source)
    except (FrontEndError, TimeoutError) as exc:
        why = str(exc) or "the turn's time ran out"
        session.client_update(call, "failed", [block, text_part(f"Not run: {why}.")])
        return ToolOutput(f"{named}: the run failed, {why}", error=True)
    ran = reply.get("cell")
    text = _snapshot(ran).to_text() if isinstance(ran, dict) else "(no outputs were sent)"
    session.client_update(call, "completed", [block, fenced(text, "text"), _link(cell_id, named)])
    return ToolOutput(_clip(f"{named} ran:\n{text}"))


async def _cell(link: Link, cell: int | str) -> tuple[CellSnapshot, str, bool]:
    """The cell as the notebook has it now: its snapshot, its whole source, whether it runs
    (FrontEndError when it is not there, or longer than the front-end sends whole)."""
    reply = await link.request("get", REPLY_TIMEOUT, cell=cell)
    raw = reply.get("cell")
    if not isinstance(raw, dict) or not isinstance(raw.get("source"), str):
        raise FrontEndError("the front-end did not send the cell")
    if raw.get("truncated"):
        raise FrontEndError("the cell is longer than a card shows whole")
    return _snapshot(raw), raw["source"], reply.get("running") is True


def _named(snapshot: CellSnapshot) -> str:
    return f"cell {snapshot.index} (id {snapshot.cell_id})"


async def edit_cell(
    session: Session, turn: TurnHandle | None, link: Link | None, cell: int | str, source: str
) -> ToolOutput:
    """Ask with the edit as a diff (kind `edit`), then replace the cell's source, if the cell
    still holds what the person was shown and is not running."""
    if link is None:
        return ToolOutput(f"not edited: {NO_FRONT_END}", error=True)
    refused = unshowable(source)
    if refused is not None:
        return ToolOutput(refused.replace("the code", "the new source"), error=True)
    try:
        snapshot, old, running = await _cell(link, cell)
    except FrontEndError as exc:
        return ToolOutput(f"not edited: {exc}", error=True)
    if running:
        return ToolOutput("not edited: the cell is running", error=True)
    if unshowable(old) is not None:
        return ToolOutput(
            "not edited: the cell's source cannot be shown whole in a card", error=True
        )
    named = _named(snapshot)
    if not _diff_shows_whole(named, old, source):
        return ToolOutput(
            f"not edited: the diff is longer than its card shows whole (at most "
            f"{limits.DIFF_LINES} lines): edit it in smaller steps",
            error=True,
        )
    diff = {"type": "diff", "path": named, "oldText": old, "newText": source}
    call = session.client_call("edit", title(f"Edit {named}", source), [diff])
    if call is None:
        return ToolOutput("not edited: the turn is past its size limits", error=True)
    answer = await session.ask_for(call, OPTIONS)
    if not _allowed(answer):
        session.client_update(call, "failed", [diff, text_part("Not edited: not allowed.")])
        return ToolOutput(
            f"{named}: not edited, the user (or the permission policy) did not allow it"
        )
    try:
        await link.request(
            "edit", REPLY_TIMEOUT, cell=snapshot.cell_id, source=source, expected=old
        )
    except FrontEndError as exc:
        session.client_update(call, "failed", [diff, text_part(f"Not edited: {exc}.")])
        return ToolOutput(f"{named}: not edited, {exc}", error=True)
    if turn is not None and snapshot.cell_id:
        change = CellChange("edited", snapshot.cell_id, link.client, source, old)
        notebook_undo.note(session, turn.id, change)
    edited = [diff, text_part(f"Edited {named}."), _link(snapshot.cell_id or "", named)]
    session.client_update(call, "completed", edited)
    return ToolOutput(f"edited {named} (not run: run_cell runs it)")


async def run_cell(
    session: Session, turn: TurnHandle | None, link: Link | None, gate: CellGate, cell: int | str
) -> ToolOutput:
    """Ask (kind `execute`, the cell's source whole), then run it as the person would."""
    if link is None:
        return ToolOutput(f"not run: {NO_FRONT_END}", error=True)
    try:
        snapshot, source, running = await _cell(link, cell)
    except FrontEndError as exc:
        return ToolOutput(f"not run: {exc}", error=True)
    origin = origin_of(turn)
    if running or (origin is not None and snapshot.cell_id == origin.cell_id):
        return ToolOutput("not run: the cell is running", error=True)
    if snapshot.cell_type != "code":
        return ToolOutput("not run: only a code cell runs", error=True)
    if is_agent_source(source):
        return ToolOutput("not run: an %%agent cell runs only when the user runs it", error=True)
    refused = unshowable(source)
    if refused is not None:
        return ToolOutput(refused.replace("the code", "the cell"), error=True)
    return await _run(
        session,
        turn,
        link,
        gate,
        snapshot.cell_id or "",
        _named(snapshot),
        source,
        fenced(source, "python"),
    )


def _diff_shows_whole(path: str, old: str, new: str) -> bool:
    """Whether the card draws all of the edit's diff (render/cards.py cuts a long one)."""
    lines = unified(path, old, new).lines
    return len(lines) <= limits.DIFF_LINES and sum(map(len, lines)) <= limits.MAX_CHARS


NO_FRONT_END = (
    "this notebook's front-end cannot change cells (JupyterLab or Notebook 7 with "
    "acp_notebook's extension can)"
)


def _link(cell_id: str, named: str) -> dict[str, Any]:
    """The card's link to the cell (render/labels.py `cell_link`: drawn as one that scrolls the
    notebook to it where the extension is, as text with its id elsewhere)."""
    return cell_link(CELL_URI + cell_id, named)


def _clip(text: str) -> str:
    return clip_text(text, MAX_TEXT)


def _allowed(answer: Any) -> bool:
    outcome = answer.get("outcome", {}) if isinstance(answer, dict) else {}
    return isinstance(outcome, dict) and outcome.get("optionId") == "allow"


def _full(turn: TurnHandle) -> bool:
    """Whether `turn` handed `acp-notebook run` as many cells as a turn may."""
    return _TO_RUNNER.get(turn, 0) >= limits.MAX_RUNNER_CELLS
