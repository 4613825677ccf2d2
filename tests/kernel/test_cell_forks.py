"""Forks per cell, in real kernels that get the cell's id as JupyterLab sends it: a cell run
again takes its earlier turn's place in the conversation (an agent that forks), or is appended
and says so once (one that does not); the story outlives a kernel restart.

The scripted agent's `echo_history` step says the first line of every user message the
session's conversation holds before the turn: what the agent knows when the cell runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

from tests.agents.script import script
from tests.kernel.test_replay import run_with_id
from tests.nb_util import (
    MIME_TURN,
    answer,
    data,
    execute,
    kernel_env,
    scripted,
    text,
    transcripts,
)
from tests.shared_kernel import SharedKernel


def body(label: str) -> str:
    return script({"echo_history": True}, {"say": f" {label}"})


@contextmanager
def kernel(tmp_path: Path) -> Iterator[Any]:
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=kernel_env(tmp_path), cwd=str(tmp_path))
    kc = km.client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


class Cells:
    """Runs `%%agent` cells of one session on `kc`, by cell id, as a front-end does."""

    def __init__(self, kc: Any, agent: str) -> None:
        self.kc = kc
        self.agent = agent
        self.shown: list[str] = []  # what the cells displayed besides their turn

    def run(self, cell: str, label: str) -> list[str]:
        """The history the agent had when `cell` (its body labelled `label`) ran: the labels
        of the user messages before it."""
        source = f"%%agent --agent {self.agent} --session s\n{body(label)}"
        status, seen = run_with_id(self.kc, source, cell)
        assert status == "ok", [m["content"] for m in seen if m["msg_type"] == "error"]
        data = [m["content"]["data"] for m in seen if "data" in m["content"]]
        self.shown += [d.get("text/plain", "") for d in data if MIME_TURN not in d]
        text = answer([d for d in data if MIME_TURN in d][-1][MIME_TURN])
        assert text.startswith("HISTORY ") and text.endswith(f" {label}")
        history = json.loads(text[len("HISTORY ") : -len(label) - 1])
        return [label_of(line) for line in history]


def label_of(line: str) -> str:
    return str(json.loads(line[len("#script ") :])[1]["say"]).strip()


def forking(tmp_path: Path, *flags: str) -> str:
    state, record = str(tmp_path / "state"), str(tmp_path / "record.jsonl")
    return scripted("--fork", "--close", "--state-dir", state, "--record", record, *flags)


def sent(tmp_path: Path, method: str) -> list[dict[str, Any]]:
    """What the kernels' clients sent the agent (its --record file), by method."""
    lines = (tmp_path / "record.jsonl").read_text().splitlines()
    return [m for m in map(json.loads, lines) if m.get("method") == method]


def test_a_cell_run_again_replaces_its_turn_and_order_of_runs_counts(tmp_path: Path) -> None:
    with kernel(tmp_path) as kc:
        cells = Cells(kc, forking(tmp_path, "--delete"))
        assert cells.run("c1", "one") == []
        assert cells.run("c2", "two") == ["one"]
        assert cells.run("c3", "three") == ["one", "two"]
        # Cell 2 edited and run again: its turn takes the place of the old one...
        assert cells.run("c2", "TWO") == ["one"]
        # ...and cell 3, run next, comes after it (the order of runs, as with variables).
        assert cells.run("c3", "three") == ["one", "TWO"]
        # The whole notebook again, top to bottom: each cell has the history it had before.
        assert cells.run("c1", "one") == []
        assert cells.run("c2", "TWO") == ["one"]
        assert cells.run("c3", "three") == ["one", "TWO"]
        # A new cell goes on at the end.
        assert cells.run("c4", "four") == ["one", "TWO", "three"]
    assert not any("fork" in shown for shown in cells.shown)
    # A fork per turn: a point before each of the 9 turns, or a fork of one (5 runs again).
    forks = sent(tmp_path, "session/fork")
    assert len(forks) == 9
    # The points that left the story (c3's when c2 ran again, then c2's and c3's when c1
    # did) were deleted; those of the story's cells were not. So was the fork c2's re-run
    # made the session, when c1's replaced it; the session the kernel opened was closed only.
    deleted = [m["params"]["sessionId"] for m in sent(tmp_path, "session/delete")]
    prompted = [m["params"]["sessionId"] for m in sent(tmp_path, "session/prompt")]
    opened, forked_by_rerun = prompted[0], prompted[3]
    assert len(deleted) == 4 and len(set(deleted)) == 4
    assert forked_by_rerun in deleted and opened not in deleted
    assert opened in [m["params"]["sessionId"] for m in sent(tmp_path, "session/close")]


def test_an_agent_that_cannot_fork_appends_and_says_so_once(tmp_path: Path) -> None:
    with kernel(tmp_path) as kc:
        cells = Cells(kc, scripted())
        assert cells.run("c1", "one") == []
        assert cells.run("c2", "two") == ["one"]
        assert not any("fork" in s for s in cells.shown)  # nothing to say at a first run
        assert cells.run("c1", "one") == ["one", "two"]
        assert cells.run("c2", "two") == ["one", "two", "one"]
    said = [s for s in cells.shown if "cannot fork" in s]
    assert len(said) == 1 and "added after the whole conversation" in said[0]


