"""The kernel's readers for an agent (kernel_tools/cells.py), against a fake shell and a
real notebook file: which notebook, the cells above, the last error, each masked and bounded."""

from __future__ import annotations

import json
import linecache
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from acp_notebook.kernel_tools import cell_errors, snapshots
from acp_notebook.kernel_tools import cells as kc
from tests.blocking import CountedKey
from tests.nb_util import execute, kernel_env, new_nb, scripted, text

KEY = "sk-nbctx-Zq8vR2mW4tY6uI0pL3kJ"


class FakeCompiler:
    """Names cell files as IPython's compiler does: `format_code_name` -> ("Cell", "In[n]")."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}

    def format_code_name(self, name: str) -> tuple[str, str] | None:
        return ("Cell", f"In[{self.numbers[name]}]") if name in self.numbers else None


class FakeShell:
    """What the readers use of an IPython shell: the namespace, the raw history, the compiler."""

    def __init__(self, inputs: list[str], outs: dict[int, Any] | None = None) -> None:
        self.history_manager = SimpleNamespace(input_hist_raw=["", *inputs])
        self.user_ns: dict[str, Any] = {"In": ["", *inputs], "Out": outs or {}}
        self.compile = FakeCompiler()

    def run(self, number: int, namespace: dict[str, Any]) -> None:
        """Run history entry `number` as a cell, under a file name only the compiler knows."""
        source = self.history_manager.input_hist_raw[number]
        name = f"/tmp/fake_kernel/cell{number}.py"
        self.compile.numbers[name] = number
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        exec(compile(source, name, "exec"), namespace)


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBCTX_TEST_API_KEY", KEY)
    for name in ("JPY_SESSION_NAME", "PAPERMILL_INPUT_PATH"):
        monkeypatch.delenv(name, raising=False)


def _notebook(path: Path, running: str) -> Path:
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell("# Sales"),
        new_code_cell(
            "import pandas as pd",
            execution_count=1,
        ),
        new_code_cell(
            f"print('{KEY}')\nx = 1",
            execution_count=2,
            outputs=[new_output("stream", name="stdout", text=f"{KEY}\n")],
        ),
        new_code_cell(
            "df.plot()",
            execution_count=3,
            outputs=[
                new_output(
                    "execute_result",
                    data={"text/plain": "<Axes>", "image/png": "iVBORw0KGgo="},
                    execution_count=3,
                ),
                new_output("error", ename="KeyError", evalue="'price'", traceback=["\x1b[31mx"]),
            ],
        ),
        new_code_cell(running),
    ]
    nbformat.write(nb, path)
    return path


# -- notebook_path --------------------------------------------------------------------------


def test_notebook_path_from_vscode_and_jupyter_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = _notebook(tmp_path / "a.ipynb", "%%agent")
    shell = FakeShell([])
    assert kc.notebook_path(shell) is None  # nbclient says nothing
    shell.user_ns["__vsc_ipynb_file__"] = str(nb)
    assert kc.notebook_path(shell) == str(nb)
    shell.user_ns["__vsc_ipynb_file__"] = str(tmp_path / "gone.ipynb")
    assert kc.notebook_path(shell) is None  # a file that is not there is not the notebook
    # jupyter-server without a name: relative to its root, the kernel in the notebook's folder
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JPY_SESSION_NAME", "work/a.ipynb")
    assert kc.notebook_path(shell) == str(nb)
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "notes.txt"))
    assert kc.notebook_path(shell) is None


def test_notebook_path_from_papermill_variable(tmp_path: Path) -> None:
    nb = _notebook(tmp_path / "p.ipynb", "%%agent")
    shell = FakeShell([])
    shell.user_ns["PAPERMILL_INPUT_PATH"] = str(nb)
    assert kc.notebook_path(shell) == str(nb)


# -- recent_cells ---------------------------------------------------------------------------


def test_recent_cells_from_the_notebook_file(tmp_path: Path) -> None:
    running = "%%agent --cells 3\nwhy does this fail?"
    nb = _notebook(tmp_path / "a.ipynb", running)
    shell = FakeShell(["x = 1", running])
    shell.user_ns["__vsc_ipynb_file__"] = str(nb)
    cells = kc.recent_cells(shell, 3)
    assert [c.index for c in cells] == [2, 3, 4]
    assert [c.execution_count for c in cells] == [1, 2, 3]
    assert cells[0].source == "import pandas as pd"
    printed, plotted = cells[1], cells[2]
    assert KEY not in printed.source and "[redacted]" in printed.source
    assert printed.outputs == ("stdout: [redacted]\n",)
    assert plotted.outputs[0] == "<Axes>\n[also as image/png]"
    assert plotted.outputs[1] == "KeyError: 'price'"
    text = "\n".join(c.to_text() for c in cells)
    assert "--- In [3], cell 4 ---" in text and KEY not in text
    # the markdown cell when asked for more, and never the running cell itself
    everything = kc.recent_cells(shell, None)
    assert everything[0].cell_type == "markdown" and everything[0].label() == "cell 1, markdown"
    assert all(c.source != running for c in everything)


def test_recent_cells_fall_back_to_history_when_the_cell_is_not_saved(tmp_path: Path) -> None:
    nb = _notebook(tmp_path / "a.ipynb", "%%agent\nan older prompt")
    shell = FakeShell(["a = 2", "a * 21", "", "%%agent --cells 2\nnew"], outs={2: 42})
    shell.user_ns["__vsc_ipynb_file__"] = str(nb)
    cells = kc.recent_cells(shell, 2)
    assert [(c.execution_count, c.source, c.outputs) for c in cells] == [
        (1, "a = 2", ()),
        (2, "a * 21", ("42",)),
    ]
    assert cells[0].index is None and cells[0].to_text() == "--- In [1] ---\na = 2"


def test_a_notebook_swapped_for_a_link_out_is_not_read(tmp_path: Path) -> None:
    """The agent's shell put a link to another notebook (outside the folder) in the running
    notebook's place: its cells are not read (the history is used instead)."""
    running = "%%agent --cells 2\nwhy?"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    _notebook(outside / "private.ipynb", running)
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.ipynb").symlink_to(outside / "private.ipynb")
    shell = FakeShell(["x = 1", running])
    shell.user_ns["__vsc_ipynb_file__"] = str(work / "a.ipynb")
    cells = kc.recent_cells(shell, 2)
    assert [(c.index, c.source) for c in cells] == [(None, "x = 1")]


