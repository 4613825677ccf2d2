"""Executing notebooks on nbclient for `acp-notebook run`, printing each turn as it streams.

The kernel is configured without touching the notebook's cells: the agent, `--allow`, `--deny`
and `--timeout` go on the kernel's command line as `--AcpNotebook.*` traitlets options (what
`c.AcpNotebook.*` in a config file would set), the replay and live-transcript switches in its
environment. `ACP_NOTEBOOK_LIVE_TRANSCRIPT=1` makes the kernel's live display updates carry the
turn's transcript, which `RunClient.process_message` hands to a `TurnPrinter` per turn id.

What an agent does to the notebook in a turn (`insert_cell`, `edit_cell`, `run_cell`, allowed
with `--allow edit` and `execute`) comes as display messages of its `%%agent` cell (`MIME_CELL`,
marked with a token only this run and the kernel know): they are taken out of the outputs and
applied when the cell ends (`agent_cells.py`): inserted cells saved right below it, in order,
those the agent ran run before the next cell, edits applied to the saved notebook.

The token is not a key against the agent: code it runs in the kernel (`run_code`, allowed with
`--allow execute`) can read it there and display a cell of its own. So the token only tells the
kernel's cells from what other kernels or libraries display, and the runner checks what a cell
may do by its own settings, not by what the message claims: cells are taken only while a
`%%agent` cell runs and only when this run's `--allow` grants `edit` (a forged cell of an agent
allowed `execute` alone is dropped), run only when it grants `execute`, never an `%%agent` cell
(an agent would start turns without end), at most 50 a cell, every source masked
with this run's secrets as the rest of what it prints, and the id only one nbformat allows and
the notebook does not hold yet.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import os
import secrets
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat import NotebookNode

from ..client.serving import safe_fs
from ..protocol.redact import Redactor
from ..render import MIME_CELL, MIME_TRANSCRIPT
from . import params
from .agent_cells import AgentCells, is_agent_cell
from .console import Tagged
from .printer import Line, Totals, TurnPrinter, safe, seconds

#: Lines of a failed cell's error shown (the `TurnFailed` paragraph is far shorter).
ERROR_LINES = 40
#: Characters of each of those lines (escapes and control characters removed, masked).
ERROR_WIDTH = 1000
LIVE_ENV = "ACP_NOTEBOOK_LIVE_TRANSCRIPT"
REPLAY_ENV = "ACP_NOTEBOOK_REPLAY"
REPLAY_MODE_ENV = "ACP_NOTEBOOK_REPLAY_MODE"
#: The kernel's `notebook_link.CELLS_ENV`: the token of the cells its agents insert.
CELLS_ENV = "ACP_NOTEBOOK_RUN_CELLS"


@dataclass(frozen=True, slots=True)
class Settings:
    """What every notebook of one run gets."""

    agent: str | None = None
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    timeout: float | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    replay: str | None = None  # None, "record" or "fill"
    quiet: bool = False

    def grants(self, kind: str) -> bool:
        """Whether this run's own `--allow` grants `kind` (and `--deny` does not take it back):
        what the runner checks before it saves or runs a cell an agent inserted."""
        denied = kind in self.deny or "*" in self.deny
        return not denied and (kind in self.allow or "*" in self.allow)

    def kernel_args(self) -> list[str]:
        """Traitlets options for the kernel's command line: `c.AcpNotebook.*` without a file."""
        # A list option is given once per item: traitlets appends them.
        # The kernel's own warnings (ipykernel's about TCP without encryption, on every start)
        # would open every run; its errors still reach the terminal.
        args = ["--IPKernelApp.log_level=ERROR"]
        args += [f"--AcpNotebook.allow={kind}" for kind in self.allow]
        args += [f"--AcpNotebook.deny={kind}" for kind in self.deny]
        if self.timeout is not None:
            args.append(f"--AcpNotebook.timeout={self.timeout!r}")
        return args

    def kernel_env(self, notebook: Path) -> dict[str, str]:
        env = {**os.environ, LIVE_ENV: "1"}
        if self.agent:
            env["ACP_NOTEBOOK_AGENT"] = self.agent
        if self.replay is not None:
            env[REPLAY_ENV] = str(notebook.resolve())
            if self.replay == "fill":
                env[REPLAY_MODE_ENV] = "fill"
            else:
                env.pop(REPLAY_MODE_ENV, None)
        return env


