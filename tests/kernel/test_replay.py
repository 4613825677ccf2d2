"""Replay (`ACP_NOTEBOOK_REPLAY`): `%%agent` cells served from a recorded notebook, no agent.

Each test records a notebook with a real agent (the demo agent, or the scripted agent named in
an agents file), saves it, then executes it again in a kernel whose agents cannot run (the
agents file names a command that does not exist; for the quickstart, PATH is empty too), and
checks what a CI user relies on: the same values, the same records, a changed cell that fails
naming itself, `fill` running only the changed cell, a recorded failure failing again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest

from acp_notebook.errors import ReplayError
from acp_notebook.notebook.recording import load
from acp_notebook.protocol.turn import TurnResult, compact
from tests.agents.script import agent_command, script
from tests.nb_util import MIME_TURN, answer, execute, kernel_env, new_nb, outputs, text, transcripts
from tests.shared_kernel import SharedKernel

QUICKSTART = Path(__file__).parents[2] / "notebooks" / "quickstart.ipynb"
NOTE = "Replayed from the recorded notebook"


def agents_file(tmp_path: Path, name: str, command: list[str]) -> Path:
    """An agents file whose agent `rec` is `command`."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f"[agents.rec]\ncommand = {json.dumps(command)}\n")
    return path


def replay_env(tmp_path: Path, recorded: Path, agents: Path, **extra: str) -> dict[str, str]:
    return kernel_env(
        tmp_path,
        ACP_NOTEBOOK_REPLAY=str(recorded),
        ACP_NOTEBOOK_AGENTS_FILE=str(agents),
        **extra,
    )


def no_agent(tmp_path: Path) -> Path:
    """An agents file whose `rec` cannot start: any attempt to run it fails the cell."""
    return agents_file(tmp_path, "missing", [str(tmp_path / "no-such-agent")])


def prompts(log: Path) -> list[str]:
    """The prompt texts the scripted agent received (its --record log), in order."""
    if not log.exists():
        return []
    found = []
    for line in log.read_text().splitlines():
        msg = json.loads(line)
        if msg.get("method") == "session/prompt":
            found.append(msg["params"]["prompt"][0]["text"].strip())
    return found


def value_records(cell: Any) -> list[dict[str, Any]]:
    """The cell's records: its live display's, where the view became the record, or its value's
    (`--quiet`: no live display)."""
    return [o["data"][MIME_TURN] for o in outputs(cell, MIME_TURN)]


def notes(cell: Any) -> list[str]:
    return [
        o["data"]["text/plain"]
        for o in outputs(cell, "text/plain")
        if NOTE in o["data"]["text/plain"]
    ]


def record(tmp_path: Path, sources: list[str], log: Path, **kwargs: Any) -> Path:
    """Execute `sources` with the scripted agent as `rec`; save and return the notebook."""
    agents = agents_file(tmp_path, "scripted", agent_command("--record", str(log)))
    nb = execute(
        new_nb(*sources),
        tmp_path,
        env=kernel_env(tmp_path, ACP_NOTEBOOK_AGENTS_FILE=str(agents)),
        **kwargs,
    )
    path = tmp_path / "recorded.ipynb"
    nbformat.write(nb, path)
    return path


# -- the quickstart, replayed with no agent on PATH ---------------------------------------------


