"""A recorded notebook read for replay: its `%%agent` cells, each with its recorded turn.

The notebook is hostile input (anyone may hand one to CI): it is read as JSON only, never
executed, with its size bounded; nothing in it is trusted to have any shape. A problem with one
cell (no transcript, a transcript that is not a JSON object) is kept as that cell's `problem`
and only reported if that cell is replayed; a file that is not a notebook at all raises
`ReplayError` at once.

What a turn left in a cell's outputs (see `cell`): a turn that gave the cell its value
has its transcript in its live display, which became the record (or, with no live display
(`--quiet`) and in notebooks saved before that, in the `execute_result`, the `TurnResult`'s
display); a failed turn has it in a display output, followed by an `error` output whose `ename`
is `TurnFailed` and whose `evalue` is the paragraph the cell failed with; a `--background` turn
has it in a display output.

What the turn was asked is read from its record, not from the cell's source: a notebook
recorded, edited, then replayed would otherwise answer the new prompt with the old turn. A record
that does not say (made before `cellOptions` was kept) is a problem of its cell.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from ..client.serving.regular_file import read_regular
from ..display import views
from ..errors import ReplayError
from ..protocol.agent_cell import split_agent_source
from ..render import MIME_TRANSCRIPT

#: A recorded notebook larger than this is refused: nobody's turns need it, a hostile file might.
MAX_NOTEBOOK_BYTES = 128 * 1024 * 1024
#: The longest `TurnFailed` paragraph kept (a failed cell shows it again).
MAX_FAILURE_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class RecordedCell:
    """One `%%agent` cell of the recorded notebook, with what its outputs say of its turn."""

    index: int  # among all the notebook's cells, from 0
    ordinal: int  # among its `%%agent` cells, from 0
    cell_id: str | None
    #: The options and the prompt the recorded turn was asked with, as its record keeps them
    #: (`cellOptions`, the prompt's first text block); the cell's source when it has no turn.
    line: str
    body: str
    transcript: dict[str, Any] | None
    is_value: bool  # the transcript is the cell's value (execute_result), not a display
    failure: str | None  # the TurnFailed paragraph, when the turn failed
    problem: str  # why this cell cannot be replayed as it is ("" when it can)

    def name(self) -> str:
        """How a message names the cell: its rank among `%%agent` cells, index and id."""
        ident = f", id {views.text(self.cell_id, 60)!r}" if self.cell_id else ""
        return f"%%agent cell #{self.ordinal + 1} (cell {self.index} of the recording{ident})"


@dataclass(frozen=True, slots=True)
class Recording:
    """The `%%agent` cells of a recorded notebook, in order."""

    path: str
    cells: tuple[RecordedCell, ...]

    def find(self, cell_id: str | None, ordinal: int) -> RecordedCell | None:
        """The recorded cell for the executing one: by cell id when the front-end sent one
        and the recording has ids, else the `ordinal`-th `%%agent` cell."""
        if cell_id is not None and any(c.cell_id for c in self.cells):
            return next((c for c in self.cells if c.cell_id == cell_id), None)
        return self.cells[ordinal] if 0 <= ordinal < len(self.cells) else None


def load(path: str) -> Recording:
    """Read the recorded notebook at `path`; `ReplayError` when it is not one."""
    where = f"the recorded notebook {path!r} (ACP_NOTEBOOK_REPLAY)"
    try:  # not open(): a FIFO as the recording blocked the first %%agent cell for good
        raw = read_regular(path, MAX_NOTEBOOK_BYTES)
    except OSError as exc:
        raise ReplayError(f"cannot read {where}: {exc.strerror or exc}") from None
    try:
        nb = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ReplayError(f"{where} is not a notebook: invalid JSON ({_short(exc)})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise ReplayError(f"{where} is not a notebook: it has no list of cells")
    found: list[RecordedCell] = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        agent = split_agent_source(_source(cell.get("source")))
        if agent is not None:
            found.append(_read_cell(cell, index, len(found), *agent))
    return Recording(path, tuple(found))


def _read_cell(
    cell: dict[str, Any], index: int, ordinal: int, line: str, body: str
) -> RecordedCell:
    cell_id = cell.get("id")
    outputs = cell.get("outputs")
    outputs = [o for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else []
    transcript: Any = None
    is_value = False
    failure: str | None = None
    other_error = ""
    for out in outputs:
        kind = out.get("output_type")
        data = out.get("data")
        if kind == "error" and out.get("ename") == "TurnFailed":
            failure = _source(out.get("evalue"))[:MAX_FAILURE_CHARS]
        elif kind == "error":  # an interrupt, a usage error: not a turn's end to replay
            other_error = views.text(out.get("ename"), 80) or "an error"
        elif kind in ("execute_result", "display_data") and isinstance(data, dict):
            if MIME_TRANSCRIPT in data and not is_value:  # the cell's value wins over a display
                transcript, is_value = data[MIME_TRANSCRIPT], kind == "execute_result"
    problem = ""
    if other_error:
        problem = f"its recorded run ended with {other_error}, not with a turn's result"
    elif isinstance(transcript, str):  # a JSON type some tools save as a string
        try:
            transcript = json.loads(transcript)
        except (ValueError, RecursionError) as exc:
            problem = f"its recorded transcript is malformed: invalid JSON ({_short(exc)})"
    if problem:
        transcript = None
    elif transcript is None:
        problem = "it has no recorded turn (no output of type " + MIME_TRANSCRIPT + ")"
        if _background(line):
            # nbclient and papermill keep only what arrives while the cell runs: a background
            # turn's record comes later, so a headless run never saves it.
            problem += "; it ran with --background, whose record a headless run does not keep"
        elif failure:
            problem += f"; it failed with: {views.text(failure, 200)}"
    elif not isinstance(transcript, dict) or not isinstance(transcript.get("success"), bool):
        problem = "its recorded transcript is malformed: not a finished turn (no boolean 'success')"
        transcript = None
    else:
        # What the turn was asked, as its record kept it: the cell's source may have been edited
        # since (a replay of the edited notebook itself served the old answer to a new prompt).
        asked = _asked(transcript)
        if isinstance(asked, str):
            problem, transcript = asked, None
        else:
            line, body = asked
    return RecordedCell(
        index=index,
        ordinal=ordinal,
        cell_id=cell_id if isinstance(cell_id, str) and cell_id else None,
        line=line,
        body=body,
        transcript=transcript,
        is_value=is_value,
        failure=failure,
        problem=problem,
    )


def _asked(transcript: dict[str, Any]) -> tuple[str, str] | str:
    """The options and the prompt a recorded turn was asked with, or why the record cannot say.

    The prompt is the first text block of the recorded prompt: the cell's body, as `%%agent`
    sends it (context parts are recorded as such, files as resources, and a `--schema`'s
    instructions come after it). The options are `TurnResult.cell_options`; a record made
    before it was kept cannot be checked against the cell, so it is not replayed."""
    options = transcript.get("cellOptions")
    if not isinstance(options, str):
        return (
            "its record does not say which %%agent options it was asked with (it was made by "
            "an older acp_notebook, or not by a %%agent cell)"
        )
    prompt = transcript.get("prompt")
    blocks = prompt if isinstance(prompt, list) else []
    body = next(
        (
            b["text"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ),
        None,
    )
    if body is None:
        return "its record holds no prompt to compare the cell with"
    return options.strip(), body


def _background(line: str) -> bool:
    try:
        return any(word in ("--background", "--bg") for word in shlex.split(line))
    except ValueError:
        return False


def _source(value: Any) -> str:
    """A cell's source or an output's text: a string, or a list of strings (nbformat)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return ""


def _short(exc: BaseException) -> str:
    return views.text(str(exc) or type(exc).__name__, 200)