def test_recent_cells_from_history_are_bounded_and_masked(tmp_path: Path) -> None:
    big = "y" * 10_000_000
    shell = FakeShell([f"s = '{KEY}' + 'x' * 10**7", "s", "%%agent --cells 5"], outs={2: big})
    cells = kc.recent_cells(shell, 5)
    assert len(cells) == 2 and KEY not in cells[0].source
    assert len(cells[1].outputs[0]) <= snapshots.OUTPUT_CHARS + 50
    assert kc.recent_cells(shell, 0) == []
    many = FakeShell([f"v{i} = {i}" for i in range(500)] + ["%%agent"])
    assert len(kc.recent_cells(many, 10_000)) == snapshots.MAX_CELLS


def test_a_big_dict_output_is_not_sorted_to_show_four_keys() -> None:
    """`Out[n]` a dict of 3,000,000 keys: reprlib sorted it whole (5 s, the kernel blocked) for
    each `--cells` or each time the agent read the cells."""
    CountedKey.compared = 0

    shell = FakeShell(
        ["d", "%%agent --cells 1"], outs={1: dict.fromkeys(map(CountedKey, range(50_000)))}
    )
    [cell] = kc.recent_cells(shell, 1)
    assert "k0" in cell.outputs[0] and "..." in cell.outputs[0]
    assert CountedKey.compared == 0, f"{CountedKey.compared} comparisons to show a few keys"


@pytest.mark.timeout(120)
def test_a_notebook_of_many_cells_is_read_without_validating_it(tmp_path: Path) -> None:
    """A notebook file of 200,000 small cells (under the size bound): nbformat read and
    validated it, cell by cell (15 s of a blocked kernel, more for the bound's 20 MB), for each
    `--cells` and each time the agent read the cells; the cells above are all that is used."""
    import json
    import time

    running = "%%agent --cells 2\nhi"
    cells = [
        {"cell_type": "markdown", "id": f"c{i}", "metadata": {}, "source": f"m{i}"}
        for i in range(200_000)
    ]
    cells.append(
        {"cell_type": "code", "id": "run", "metadata": {}, "source": running, "outputs": []}
    )
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "many.ipynb"
    path.write_text(json.dumps(nb))
    assert path.stat().st_size < kc.MAX_NOTEBOOK_BYTES
    shell = FakeShell(["x = 1", running])
    shell.user_ns["__vsc_ipynb_file__"] = str(path)
    import nbformat

    def validated(*args: object, **kwargs: object) -> None:
        raise AssertionError("the notebook was read with nbformat (validated cell by cell)")

    started = time.monotonic()
    with pytest.MonkeyPatch.context() as patch:
        for name in ("read", "reads", "validate"):
            patch.setattr(nbformat, name, validated)
        found = kc.recent_cells(shell, 2)
    took = time.monotonic() - started
    assert [c.source for c in found] == ["m199998", "m199999"]
    assert took < 30, f"{took:.1f} s to read the cells above"  # a loaded machine's bound