@dataclass(slots=True)
class Outcome:
    """How one notebook's run ended."""

    notebook: Path
    output: Path
    ok: bool = False
    failed_cell: str = ""  # "[3/7] %%agent …" of the cell that failed
    error: str = ""  # what went wrong, when not a cell (the kernel died, a bad notebook)
    totals: Totals = field(default_factory=Totals)
    seconds: float = 0.0

    def line(self) -> Line:
        head = f"{self.notebook.name} in {seconds(self.seconds)}"
        where = f"→ {self.output}"
        if self.ok:
            return Line(f"✓ {head}: {self.totals.line()} {where}", "ok")
        why = f"failed at {self.failed_cell}" if self.failed_cell else "failed"
        why += f": {self.error}" if self.error else ""
        return Line(f"✗ {head}: {why} · {self.totals.line()} {where}", "fail")


class NotebookView:
    """What the terminal shows of one notebook: cells' progress lines and their turns."""

    def __init__(self, out: Tagged, settings: Settings, code_cells: int) -> None:
        self.out = out
        self.quiet = settings.quiet
        self.code_cells = code_cells
        self.redactor = Redactor(environ=os.environ)
        self.printers: dict[str, TurnPrinter] = {}
        self.totals = Totals()
        self.ordinal = 0
        self.error: tuple[str, str] | None = None  # (ename, evalue) of the running cell

    def start(self, cell: NotebookNode) -> str:
        self.ordinal += 1
        self.error = None
        label = f"[{self.ordinal}/{self.code_cells}] {safe(_first_line(cell.source), limit=60)}"
        if not self.quiet and is_agent_cell(cell):
            self.out.line(label, "bold")
        return label

    def end(
        self, label: str, ok: bool, elapsed: float, reply: tuple[str, str] | None = None
    ) -> None:
        """The cell's last line; a failed cell's reason under it: its error output's, else the
        execute reply's `reply` (a usage error shows no error output: IPython prints it to
        stderr, so "failed 0.3 s" was all a `%%agent --agent unknown-name` said)."""
        if self.error is None:
            self.error = reply
        if ok and not self.quiet:
            self.out.line(f"{label} … ok {seconds(elapsed)}", "dim")
        elif not ok:
            self.out.line(f"{label} … failed {seconds(elapsed)}", "fail")
            self.out.write(self.error_lines())

    def error_lines(self) -> list[Line]:
        """The cell's error, plainly: a `TurnFailed` paragraph as it is, else `Name: message`."""
        if self.error is None:
            return []
        ename, evalue = self.error
        text = evalue if ename == "TurnFailed" else f"{ename}: {evalue}" if evalue else ename
        # Bounded before it is split: a message of a million newlines is not split whole.
        lines = text[: ERROR_LINES * ERROR_WIDTH].splitlines()[:ERROR_LINES] or [ename]
        return [Line("  " + safe(x, self.redactor, limit=ERROR_WIDTH), "fail") for x in lines]

    def message(self, msg: dict[str, Any]) -> None:
        kind = msg.get("msg_type")
        content = msg.get("content")
        if not isinstance(content, dict):
            return
        if kind == "error":
            self.error = (str(content.get("ename", "")), str(content.get("evalue", "")))
            return
        if kind not in ("display_data", "update_display_data", "execute_result"):
            return
        data = content.get("data")
        transcript = data.get(MIME_TRANSCRIPT) if isinstance(data, dict) else None
        if not isinstance(transcript, dict) or not isinstance(transcript.get("turnId"), str):
            return
        turn_id = transcript["turnId"]
        printer = self.printers.get(turn_id)
        if printer is None:  # a turn shown again later (a variable displayed) adds nothing
            printer = self.printers[turn_id] = TurnPrinter(self.redactor, self.quiet)
        was_finished = printer.finished
        self.out.write(
            [Line(f"  {x.text}" if x.text else "", x.style) for x in printer.feed(transcript)]
        )
        if printer.finished and not was_finished and printer.last is not None:
            self.totals.add(printer.last)


