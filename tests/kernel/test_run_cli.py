"""`acp-notebook run` as a user runs it, on real kernels and the demo agent: its `main` called in
the test's process (`run_cli`: the arguments, environment and working directory a user's run has,
stdout a buffer), and as a process where the process is the subject (Ctrl-C: an interrupt saves).

The terminal output of the quickstart is compared with `tests/snapshots/run_quickstart.txt`
after the parts that change from run to run (times, paths, process ids) are normalised. After a
deliberate change of the output, regenerate it with ACP_NOTEBOOK_UPDATE_SNAPSHOTS=1 and read the
diff before committing it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from acp_notebook.run import cli
from tests.agents.script import agent_command, script
from tests.nb_util import (
    KERNELSPEC,
    MIME_TURN,
    RecordingClient,
    answer,
    execute,
    kernel_env,
    outputs,
    scripted,
    transcripts,
)
from tests.shared_kernel import SharedKernel

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "tests" / "snapshots" / "run_quickstart.txt"


def run_cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`acp-notebook run ARGS` in tmp_path: the command's `main` in this process (a process of
    its own cost ~2 s of CPU a run to import what this one has), with the environment of
    `kernel_env` and stdout a buffer (plain text, as a pipe). Its exit status is what `main`
    returns, or the code of the SystemExit a usage error raises (its message on stderr)."""
    environ = kernel_env(tmp_path, PYTHONPATH=str(REPO), **env)
    environ.pop("NO_COLOR", None)
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(stderr):
        for name in set(os.environ) - set(environ):
            patch.delenv(name)
        for name, value in environ.items():
            patch.setenv(name, value)
        patch.chdir(tmp_path)
        try:
            status = cli.main(["run", *args], stdout=stdout)
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
    return subprocess.CompletedProcess(args, status, stdout.getvalue(), stderr.getvalue())


def notebook(path: Path, *cells: str, tags: dict[int, list[str]] | None = None) -> Path:
    nb = new_notebook(cells=[new_code_cell(s) for s in cells])
    for index, cell_tags in (tags or {}).items():
        nb.cells[index].metadata["tags"] = cell_tags
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nbformat.write(nb, path)
    return path


def normalise(text: str, tmp_path: Path) -> str:
    text = text.replace(str(tmp_path), "<tmp>")
    text = re.sub(r"\d+(\.\d+)?\s(s|min|h)\b", "<t>", text)
    text = re.sub(r"(<t> )+<t>", "<t>", text)
    return re.sub(r"pid \d+", "pid <n>", text)