def test_forks_per_cell_can_be_turned_off(tmp_path: Path) -> None:
    with kernel(tmp_path) as kc:
        status, _ = run_with_id(kc, "%config AcpNotebook.fork_cells = False", "config")
        assert status == "ok"
        cells = Cells(kc, forking(tmp_path))
        assert cells.run("c1", "one") == []
        assert cells.run("c1", "one") == ["one"]  # added at the end, as asked: nothing said
    assert not any("fork" in s for s in cells.shown)
    assert sent(tmp_path, "session/fork") == []


def test_the_story_outlives_a_kernel_restart(tmp_path: Path) -> None:
    agent = forking(tmp_path, "--resume")
    with kernel(tmp_path) as kc:
        cells = Cells(kc, agent)
        assert cells.run("c1", "one") == []
        assert cells.run("c2", "two") == ["one"]
    stored = json.loads((tmp_path / ".acp_notebook" / "sessions.json").read_text())
    [entry] = stored["sessions"]
    assert [cell for cell, _ in entry["story"]] == ["c1", "c2"]
    with kernel(tmp_path) as kc:  # the restart: a fresh kernel, the same workspace
        cells = Cells(kc, agent)
        assert cells.run("c2", "two") == ["one"]
        assert cells.run("c3", "three") == ["one", "two"]
    assert any("Resumed session" in s for s in cells.shown)


# -- the session's own system prompt: `%%agent --system-prompt TEXT` ------------------------------


def echoed(nb: Any, index: int) -> str:
    return answer(transcripts(nb.cells[index])[-1])


def test_a_cells_system_prompt_opens_its_session(tmp_path: Path, kernel: SharedKernel) -> None:
    taking = scripted("--system-prompt", "append", "--fork")
    ask = script({"echo_system_prompt": True})
    prompt = {"mode": "append", "content": [{"type": "text", "text": "Be terse."}]}
    nb = execute(
        [
            f"%%agent -a {taking} -s t --system-prompt 'Be terse.'\n{ask}",
            f"%%agent -a {taking} -s t\n{ask}",  # the live session keeps its prompt
            f"%%agent -a {taking} -s t --system-prompt 'Be terse.'\n{ask}",  # the same: fine
            f"%%agent -a {taking} -s t --system-prompt other\n{ask}",
            f"%%agent -a {taking} -s t --new --system-prompt ''\n{ask}",
            "%agent status -s t\nprint(repr(_agent_status['system_prompt']))",
            f"%%agent -a {scripted()} -s n --system-prompt 'Be terse.'\n{ask}",
            f"%%agent -a {scripted()} -s n2 --system-prompt 'Be terse.'\n{ask}",
        ],
        tmp_path,
        kernel=kernel,
        allow_errors=True,
    )
    assert echoed(nb, 0) == echoed(nb, 1) == echoed(nb, 2) == "SYSTEM PROMPT " + json.dumps(prompt)
    assert "opened with another system prompt; add --new" in text(nb.cells[3])
    assert echoed(nb, 4) == "SYSTEM PROMPT null"  # "" sends none
    assert text(nb.cells[5]).strip().splitlines()[-1] == "''"
    said = "takes no system prompt (no sessionCapabilities.systemPrompt)"
    assert said in " ".join(data(nb.cells[6], "text/plain"))
    assert said not in " ".join(data(nb.cells[7], "text/plain"))  # once
    assert "SYSTEM PROMPT" in echoed(nb, 6)  # and the turn went on, with none


def test_turns_of_one_run_of_a_cell_follow_each_other(tmp_path: Path) -> None:
    """A cell that prompts twice in one run (a loop of turns) keeps its second turn after its
    first, with an agent that forks and one that does not (nothing said); run again, with an
    agent that forks, the run's turns take the place of the earlier run's."""
    with kernel(tmp_path) as kc:
        for agent, runs in ((forking(tmp_path), [[], ["a"]]), (scripted(), None)):
            line = f"--agent {agent} --session s-{len(agent)}"
            loop = (
                "ip = get_ipython()\n"
                f"for text in {[body('a'), body('b')]!r}:\n"
                f"    await ip.run_cell_magic('agent', {line!r}, text)\n"
            )
            histories, notes = [], []
            for _ in range(2):  # the cell's run, then the cell run again
                status, seen = run_with_id(kc, loop, f"loop-{len(agent)}")
                assert status == "ok", [m["content"] for m in seen if m["msg_type"] == "error"]
                shown = [m["content"]["data"] for m in seen if "data" in m["content"]]
                notes.append([d.get("text/plain", "") for d in shown if MIME_TURN not in d])
                texts = [answer(d[MIME_TURN]) for d in shown if MIME_TURN in d]
                histories.append([history(t) for t in texts[-2:]])
            # Nothing said of forks in a run's turns, but once for a cell run again that an
            # agent that cannot fork appends.
            assert not any("fork" in n for n in notes[0]), notes
            if runs is None:  # appended: the second run's turns come after the first run's
                assert histories == [[[], ["a"]], [["a", "b"], ["a", "b", "a"]]], histories
                assert sum("cannot fork" in n for n in notes[1]) == 1, notes
            else:  # each run's second turn follows its first; the run again starts afresh
                assert histories == [runs, runs], histories
                assert not any("fork" in n for n in notes[1]), notes


def history(text: str) -> list[str]:
    """The labels of the user messages the agent had before a turn (its `echo_history` answer)."""
    label = text.rsplit(" ", 1)[1]
    return [label_of(line) for line in json.loads(text[len("HISTORY ") : -len(label) - 1])]