def test_a_broken_notebook_file_or_repr_does_not_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{ not json")

    class Rude:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    shell = FakeShell(["r = Rude()", "r", "%%agent"], outs={2: Rude()})
    shell.user_ns["__vsc_ipynb_file__"] = str(bad)
    cells = kc.recent_cells(shell, 2)
    assert cells[1].outputs[0].startswith("<Rude instance at")  # reprlib says what it is


def test_a_huge_cell_is_clipped_in_its_text(tmp_path: Path) -> None:
    running = "%%agent --cells 1"
    nb = new_notebook(cells=[new_code_cell("z = 0\n" * 100_000), new_code_cell(running)])
    path = tmp_path / "big.ipynb"
    nbformat.write(nb, path)
    shell = FakeShell([running])
    shell.user_ns["__vsc_ipynb_file__"] = str(path)
    (cell,) = kc.recent_cells(shell, 1)
    assert len(cell.to_text()) <= snapshots.CELL_TEXT_CHARS + 100
    assert "more characters" in cell.to_text()


def test_cells_text_keeps_the_nearest_cells() -> None:
    cells = [kc.CellSnapshot(f"c{i} " + "w" * 3000, execution_count=i) for i in range(1, 11)]
    text = kc.cells_text(cells, limit=10_000)
    assert len(text) <= 10_100
    assert "In [10]" in text and "In [1] " not in text
    assert text.startswith("… (") and "earlier cells left out" in text


# -- errors ---------------------------------------------------------------------------------


def test_last_error_names_the_cell_that_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    shell = FakeShell(["def f(d):\n    return d['price']\n", "f({'token': 1})", "%%agent --error"])
    ns: dict[str, Any] = {}
    shell.run(1, ns)
    with pytest.raises(KeyError) as raised:
        shell.run(2, ns)
    monkeypatch.setattr(cell_errors, "REMEMBERED", [])
    monkeypatch.setattr(sys, "last_value", raised.value, raising=False)
    error = kc.last_error(shell)
    assert error is not None
    assert (error.type, error.message, error.execution_count) == ("KeyError", "'price'", 2)
    assert error.cell_source == "f({'token': 1})"
    # both cells named as the notebook shows them, no machinery frame before the first cell
    assert error.traceback.startswith('Traceback (most recent call last):\n  File "In[2]"')
    assert 'File "In[1]", line 2, in f' in error.traceback
    assert "return d['price']" in error.traceback
    assert error.to_text().startswith("KeyError: 'price'\n--- raised in In [2] ---\nf(")


def test_no_last_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cell_errors, "REMEMBERED", [])
    monkeypatch.delattr(sys, "last_value", raising=False)
    assert kc.last_error(FakeShell([])) is None


def test_a_usage_error_does_not_hide_the_last_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from IPython.core.error import UsageError

    monkeypatch.setattr(cell_errors, "REMEMBERED", [])
    monkeypatch.setattr(sys, "last_value", UsageError("--bogus"), raising=False)
    assert kc.last_error(FakeShell([])) is None
    note = cell_errors.note_cell
    note(SimpleNamespace(error_in_exec=KeyError("price")))
    note(SimpleNamespace(error_in_exec=UsageError("unrecognized arguments: --bogus")))
    note(SimpleNamespace(error_in_exec=None))  # a cell that ran fine forgets nothing
    error = kc.last_error(FakeShell([]))
    assert error is not None and (error.type, error.message) == ("KeyError", "'price'")


def test_an_error_is_masked_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    shell = FakeShell(
        [
            f"def boom(n):\n    if n == 0:\n        raise ValueError('{KEY}' * 10**5)\n"
            "    boom(n - 1)\n",
            "boom(900)",
        ]
    )
    ns: dict[str, Any] = {}
    shell.run(1, ns)
    with pytest.raises(ValueError) as raised:
        shell.run(2, ns)
    error = kc.exception_snapshot(raised.value, shell)
    assert KEY not in error.message and KEY not in error.traceback
    assert len(error.message) <= snapshots.MESSAGE_CHARS + 50
    assert "characters of the traceback left out" in error.traceback
    assert error.traceback.rstrip().endswith("[redacted]") or "ValueError" in error.traceback
    text = error.to_text()
    assert len(text) <= snapshots.ERROR_TEXT_CHARS + 100 and KEY not in text