class RunClient(NotebookClient):
    """A NotebookClient that shows every cell's progress and every turn on a `NotebookView`,
    and applies what a turn did to the notebook when its cell ends (`agent_cells`)."""

    def __init__(
        self, nb: NotebookNode, view: NotebookView, token: str, settings: Settings, **kwargs: Any
    ) -> None:
        super().__init__(nb, **kwargs)
        self.view = view
        self.token = token
        mask = view.redactor.text
        self.agent = AgentCells(nb, mask, settings.grants("edit"), settings.grants("execute"))

    def process_message(self, msg: dict[str, Any], cell: NotebookNode, cell_index: int) -> Any:
        self.view.message(msg)
        sent = self.sent_cell(msg)
        if sent is not None:  # for the notebook, not an output
            if is_agent_cell(cell):
                self.agent.take(sent)
            return None
        return super().process_message(msg, cell, cell_index)

    def sent_cell(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """What a display message of `MIME_CELL` with this run's token holds, else None."""
        content = msg.get("content")
        data = content.get("data") if isinstance(content, dict) else None
        cell = data.get(MIME_CELL) if isinstance(data, dict) else None
        if msg.get("msg_type") != "display_data" or not isinstance(cell, dict):
            return None
        token = cell.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token, self.token):
            return None
        return cell

    def place(self, cell_index: int) -> list[tuple[int, NotebookNode]]:
        """What the cell's turns did, applied below it (nbclient's walk reaches the inserted
        cells next, and runs those the agent ran); the cells to run again, and their indexes."""
        before = len(self.nb.cells)
        pending = [node for node, _ in self.agent.pending]
        again, lines = self.agent.place(cell_index)
        placed = [n for n in pending if any(n is c for c in self.nb.cells)]
        runs = sum(n.cell_type == "code" and not self.agent.skips(n) for n in placed)
        self.view.code_cells += runs + len(again)
        if not self.view.quiet:
            if len(self.nb.cells) > before:
                ran = f", {runs} to run" if runs else ""
                self.view.out.line(
                    f"  + {len(self.nb.cells) - before} cell(s) inserted below{ran}", "dim"
                )
            for line in lines:
                self.view.out.line(f"  ~ {safe(line, self.view.redactor, limit=200)}", "dim")
        return again

    async def async_execute_cell(
        self,
        cell: NotebookNode,
        cell_index: int,
        execution_count: int | None = None,
        store_history: bool = True,
    ) -> NotebookNode:
        if self.agent.skips(cell):  # inserted by the agent, which did not run it
            return cell
        run = super().async_execute_cell(cell, cell_index, execution_count, store_history)
        if cell.cell_type != "code" or not cell.source.strip():
            return await run
        label = self.view.start(cell)
        started = time.monotonic()
        again: list[tuple[int, NotebookNode]] = []
        try:
            result = await run
        except CellExecutionError as exc:  # the reply's reason: ename and evalue
            self.view.end(label, False, time.monotonic() - started, (exc.ename, exc.evalue))
            raise
        except BaseException:  # the kernel gone (an interrupt, a crash): run_notebook says so
            self.view.end(label, False, time.monotonic() - started)
            raise
        else:
            self.view.end(label, True, time.monotonic() - started)
        finally:  # applied also when it failed (then nothing runs again)
            again = self.place(cell_index)
        for index, earlier in again:  # cells the agent ran that ran already: once more, now
            # By its index, never `nb.cells.index(earlier)`: that finds the first cell *equal*
            # to it (cells without ids can be), and nbclient stores the cell at the index given.
            await self.async_execute_cell(earlier, index)
            marks = earlier.metadata.get("acp_notebook")
            if isinstance(marks, dict) and marks.pop("edited_after_run", None):
                marks.pop("ran_source", None)  # its outputs are its new source's now
                marks["edited"] = True
        return result