def test_quickstart_prints_every_turn_and_saves_its_outputs(tmp_path: Path) -> None:
    shutil.copy(REPO / "notebooks" / "quickstart.ipynb", tmp_path)
    done = run_cli(tmp_path, "quickstart.ipynb")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\x1b" not in done.stdout  # not a terminal: no colour
    got = normalise(done.stdout, tmp_path)
    if os.environ.get("ACP_NOTEBOOK_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(got)
    assert got == SNAPSHOT.read_text()

    saved = nbformat.read(tmp_path / "quickstart.out.ipynb", as_version=4)
    first = next(c for c in saved.cells if c.source.startswith("%%agent --out first"))
    # The record once, where the live display was (the cell's value adds no second copy).
    (result,) = outputs(first, MIME_TURN)
    assert result["output_type"] == "display_data"
    assert result["data"][MIME_TURN]["success"] is True
    printed = next(c for c in saved.cells if c.source.startswith("print(first.success"))
    assert outputs(printed)[0]["text"].startswith("True end_turn")
    original = nbformat.read(REPO / "notebooks" / "quickstart.ipynb", as_version=4)
    assert [c.source for c in saved.cells] == [c.source for c in original.cells]


def test_a_link_planted_at_the_output_is_replaced_not_written_through(tmp_path: Path) -> None:
    """The run wrote the executed notebook by opening its name: a link the agent's shell put
    there during the run (here: a cell) had the file it led to truncated and overwritten. Now
    the notebook is a new file renamed over the name, and the link's target is untouched."""
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("the victim's data\n")
    notebook(tmp_path / "x.ipynb", f"import os\nos.symlink({str(victim)!r}, 'x.out.ipynb')")
    done = run_cli(tmp_path, "x.ipynb")
    assert done.returncode == 0, done.stdout + done.stderr
    assert victim.read_text() == "the victim's data\n"
    saved = tmp_path / "x.out.ipynb"
    assert not saved.is_symlink() and "os.symlink" in nbformat.read(saved, 4).cells[0].source


def test_a_failed_turn_exits_1_with_its_turnfailed_paragraph(tmp_path: Path) -> None:
    # --quiet: no live display, only the failed turn's record, shown when it ends.
    notebook(tmp_path / "fails.ipynb", "%%agent --quiet\n/fail on purpose", "print('not reached')")
    done = run_cli(tmp_path, "fails.ipynb", "--output", "saved.ipynb")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "[1/2] %%agent --quiet … failed" in out
    assert re.search(r"\n  — acp_notebook demo agent · .* · failed\n", out), out
    # The paragraph `TurnFailed` carries, line by line, as the cell's error shows it.
    saved = nbformat.read(tmp_path / "saved.ipynb", as_version=4)
    (error,) = [o for o in outputs(saved.cells[0]) if o["output_type"] == "error"]
    assert error["ename"] == "TurnFailed"
    for line in error["evalue"].splitlines():
        assert f"  {line}".rstrip() in out
    assert "demo failure" in error["evalue"]
    # Stated once: the record above the paragraph says the turn failed, not the error again.
    assert out.count("demo failure") == 1, out
    assert "✗ failed: the error is below." in out
    assert outputs(saved.cells[1]) == []  # the run stopped at the failed cell
    assert re.search(r"✗ fails\.ipynb in .*failed at cell 1 of 2 .*→ saved\.ipynb", out)


def test_the_answer_is_printed_while_the_turn_runs_and_an_interrupt_saves(tmp_path: Path) -> None:
    # The agent says a line, then sleeps ten minutes: the line can only be read in time if it
    # is printed from the live updates, not from the cell's final value.
    body = script({"say": "streamed line\nnot yet whole"}, {"sleep": 600})
    notebook(tmp_path / "slow.ipynb", f"%%agent\n{body}", "print('not reached')")
    environ = kernel_env(tmp_path, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "acp_notebook.run", "run", "slow.ipynb"]
    command += ["--agent", shlex.join(agent_command())]
    with subprocess.Popen(
        command, cwd=tmp_path, env=environ, stdout=subprocess.PIPE, text=True
    ) as runner:
        assert runner.stdout is not None
        seen = []
        for line in runner.stdout:
            seen.append(line)
            if "streamed line" in line:
                break
        assert seen[-1] == "    streamed line\n", seen
        runner.send_signal(signal.SIGINT)  # Ctrl-C: the kernel is stopped, the notebook saved
        rest = runner.stdout.read()
        assert runner.wait(60) == 1
    # nbclient answers Ctrl-C by interrupting the kernel and shutting it down: the cell ends
    # either as the kernel's TurnInterrupted (a failed cell, "·") or as the kernel gone (": why").
    assert re.search(r"✗ slow\.ipynb in .*: failed at cell 1 of 2(: | · )", rest), rest
    saved = nbformat.read(tmp_path / "slow.out.ipynb", as_version=4)
    assert outputs(saved.cells[1]) == []


@pytest.mark.parametrize("live", ["1", ""])
def test_live_updates_carry_the_masked_transcript_only_for_the_runner(
    live: str, tmp_path: Path, kernel: SharedKernel
) -> None:
    key = "sk-test-0123456789abcdefghijklmn"
    steps = [{"say": "the key is "}, {"sleep": 0.3}, {"say": f"{key} end"}, {"sleep": 0.3}]
    if not live:  # a long answer first: redrawn in a notebook too, within its share of bytes
        # (live_meter.py). Not for the runner, whose updates are not metered: a redraw of 40,000
        # characters on a loaded machine took most of the turn, which then had one update.
        steps = [{"huge_say": 40_000}, *steps]
    clients: list[RecordingClient] = []
    env = kernel_env(tmp_path, DEMO_API_KEY=key, ACP_NOTEBOOK_LIVE_TRANSCRIPT=live)
    nb = execute([f"%%agent --agent {scripted()}\n{script(*steps)}"], tmp_path, env=env,
                 client_out=clients, kernel=kernel)  # fmt: skip
    updates = [m["content"]["data"] for m in clients[0].of_type("update_display_data", 0)]
    # The last update is the record, which takes the live display's place (with its transcript).
    assert updates and updates[-1][MIME_TURN]["success"] is True
    updates = updates[:-1]
    live_turns = [d[MIME_TURN] for d in updates if MIME_TURN in d]
    if live:
        assert len(live_turns) >= 2 and live_turns[0]["success"] is None
        assert any("the key is" in answer(t) for t in live_turns)
    else:
        assert live_turns == [] and updates  # as before: plain text and HTML only
    kinds = ("display_data", "update_display_data", "execute_result")
    shown = json.dumps([m["content"] for k in kinds for m in clients[0].of_type(k, 0)])
    assert "the key is" in shown and key[:12] not in shown
    # The saved notebook is the same either way: the record, not the live updates, in the live
    # display's place, and no empty output beside it.
    saved = outputs(nb.cells[0])
    assert [o["output_type"] for o in saved] == ["display_data"]
    assert MIME_TURN in saved[0]["data"] and saved[0]["data"]["text/html"]


def test_parameters_and_settings_reach_the_kernel(tmp_path: Path) -> None:
    notebook(
        tmp_path / "p.ipynb",
        "n = 1\nname = 'default'",
        "import os\n"
        "magics = get_ipython().find_cell_magic('agent').__self__\n"
        "print(repr(n), repr(name), repr(items))\n"
        "print(magics.allow, magics.deny, magics.timeout)\n"
        "print([os.environ.get('ACP_NOTEBOOK_' + k) for k in "
        "('AGENT', 'REPLAY', 'REPLAY_MODE', 'LIVE_TRANSCRIPT')])",
        tags={0: ["parameters"]},
    )
    args = ["p.ipynb", "-p", "n=5", "-p", "name=Ada Lovelace", "-p", "items=[1, 'two']"]
    args += ["--allow", "read,search", "--deny", "execute", "--timeout", "30", "--agent", "demo"]
    done = run_cli(tmp_path, *args, "--replay=fill", "--output", "out/")
    assert done.returncode == 0, done.stdout + done.stderr
    saved = nbformat.read(tmp_path / "out" / "p.ipynb", as_version=4)
    injected = saved.cells[1]
    assert injected.metadata["tags"] == ["injected-parameters"]
    assert "n = 5" in injected.source
    printed = outputs(saved.cells[2])[0]["text"].splitlines()
    assert printed[0] == "5 'Ada Lovelace' [1, 'two']"
    assert printed[1] == "['read', 'search'] ['execute'] 30.0"
    path = str((tmp_path / "p.ipynb").resolve())
    assert printed[2] == str(["demo", path, "fill", "1"])
    # --replay alone: the notebook's path, no mode; the input notebook is left as it was.
    done = run_cli(tmp_path, "p.ipynb", "-p", "items=0", "--replay")
    assert done.returncode == 0, done.stdout + done.stderr
    saved = nbformat.read(tmp_path / "p.out.ipynb", as_version=4)
    assert outputs(saved.cells[2])[0]["text"].splitlines()[2] == str([None, path, None, "1"])
    assert len(nbformat.read(tmp_path / "p.ipynb", as_version=4).cells) == 2


def test_two_notebooks_run_side_by_side_with_j2(tmp_path: Path) -> None:
    # Each notebook announces itself and then waits for the other: only a parallel run passes.
    wait = (
        "import pathlib, time\n"
        "pathlib.Path('{me}.started').touch()\n"
        "deadline = time.monotonic() + 60\n"
        "while not pathlib.Path('{other}.started').exists():\n"
        "    assert time.monotonic() < deadline, 'the other notebook never started'\n"
        "    time.sleep(0.05)\n"
    )
    notebook(tmp_path / "a.ipynb", wait.format(me="a", other="b"), "%%agent\nhello from a")
    notebook(tmp_path / "b.ipynb", wait.format(me="b", other="a"))
    done = run_cli(tmp_path, "a.ipynb", "b.ipynb", "-j", "2", "--output", "runs")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [x for x in done.stdout.splitlines() if x]
    body, summary = lines[:-3], lines[-3:]
    assert all(x.startswith(("[a.ipynb] ", "[b.ipynb] ")) for x in body), body
    assert "[a.ipynb]     > hello from a" in body
    assert summary[0].startswith("✓ a.ipynb") and summary[1].startswith("✓ b.ipynb")
    assert summary[2].startswith("2 notebooks, 0 failed · 1 turn")
    a, b = (nbformat.read(tmp_path / "runs" / f"{n}.ipynb", as_version=4) for n in "ab")
    assert outputs(a.cells[1], MIME_TURN) and b.cells[0].execution_count == 1


def test_quiet_prints_only_failures_and_the_summary(tmp_path: Path) -> None:
    notebook(tmp_path / "q.ipynb", "%%agent\nfirst", "%%agent\n/fail now")
    done = run_cli(tmp_path, "q.ipynb", "--quiet")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [x for x in done.stdout.splitlines() if x]
    assert lines[0].startswith("[2/2] %%agent … failed")
    assert any("demo failure" in x for x in lines[1:-1])
    assert lines[-1].startswith("✗ q.ipynb") and "2 turns (1 failed)" in lines[-1]
    assert not any(x.lstrip().startswith(("▸", "✓ read", "Plan", "[1/2]")) for x in lines)


def test_an_output_that_is_a_folder_fails_that_notebook_with_a_reason(tmp_path: Path) -> None:
    # The agent of a run can make a folder at the output's name: the save failed with a
    # traceback out of the command, and the summary never came.
    notebook(tmp_path / "n.ipynb", "print('ran')")
    (tmp_path / "n.out.ipynb").mkdir()
    done = run_cli(tmp_path, "n.ipynb")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert "✗ cannot save" in done.stdout and "it is a folder" in done.stdout, done.stdout
    assert "✗ n.ipynb in" in done.stdout, done.stdout  # the summary line, failed
    assert (tmp_path / "n.out.ipynb").is_dir()  # nothing written into or over it


def test_a_failed_cells_reason_is_printed_escaped_and_bounded(tmp_path: Path) -> None:
    # A usage error shows no error output (IPython prints it to stderr): the runner said only
    # "failed 0.3 s". Its text is printed, as every failed cell's reason is, fit for a terminal.
    notebook(tmp_path / "unknown.ipynb", "%%agent --agent unknown-name\nhello")
    hostile = "\\x1b]0;pwned\\x07\\x1b[2Jbad\\rcell" + "x" * 100_000 + "\\n" * 10_000
    notebook(
        tmp_path / "hostile.ipynb",
        f"from IPython.core.error import UsageError\nraise UsageError('{hostile}')",
    )
    done = run_cli(tmp_path, "unknown.ipynb", "hostile.ipynb")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert re.search(
        r"\[1/1\] %%agent --agent unknown-name … failed .*\n"
        r"  UsageError: unknown agent 'unknown-name'\. Known agents: ",
        out,
    ), out
    [failed] = [x for x in out.splitlines() if "[1/1] from IPython" in x]
    reason = out.split(failed, 1)[1].splitlines()[1:]
    # The escapes gone, the carriage return a line break, the long line cut; 10,000 lines not.
    assert reason[0] == "  UsageError: bad", reason[:2]
    assert reason[1].startswith("  cellxxx") and reason[1].endswith("…") and len(reason[1]) == 1002
    assert len(out) < 5_000, len(out)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out), repr(out[:2000])