def test_an_exception_object_with_a_cause_and_a_rude_str() -> None:
    class Rude(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no message")

    try:
        try:
            {}["missing"]
        except KeyError as inner:
            raise Rude() from inner
    except Rude as exc:
        caught = exc
    error = kc.exception_snapshot(caught)  # no shell: an object kept in a variable
    assert error.type.endswith("Rude") and error.message == "(its message could not be read)"
    assert "KeyError: 'missing'" in error.traceback
    assert "direct cause" in error.traceback
    assert error.cell_source is None and error.execution_count is None
    assert kc.format_traceback(caught) == error.traceback


# -- in a kernel, through %%agent ------------------------------------------------------------


def _prompts(record: Path) -> list[list[dict[str, Any]]]:
    messages = [json.loads(line) for line in record.read_text().splitlines()]
    return [m["params"]["prompt"] for m in messages if m.get("method") == "session/prompt"]


@pytest.mark.timeout(120)
def test_error_cells_and_an_exception_reach_the_agent(tmp_path: Path) -> None:
    record = tmp_path / "agent.jsonl"
    agent = scripted("--record", str(record))
    nb = execute(
        [
            f"%%agent --agent {agent} --error\nwhy?",  # 0: nothing raised yet
            "def f(d):\n    return d['price']",  # In [2]
            f"secret = '{KEY}'\nf({{'token': secret}})",  # In [3]: KeyError
            "try:\n    f({})\nexcept KeyError as e:\n    exc = e",  # In [4]
            f"%%agent --agent {agent} --bogus\nhi",  # a usage error: not the last error
            f"%%agent --agent {agent} --error --cells 2 --with exc --out r\nwhat went wrong?",
            "import json\nprint(json.dumps(r.prompt))",
        ],
        tmp_path,
        allow_errors=True,
    )
    assert "unrecognized arguments: --bogus" in text(nb.cells[4])
    none_yet = text(nb.cells[0])
    assert "UsageError" in none_yet and "no cell of this kernel has raised an exception" in none_yet
    (sent,) = _prompts(record)
    tags = [b.get("_meta", {}).get("acp_notebook/context") for b in sent]
    assert tags == ["variable", "error", "cells", None]  # no notebook file: no link
    variable, error, cells, prompt = (b["text"] for b in sent)
    # --with exc: the traceback, cells named, not the repr
    assert "an exception:" in variable and "Traceback (most recent call last):" in variable
    assert 'File "In[4]", line 2' in variable and 'File "In[2]", line 2, in f' in variable
    # --error: the last exception raised by a cell, the cell that raised it, masked
    assert error.startswith("<error>KeyError: 'price'\n--- raised in In [3] ---\nsecret = ")
    assert KEY not in error and "[redacted]" in error
    # --cells 2: the two cells above (from the history: nbclient names no notebook file)
    assert "The 2 cells above the prompt's cell, from this kernel's history" in cells
    assert "--- In [4] ---" in cells and "--- In [5] ---" in cells and "In [3]" not in cells
    assert prompt.strip() == "what went wrong?"
    recorded = json.loads(text(nb.cells[6]).strip().splitlines()[-1])
    assert [b.get("tag") for b in recorded[:3]] == ["variable", "error", "cells"]


@pytest.mark.timeout(120)
def test_cells_from_the_notebook_file_and_its_link(tmp_path: Path) -> None:
    record = tmp_path / "agent.jsonl"
    nb = new_nb(
        "# load\nrows = [3, 1, 2]",
        "print(sorted(rows))",
        f"%%agent --agent {scripted('--record', str(record))} --cells 2 --out r\nexplain",
        "import json\nprint(json.dumps(r.prompt))",
    )
    path = tmp_path / "work.ipynb"
    nbformat.write(nb, path)  # saved before it runs, as a front-end saves it
    out = execute(
        nb, tmp_path, env=kernel_env(tmp_path, JPY_SESSION_NAME=str(path)), allow_errors=True
    )
    (sent,) = _prompts(record)
    cells, link, prompt = sent
    assert "from the notebook work.ipynb" in cells["text"]
    assert "--- cell 1 ---\n# load\nrows = [3, 1, 2]" in cells["text"]
    assert "--- cell 2 ---\nprint(sorted(rows))" in cells["text"]  # saved before it ran
    assert prompt["text"].strip() == "explain"
    assert link == {
        "type": "resource_link",
        "uri": path.as_uri(),
        "name": "work.ipynb",
        "mimeType": "application/x-ipynb+json",
    }
    recorded = json.loads(text(out.cells[3]).strip().splitlines()[-1])
    assert recorded[1]["uri"] == "work.ipynb"  # the transcript keeps the path relative