def test_quickstart_replays_with_no_agent_command_on_path(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    shutil.copy(QUICKSTART, tmp_path / "quickstart.ipynb")
    first = execute(
        nbformat.read(tmp_path / "quickstart.ipynb", as_version=4),
        tmp_path,
        timeout=120,
        kernel=kernel,
    )
    recorded = tmp_path / "recorded.ipynb"
    nbformat.write(first, recorded)

    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = kernel_env(
        tmp_path,
        ACP_NOTEBOOK_REPLAY=str(recorded),
        ACP_NOTEBOOK_AGENT=str(tmp_path / "no-such-agent"),  # not the demo agent either
        PATH=str(empty),
    )
    again = execute(
        nbformat.read(QUICKSTART, as_version=4), tmp_path, env=env, timeout=120, kernel=kernel
    )

    agent_cells = [i for i, c in enumerate(again.cells) if c.source.startswith("%%agent")]
    assert len(agent_cells) == 2
    for i in agent_cells:
        was, now = value_records(first.cells[i]), value_records(again.cells[i])
        assert len(was) == 1 and now == was, f"cell {i}: the record differs"
        assert notes(again.cells[i]), f"cell {i} does not say it was replayed"
        assert not notes(first.cells[i])
        # The value is the recorded TurnResult: read back, it writes the same transcript (as a
        # record saves it: without the answer and thoughts its parts hold).
        assert "text" not in was[0] and "thoughts" not in was[0]
        assert compact(TurnResult.from_json(was[0]).to_json()) == was[0]
    # The cell after the first prints `first` (--out): success, text, tool calls, usage.
    printed = agent_cells[0] + 1
    assert text(again.cells[printed]) == text(first.cells[printed])
    assert "True end_turn" in text(again.cells[printed])
    # %agent status: no session was opened, so no agent ran.
    status = next(i for i, c in enumerate(again.cells) if c.source == "%agent status")
    assert "no-such-agent" not in text(again.cells[status]) or "running" not in text(
        again.cells[status]
    )


# -- scripted agent: values, changes, fill, failures --------------------------------------------


CELLS = [
    "%%agent --agent rec --out a\nfirst question",
    "print('A', a.text)",
    "%%agent --agent rec --out b --quiet\nsecond question",
    "print('B', b.text)",
]


def test_replay_serves_values_without_the_agent_and_fails_a_changed_cell(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    log = tmp_path / "agent.jsonl"
    recorded = record(tmp_path, CELLS, log, kernel=kernel)
    assert prompts(log) == ["first question", "second question"]
    was = nbformat.read(recorded, as_version=4)

    # The same notebook, no agent that can run: served from the recording.
    again = execute(
        new_nb(*CELLS),
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        kernel=kernel,
    )
    assert text(again.cells[1]).strip() == "A echo: first question"
    assert text(again.cells[3]).strip() == "B echo: second question"
    for i in (0, 2):
        assert value_records(again.cells[i]) == value_records(was.cells[i])
    assert prompts(log) == ["first question", "second question"]  # nothing asked again

    # A changed prompt fails, naming the cell and what changed; the cell before still replays.
    changed = [*CELLS]
    changed[2] = "%%agent --agent rec --out b\nsecond question, changed"
    nb = execute(
        new_nb(*changed),
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        allow_errors=True,
        kernel=kernel,
    )
    assert text(nb.cells[1]).strip() == "A echo: first question"
    [error] = [o for o in outputs(nb.cells[2]) if o.output_type == "error"]
    assert error.ename == "ReplayError"
    assert "%%agent cell #2 (cell 2 of the recording" in error.evalue
    assert (
        "the prompt (line 1: recorded 'second question', now 'second question, changed')"
        in error.evalue
    )
    assert "ACP_NOTEBOOK_REPLAY_MODE=fill" in error.evalue
    assert "Traceback" not in "\n".join(error.traceback)

    # Changed options fail the same way; --out and --quiet are not compared.
    options = [*CELLS]
    options[0] = "%%agent --agent rec --out other --deny edit\nfirst question"
    options[1] = "print('A', other.text)"
    nb = execute(
        new_nb(*options),
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        allow_errors=True,
        kernel=kernel,
    )
    [error] = [o for o in outputs(nb.cells[0]) if o.output_type == "error"]
    assert (
        "%%agent cell #1" in error.evalue and "--deny (recorded [], now ['edit'])" in error.evalue
    )
    assert "--out" not in error.evalue
    assert prompts(log) == ["first question", "second question"]


def test_the_recorded_notebook_edited_then_replayed_fails_the_edited_cell(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    # Record, edit a cell of that same notebook (its outputs, the record, stay), replay it: what
    # the cell is compared with is what its turn was asked, not the edited source.
    log = tmp_path / "agent.jsonl"
    recorded = record(tmp_path, CELLS, log, kernel=kernel)
    edited = nbformat.read(recorded, as_version=4)
    edited.cells[2].source = "%%agent --agent rec --out b --quiet\nsecond question, edited"
    edited.cells[0].source = "%%agent --agent rec --out a --deny edit\nfirst question"
    nbformat.write(edited, recorded)
    nb = execute(
        edited,
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        allow_errors=True,
        kernel=kernel,
    )
    [error] = [o for o in outputs(nb.cells[0]) if o.output_type == "error"]
    assert error.ename == "ReplayError" and "%%agent cell #1" in error.evalue
    assert "--deny (recorded [], now ['edit'])" in error.evalue
    [error] = [o for o in outputs(nb.cells[2]) if o.output_type == "error"]
    assert error.ename == "ReplayError" and "%%agent cell #2" in error.evalue
    assert (
        "the prompt (line 1: recorded 'second question', now 'second question, edited')"
        in error.evalue
    )
    assert prompts(log) == ["first question", "second question"]


def test_fill_runs_the_agent_for_the_changed_cell_only(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    log = tmp_path / "agent.jsonl"
    recorded = record(tmp_path, CELLS, log, kernel=kernel)
    changed = [*CELLS]
    changed[2] = "%%agent --agent rec --out b\nsecond question, changed"
    fill_log = tmp_path / "fill.jsonl"
    agents = agents_file(tmp_path, "fill", agent_command("--record", str(fill_log)))
    nb = execute(
        new_nb(*changed),
        tmp_path,
        env=replay_env(tmp_path, recorded, agents, ACP_NOTEBOOK_REPLAY_MODE="fill"),
        kernel=kernel,
    )
    assert prompts(fill_log) == ["second question, changed"]
    assert text(nb.cells[1]).strip() == "A echo: first question"
    assert notes(nb.cells[0]) and not notes(nb.cells[2])
    assert text(nb.cells[3]).strip() == "B echo: second question, changed"
    said = [o["data"]["text/plain"] for o in outputs(nb.cells[2], "text/plain")]
    assert any("Not replayed" in s and "the agent runs for this cell" in s for s in said)


def test_a_recorded_failure_fails_again_with_its_paragraph(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    failing = "%%agent --agent rec --out f\n" + script(
        {"say": "half an answer"}, {"error": {"code": -32000, "message": "the model is gone"}}
    )
    cells = [failing, "print('F', f.success, f.error)"]
    log = tmp_path / "agent.jsonl"
    recorded = record(tmp_path, cells, log, allow_errors=True, kernel=kernel)
    was = nbformat.read(recorded, as_version=4)
    [recorded_error] = [o for o in outputs(was.cells[0]) if o.output_type == "error"]
    assert recorded_error.ename == "TurnFailed"

    nb = execute(
        new_nb(*cells),
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        allow_errors=True,
        kernel=kernel,
    )
    [error] = [o for o in outputs(nb.cells[0]) if o.output_type == "error"]
    assert error.ename == "TurnFailed" and error.evalue == recorded_error.evalue
    assert "the model is gone" in error.evalue
    assert transcripts(nb.cells[0]) == transcripts(was.cells[0])
    assert transcripts(nb.cells[0])[0]["success"] is False
    assert text(nb.cells[1]) == text(was.cells[1])  # --out is bound to the failed result too
    assert len(prompts(log)) == 1


def test_a_structured_answer_replays_as_the_schemas_object(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    answer = '```json\n{"name": "Lyon", "population": 522000}\n```'
    cells = [
        "from pydantic import BaseModel\n"
        "class City(BaseModel):\n    name: str\n    population: int",
        f"%%agent --agent rec --schema City --out c\n{script({'say': answer})}",
        "print(repr(c.output), c.output_json)",
    ]
    log = tmp_path / "agent.jsonl"
    recorded = record(tmp_path, cells, log, kernel=kernel)
    nb = execute(
        new_nb(*cells),
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        kernel=kernel,
    )
    shown = text(nb.cells[2])
    assert "City(name='Lyon', population=522000)" in shown, shown
    assert "{'name': 'Lyon', 'population': 522000}" in shown
    # A schema that no longer fits the recorded answer fails the replay, saying so.
    changed = [cells[0] + "\n    mayor: str", *cells[1:]]
    nb = execute(
        new_nb(*changed),
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        allow_errors=True,
        kernel=kernel,
    )
    [error] = [o for o in outputs(nb.cells[1]) if o.output_type == "error"]
    assert error.ename == "ReplayError" and "no longer fits --schema City" in error.evalue
    assert len(prompts(log)) == 1


def test_background_replays_as_a_finished_handle(tmp_path: Path, kernel: SharedKernel) -> None:
    log = tmp_path / "agent.jsonl"
    wait = "h = _\nr = await h.finished\nprint('R', r.text.strip(), h.result is r)"
    recorded = record(
        tmp_path,
        [
            "%%agent --agent rec\nin the background",
            "%%agent --agent rec --background\nlater",
            wait,
        ],
        log,
        kernel=kernel,
    )
    cells = [
        "%%agent --agent rec --background\nin the background",  # --background is not compared
        wait,
        "%%agent --agent rec --background\nlater",
    ]
    nb = execute(
        new_nb(*cells),
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        allow_errors=True,
        kernel=kernel,
    )
    # The record is shown at once, and the value is a handle whose turn has finished.
    assert [answer(t).strip() for t in transcripts(nb.cells[0])] == ["echo: in the background"]
    assert "replayed: already finished" in text(nb.cells[0])
    assert text(nb.cells[1]).strip() == "R echo: in the background True"
    # A headless run never saves a background turn's record (it arrives after the cell ended):
    # such a cell cannot be replayed, and the error says why.
    [error] = [o for o in outputs(nb.cells[2]) if o.output_type == "error"]
    assert error.ename == "ReplayError" and "%%agent cell #2" in error.evalue
    assert "it ran with --background, whose record a headless run does not keep" in error.evalue
    assert prompts(log) == ["in the background", "later"]


def test_malformed_recordings_give_a_clear_error(tmp_path: Path, kernel: SharedKernel) -> None:
    log = tmp_path / "agent.jsonl"
    recorded = record(tmp_path, CELLS, log, kernel=kernel)
    nb = nbformat.read(recorded, as_version=4)
    raw = json.loads(recorded.read_text())
    # Cell 0: the transcript saved as a string that is not JSON; cell 2: a JSON list.
    for index, bad in ((0, "{not json"), (2, [1, 2])):
        [out] = [o for o in raw["cells"][index]["outputs"] if MIME_TURN in o.get("data", {})]
        out["data"][MIME_TURN] = bad
    recorded.write_text(json.dumps(raw))
    again = execute(
        nb,
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        allow_errors=True,
        kernel=kernel,
    )
    [first] = [o for o in outputs(again.cells[0]) if o.output_type == "error"]
    assert first.ename == "ReplayError"
    assert "%%agent cell #1" in first.evalue and "malformed: invalid JSON" in first.evalue
    [second] = [o for o in outputs(again.cells[2]) if o.output_type == "error"]
    assert "%%agent cell #2" in second.evalue and "not a finished turn" in second.evalue

    # A file that is not a notebook at all fails the first %%agent cell, saying so.
    recorded.write_text("{" * 10)
    again = execute(
        nb,
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        allow_errors=True,
        kernel=kernel,
    )
    [error] = [o for o in outputs(again.cells[0]) if o.output_type == "error"]
    assert error.ename == "ReplayError" and "is not a notebook: invalid JSON" in error.evalue
    assert prompts(log) == ["first question", "second question"]


# -- without a kernel ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "junk",
    [
        None,
        [],
        "text",
        {"parts": "x", "success": "yes", "usage": 5, "tokens": [], "plan": {}, "dropped": []},
        {"parts": [1, "x", {"type": "weird", "id": []}, {"type": "tool_call"}], "text": 3},
        {"success": True, "duration": float("nan"), "cost": 10**400, "dropped": {"x": "y", 1: 2}},
    ],
)
def test_turn_result_from_json_is_total(junk: Any) -> None:
    from acp_notebook.protocol.refold import refold

    for result in (TurnResult.from_json(junk), refold(junk)):  # a replay folds it again
        assert isinstance(result.success, bool) and isinstance(result.text, str)
        json.dumps(result.to_json(), allow_nan=False)


def test_a_refolded_recording_keeps_its_counts_and_ids() -> None:
    from acp_notebook.protocol.refold import refold

    recorded = {
        "success": True,
        "dropped": {"parts": 7, "{0.__class__}": 1, "text_chars": "9"},
        "parts": [
            {
                "type": "error",
                "id": "e1",
                "level": "warning",
                "message": "The agent sent more than the client keeps; left out: 7 parts",
            },
            {"type": "message", "id": "m9", "role": "agent", "text": "hi"},
            {
                "type": "permission",
                "id": "p3",
                "toolCallId": "nowhere",
                "title": "Run it",
                "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
                "outcome": "selected",
                "optionId": "ok",
                "decidedBy": "policy",
            },
        ],
    }
    result = refold(recorded)
    assert result.dropped == {"parts": 7}  # a kind that is not a word is not one of ours
    note, answer, asked = result.parts
    assert (note.part_id, answer.part_id, asked.part_id) == ("e1", "m9", "p3")
    assert note.message.startswith("The agent sent more than the client keeps; left out: 7")
    assert (asked.title, asked.option_id, asked.decided_by) == ("Run it", "ok", "policy")


def test_loading_refuses_what_is_not_a_notebook(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match="cannot read"):
        load(str(tmp_path / "missing.ipynb"))
    deep = tmp_path / "deep.ipynb"
    deep.write_text("[" * 100_000)
    with pytest.raises(ReplayError, match="not a notebook"):
        load(str(deep))
    no_cells = tmp_path / "no_cells.ipynb"
    no_cells.write_text('{"cells": 3}')
    with pytest.raises(ReplayError, match="no list of cells"):
        load(str(no_cells))


def test_cells_are_found_by_id_else_by_order(tmp_path: Path) -> None:
    nb = new_nb("%%agent\none", "x = 1", "%%agent --out y\ntwo", "%%agents\nnot ours")
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    recording = load(str(path))
    assert [(c.index, c.ordinal, c.line, c.body) for c in recording.cells] == [
        (0, 0, "", "one"),
        (2, 1, "--out y", "two"),
    ]
    assert all(c.problem.startswith("it has no recorded turn") for c in recording.cells)
    second = nb.cells[2].id
    assert recording.find(second, 0) is recording.cells[1]
    assert recording.find("unknown", 0) is None
    assert recording.find(None, 1) is recording.cells[1]
    assert recording.find(None, 2) is None


# -- cell ids, as JupyterLab sends them -----------------------------------------------------------


def run_with_id(kc: Any, code: str, cell_id: str) -> tuple[str, list[dict[str, Any]]]:
    """Execute `code` as a front-end that sends the cell's id does; (status, iopub messages)."""
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}}
    msg = kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
    kc.shell_channel.send(msg)
    seen = []
    while True:
        reply = kc.get_iopub_msg(timeout=60)
        if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        seen.append(reply)
        if reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
            break
    while True:  # wait_for_ready may have left a kernel_info reply or two before ours
        shell = kc.get_shell_msg(timeout=60)
        if shell["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return shell["content"]["status"], seen


def test_cells_are_matched_by_the_id_the_front_end_sends(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    log = tmp_path / "agent.jsonl"
    recorded = record(tmp_path, CELLS, log, kernel=kernel)
    was = nbformat.read(recorded, as_version=4)
    # The shared kernel again, reset to replay (a client of its own sends the cell ids).
    env = replay_env(tmp_path, recorded, no_agent(tmp_path))
    kernel.reset(tmp_path, env)
    kc = kernel.km.blocking_client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        # Out of order: by order the first cell run would be matched to the first recorded.
        for index, expected in ((2, "B echo: second question"), (0, "A echo: first question")):
            status, _ = run_with_id(kc, CELLS[index], was.cells[index].id)
            assert status == "ok"
            status, seen = run_with_id(kc, CELLS[index + 1], was.cells[index + 1].id)
            printed = "".join(m["content"]["text"] for m in seen if m["msg_type"] == "stream")
            assert printed.strip() == expected
        # A cell id the recording does not have fails, naming it.
        status, seen = run_with_id(kc, CELLS[0], "brand-new-cell")
        [error] = [m["content"] for m in seen if m["msg_type"] == "error"]
        assert error["ename"] == "ReplayError"
        assert (
            "the %%agent cell with id 'brand-new-cell': the recording has no such cell"
            in (error["evalue"])
        )
    finally:
        kc.stop_channels()
        kernel.reset(tmp_path, env)
    assert prompts(log) == ["first question", "second question"]


def test_a_cell_that_ended_otherwise_than_with_a_turn_is_not_replayed(tmp_path: Path) -> None:
    from nbformat.v4 import new_output

    nb = new_nb("%%agent\ninterrupted", "%%agent\nanswered")
    asked = {"cellOptions": "", "prompt": [{"type": "text", "text": "answered"}]}
    turn = {"success": True, "text": "fine", **asked}
    nb.cells[0].outputs = [
        new_output("display_data", data={MIME_TURN: {**turn, "success": False}}),
        new_output("error", ename="KeyboardInterrupt", evalue="", traceback=[]),
    ]
    nb.cells[1].outputs = [new_output("execute_result", data={MIME_TURN: turn}, execution_count=2)]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    first, second = load(str(path)).cells
    assert first.transcript is None
    assert (
        first.problem == "its recorded run ended with KeyboardInterrupt, not with a turn's result"
    )
    assert second.problem == "" and second.is_value and second.transcript == turn


def test_a_record_that_does_not_say_what_it_was_asked_is_not_replayed(tmp_path: Path) -> None:
    from nbformat.v4 import new_output

    nb = new_nb("%%agent\nold record", "%%agent\nno prompt")
    records = [
        {"success": True, "prompt": [{"type": "text", "text": "old record"}]},  # no cellOptions
        {"success": True, "cellOptions": "", "prompt": [{"type": "context", "tag": "x"}]},
    ]
    for cell, turn in zip(nb.cells, records, strict=True):
        cell.outputs = [new_output("execute_result", data={MIME_TURN: turn}, execution_count=1)]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    old, no_prompt = load(str(path)).cells
    assert old.transcript is None and "which %%agent options" in old.problem
    assert no_prompt.transcript is None and "no prompt to compare" in no_prompt.problem


def test_a_hostile_recording_replays_within_the_live_limits(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    from nbformat.v4 import new_output

    from acp_notebook.protocol.limits import DEFAULT_LIMITS

    # 40,000 recorded parts (a live turn keeps at most 5,000): tool calls and messages (eight
    # times the cap; 200,000 cost the test 6 s of CPU and showed nothing more).
    CALLS = 20_000
    parts: list[dict[str, Any]] = []
    for i in range(CALLS):
        parts.append({"type": "message", "id": f"m{i}", "role": "agent", "text": f"step {i}. "})
        call = {"id": f"t{i}", "toolCallId": f"c{i}", "title": "Read " + "x" * 80, "kind": "read"}
        parts.append({"type": "tool_call", **call, "status": "completed"})
    turn = {
        "turnId": "turn-hostile",
        "success": True,
        "stopReason": "end_turn",
        "cellOptions": "",
        "prompt": [{"type": "text", "text": "hello"}],
        "parts": parts,
    }
    nb = new_nb("%%agent\nhello")
    nb.cells[0].outputs = [new_output("execute_result", data={MIME_TURN: turn}, execution_count=1)]
    recorded = tmp_path / "hostile.ipynb"
    nbformat.write(nb, recorded)
    again = execute(
        new_nb("%%agent\nhello", "print(len(_.parts), _.dropped.get('tool_calls', 0))"),
        tmp_path,
        env=replay_env(tmp_path, recorded, no_agent(tmp_path)),
        timeout=180,
        kernel=kernel,
    )
    saved = tmp_path / "replayed.ipynb"
    nbformat.write(again, saved)
    kept, dropped = map(int, text(again.cells[1]).split())
    # The tool calls' cap, as a live turn's: the messages between the calls left out join.
    assert kept <= DEFAULT_LIMITS.parts and dropped == CALLS - DEFAULT_LIMITS.tool_calls
    [record] = value_records(again.cells[0])
    assert len(record["parts"]) == kept
    assert record["parts"][0]["message"].startswith("The agent sent more than the client keeps")
    size, was = saved.stat().st_size, recorded.stat().st_size
    print(f"recorded {was / 1e6:.1f} MB, {len(parts):,} parts -> replayed {size / 1e6:.1f} MB")
    # What is left: 4,000 parts and the text of every message, drawn three times (transcript,
    # HTML, text), as a live turn that sent this much would be; kept whole, at least the
    # recording's size.
    assert size < 8_000_000 and size < was / 2, (size, was)