@pytest.mark.parametrize(
    "args",
    [
        ["missing.ipynb"],
        ["x.ipynb", "-p", "not an assignment"],
        ["x.ipynb", "--allow", "reed"],
        ["x.ipynb", "--timeout", "0"],
        ["x.ipynb", "-j", "0"],
        ["x.ipynb", "--output", "x.ipynb"],
        ["x.ipynb", "--replay=never"],
    ],
)
def test_usage_errors_exit_2_before_any_kernel(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook(tmp_path / "x.ipynb", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", *args])
    assert exit_.value.code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.ipynb"]  # nothing ran or saved


def test_help_of_the_command_and_of_run(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["run", "--help"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage: acp-notebook [-h] COMMAND" in out
    for option in ("--output", "--agent", "--allow", "--deny", "-p", "--timeout", "--replay"):
        assert option in out
    assert "--replay[=fill]" in out and "Exit status: 0" in out


def test_the_console_script_is_registered() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["acp-notebook"] == "acp_notebook.run.cli:main"
    assert callable(cli.main)


def test_notebook_names_are_printed_escaped(tmp_path: Path) -> None:
    """The agent's shell names files in the workspace, and `acp-notebook run *.ipynb` picks
    them up: a name's escapes (window title, clear screen) reached the terminal in the summary,
    and a dangling link's in the usage error. Every line is written with its controls escaped."""
    title, clear = "\x1b]0;pwned\x07", "\x1b[2J"
    (tmp_path / f"a{title}{clear}.ipynb").write_text("not json")
    (tmp_path / f"b\u202e{clear}.ipynb").symlink_to(tmp_path / "nowhere")
    done = run_cli(tmp_path, f"a{title}{clear}.ipynb")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "a\\x1b]0;pwned\\x07\\x1b[2J.ipynb" in done.stdout, done.stdout
    missing = run_cli(tmp_path, f"b\u202e{clear}.ipynb")
    assert missing.returncode == 2 and "b\\u202e\\x1b[2J.ipynb" in missing.stderr, missing.stderr
    for said in (done.stdout, missing.stderr):
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", said), repr(said)


INSERTS = [
    {"name": "insert_cell", "arguments": {"source": "made = x + 1", "run": True}},
    {"name": "insert_cell", "arguments": {"source": "# Notes", "cell_type": "markdown"}},
    {"name": "insert_cell", "arguments": {"source": "not_run = 1"}},
    {"name": "insert_cell", "arguments": {"source": "ran_after = made * 10", "run": True}},
]


@pytest.mark.timeout(240)
def test_cells_the_agent_inserts_are_saved_below_its_cell_and_run_in_order(
    tmp_path: Path,
) -> None:
    """Headless (issue 22 item 4): with --allow edit,execute the inserted cells are saved right
    below the agent's cell, in order, and those it ran run before the next cell; with --allow
    execute only, the inserts are rejected and the notebook keeps its cells."""
    prompt = script({"mcp": "kernel", "calls": INSERTS})
    agent = f"%%agent --agent {scripted()} --session s\n{prompt}"
    last = "print(made, ran_after, 'not_run' in globals())"
    notebook(tmp_path / "w.ipynb", "x = 1", agent, last)
    done = run_cli(tmp_path, "w.ipynb", "--allow", "edit,execute")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "+ 4 cell(s) inserted below, 2 to run" in done.stdout
    saved = nbformat.read(tmp_path / "w.out.ipynb", as_version=4)
    got = [(c.cell_type, c.source, c.get("execution_count")) for c in saved.cells]
    assert got == [
        ("code", "x = 1", 1),
        ("code", agent, 2),
        ("code", "made = x + 1", 3),
        ("markdown", "# Notes", None),
        ("code", "not_run = 1", None),
        ("code", "ran_after = made * 10", 4),
        ("code", last, 5),
    ]
    assert outputs(saved.cells[6])[0]["text"] == "2 20 False\n"
    # The cells are not outputs of the agent's cell; its agent was told where they went.
    assert "vnd.acp-notebook.cell" not in json.dumps(saved.cells[1].outputs)
    (record,) = transcripts(saved.cells[1])
    said = "".join(p["text"] for p in record["parts"] if p.get("type") == "message")
    answers = [c["text"] for c in json.loads(said.removeprefix("MCP "))[:4]]
    assert all(a.startswith("inserted below your %%agent cell") for a in answers), answers
    assert "it runs after your %%agent cell ends" in answers[0]
    assert "runs after" not in answers[2]

    done = run_cli(tmp_path, "w.ipynb", "--allow", "execute")
    assert done.returncode == 1, done.stdout + done.stderr  # `made` was never defined
    saved = nbformat.read(tmp_path / "w.out.ipynb", as_version=4)
    assert [c.source for c in saved.cells] == ["x = 1", agent, last]
    (record,) = transcripts(saved.cells[1])
    asked = [p for p in record["parts"] if p.get("type") == "permission"]
    assert [a["optionId"] for a in asked] == ["reject"] * 4