async def run_notebook(path: Path, output: Path, settings: Settings, out: Tagged) -> Outcome:
    """Execute one notebook, print it as it runs, save it (also when a cell failed)."""
    outcome = Outcome(path, output)
    started = time.monotonic()
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # unreadable or not a notebook: this notebook fails, others run
        outcome.error = f"cannot read the notebook: {exc}"
        return outcome
    params.inject(nb, settings.parameters)
    code_cells = sum(c.cell_type == "code" and bool(c.source.strip()) for c in nb.cells)
    view = NotebookView(out, settings, code_cells)
    token = secrets.token_hex(16)
    client = RunClient(
        nb,
        view,
        token,
        settings,
        timeout=None,
        startup_timeout=120,
        extra_arguments=settings.kernel_args(),
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    try:
        await client.async_execute(env={**settings.kernel_env(path), CELLS_ENV: token})
        outcome.ok = True
    except CellExecutionError:
        outcome.failed_cell = f"cell {view.ordinal} of {code_cells}"
    except Exception as exc:  # the kernel died or would not start: reported, not a traceback
        # nbclient answers an interrupt (Ctrl-C) by shutting the kernel down; the cell it ran
        # then ends in an exception that may say nothing.
        detail = str(exc).strip()
        what = f"{type(exc).__name__}: {detail}" if detail else "the kernel stopped (interrupted?)"
        outcome.error = safe(what, view.redactor, limit=1000)
        if view.ordinal:
            outcome.failed_cell = f"cell {view.ordinal} of {code_cells}"
        out.line(f"✗ {outcome.error}", "fail")
    finally:
        try:
            save(nb, output)
        except OSError as exc:  # a folder or a device at the name (the agent can make one)
            outcome.ok = False
            outcome.error = safe(f"cannot save {output}: {exc.strerror or exc}", view.redactor)
            out.line(f"✗ {outcome.error}", "fail")
        outcome.totals = view.totals
        outcome.seconds = time.monotonic() - started
    return outcome


def save(nb: NotebookNode, output: Path) -> None:
    """Write the executed notebook at `output` as a new file renamed over the name, in its
    folder's descriptor. The folder is often where the notebook's agent works: nbformat.write
    opened the name, so a link planted there was written through, truncating what it led to
    (a rename replaces the link itself)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    text = nbformat.writes(nb)
    data = (text if text.endswith("\n") else text + "\n").encode("utf-8")
    folder = os.open(output.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        st = safe_fs.lstat(output.name, folder)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise OSError(errno.EISDIR, "it is a folder")
        regular = st if st is not None and stat.S_ISREG(st.st_mode) else None  # its mode kept
        safe_fs.write_replace(safe_fs.Spot(folder, output.name, str(output), regular), data)
    finally:
        os.close(folder)


async def run_all(
    jobs: list[tuple[Path, Path]], settings: Settings, outs: list[Tagged], parallel: int
) -> list[Outcome]:
    """Run the notebooks, at most `parallel` at once, in the order given."""
    gate = asyncio.Semaphore(max(parallel, 1))

    async def one(job: tuple[Path, Path], out: Tagged) -> Outcome:
        async with gate:
            return await run_notebook(job[0], job[1], settings, out)

    return list(await asyncio.gather(*(one(j, o) for j, o in zip(jobs, outs, strict=True))))


def _first_line(source: str) -> str:
    return next((line for line in source.splitlines() if line.strip()), "").strip()
