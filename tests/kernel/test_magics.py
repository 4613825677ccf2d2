"""%%agent and %agent in real kernels, executed headless with nbclient.

Each test builds a small notebook, runs it in a kernel (tests/nb_util.py) and asserts on what a
saved notebook holds, or on the kernel's iopub messages: a fresh kernel for the tests of a
kernel's first turn, its Stop, interrupt and shutdown; the test process's shared one, reset as a
fresh one is (tests/shared_kernel.py), for the others. The agents are the embedded demo
agent (no delays) and the scripted test agent (tests/agents/scripted_agent.py).
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
from nbclient.exceptions import CellExecutionError

from tests.nb_util import (
    MIME_TURN,
    MIME_WIDGET,
    RecordingClient,
    answer,
    data,
    errors,
    execute,
    in_shared_kernel,
    kernel_env,
    make_client,
    new_nb,
    outputs,
    process_gone,
    script,
    scripted,
    text,
    transcripts,
)
from tests.polling import until, wait_until
from tests.shared_kernel import SharedKernel

INTERNAL_FRAME = re.compile(r"acp_notebook[/\\]\w+")


def only_transcript(cell) -> dict:
    found = transcripts(cell)
    assert len(found) == 1, f"expected one turn record, got {len(found)}: {cell.outputs}"
    return found[0]


def permission_parts(transcript: dict) -> list[dict]:
    return [p for p in transcript["parts"] if p.get("type") == "permission"]


def tool_call(transcript: dict, kind: str) -> dict:
    return next(
        p for p in transcript["parts"] if p.get("type") == "tool_call" and p.get("kind") == kind
    )


def last_json(cell) -> object:
    """The last line a cell printed, as JSON."""
    lines = [x for x in text(cell).splitlines() if x.strip()]
    return json.loads(lines[-1])


# -- one turn, saved ------------------------------------------------------------------------------


def test_plain_turn_saves_static_record_and_binds_result(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    nb = execute(
        [
            "%%agent --out answer\nWhat does this project do?",
            "import json\n"
            "print(json.dumps({'under': [type(_).__name__, _.success, _.text],\n"
            "                  'out': [type(Out[1]).__name__, Out[1] is _],\n"
            "                  'named': [type(answer).__name__, answer is _]}))",
        ],
        tmp_path,
        kernel=kernel,
    )
    cell = nb.cells[0]
    assert cell.execution_count == 1  # so Out[1] above is this cell's value

    record = only_transcript(cell)
    assert record["success"] is True and record["stopReason"] == "end_turn"
    assert "demo agent" in record["agent"]
    # The record once, in the live display's place; no empty output beside it (the cell's value
    # adds nothing: `Out[1]` above still holds it).
    (result,) = outputs(cell, MIME_TURN)
    assert all(o.get("text") or any(o.get("data", {}).values()) for o in outputs(cell))
    bundle = result["data"]
    for mime in ("text/html", "text/plain", MIME_TURN):
        assert bundle.get(mime), f"the saved record lacks {mime}"
    # No Markdown: every front-end shows the HTML instead (issue 12, `render.RECORD_FORMATS`).
    assert "text/markdown" not in bundle
    # The HTML escapes the agent's text: compare what a reader sees.
    seen = html.unescape(re.sub(r"<[^>]*>", "", bundle["text/html"]))
    assert "What does this project do?" in seen
    assert answer(record).splitlines()[0].lstrip("# ") in seen
    assert "<" in bundle["text/html"] and "Edit demo_notes.md" in bundle["text/html"]

    # Headless: no widget front-end, so no controls were shown, and none are left behind.
    for c in nb.cells:
        assert not outputs(c, MIME_WIDGET), c.outputs
    assert "widgets" not in nb.metadata

    # The user is told that the embedded demo agent answered, and how to pick a real one.
    notes = [m for m in data(cell, "text/markdown") if "demo agent" in m and "--agent" in m]
    assert notes, f"no note about the demo agent in {data(cell, 'text/markdown')}"

    values = last_json(nb.cells[1])
    assert values == {
        "under": ["TurnResult", True, answer(record)],
        "out": ["TurnResult", True],
        "named": ["TurnResult", True],
    }


def test_a_result_shown_in_place_is_shown_whole_when_displayed_later(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    # The magic run from code: its live display becomes the record, but the result is not the
    # cell's value, so nothing consumes the mark that blanks the value's display; a later
    # display of the result shows the record, not an empty output. The %%agent cell after it
    # has its record once, as its display, and no value output.
    agent = scripted()
    nb = execute(
        [
            f"r = await get_ipython().run_cell_magic('agent', {f'--agent {agent}'!r}, 'hi')",
            "r",
            f"%%agent --agent {agent}\nagain",
        ],
        tmp_path,
        kernel=kernel,
    )
    first, shown, again = nb.cells
    assert [o["output_type"] for o in outputs(first, MIME_TURN)] == ["display_data"]
    (value,) = outputs(shown)
    assert value["output_type"] == "execute_result" and value["data"][MIME_TURN]["success"]
    assert [o["output_type"] for o in outputs(again)] == ["display_data"]


def test_a_result_shown_in_place_and_displayed_by_the_user_shows_each_time(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    # The record is in place; the user's own display() calls show it (not an empty output the
    # first time and the record the second), and the cell's value after them adds nothing.
    agent = scripted()
    nb = execute(
        [
            f"r = await get_ipython().run_cell_magic('agent', {f'--agent {agent}'!r}, 'hi')\n"
            "display(r)\ndisplay(r)\nr",
        ],
        tmp_path,
        kernel=kernel,
    )
    (cell,) = nb.cells
    assert [o["output_type"] for o in outputs(cell, MIME_TURN)] == ["display_data"] * 3
    assert all(o.get("text") or any(o.get("data", {}).values()) for o in outputs(cell))
    assert [o for o in outputs(cell) if o["output_type"] == "execute_result"] == []


def test_the_demo_agent_notice_is_shown_once_per_kernel(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    nb = execute(
        ["%%agent\nfirst", "%%agent --quiet\nsecond", "%%agent -s other\nthird"],
        tmp_path,
        kernel=kernel,
    )

    def notices(cell) -> list[str]:
        return [t for t in data(cell, "text/plain") if "No agent is configured" in t]

    assert len(notices(nb.cells[0])) == 1, nb.cells[0].outputs
    for cell in nb.cells[1:]:
        assert notices(cell) == [], cell.outputs
        assert only_transcript(cell)["success"] is True


def test_display_updates_are_coalesced(tmp_path: Path, kernel: SharedKernel) -> None:
    # 100 bursts of 5 chunks, 10 ms apart: 500 chunks in about a second of streaming. Without
    # the cap (max_update_rate = 1000) this cell sent about 180 display updates. 40,000
    # characters: enough for several redraws within the turn's share of bytes (live_meter.py).
    size = 80
    steps = []
    for _ in range(100):
        steps += [{"chunks": 5, "size": size}, {"sleep": 0.01}]
    steps.append({"say": "THE END"})
    clients: list = []
    nb = execute(
        [f"%%agent --agent {scripted()}\n" + script(*steps)],
        tmp_path,
        client_out=clients,
        kernel=kernel,
    )
    assert answer(only_transcript(nb.cells[0])).endswith("THE END")

    messages = clients[0].messages
    first = next(
        m
        for i, m in messages
        if i == 0
        and m["msg_type"] == "display_data"
        and (m["content"].get("transient") or {}).get("display_id")
    )
    display_id = first["content"]["transient"]["display_id"]
    updates = [
        m
        for i, m in messages
        if i == 0
        and m["msg_type"] == "update_display_data"
        and m["content"]["transient"]["display_id"] == display_id
    ]

    # The updates belong to the cell (nbclient attributed them to it) and show real streaming:
    # the answer grows through several intermediate states (the chunks are digits, and
    # a redraw of a long answer shows its end, after how many characters it leaves out).
    def reached(text: str) -> int:
        earlier = re.search(r"\[… ([\d,]+) earlier characters", text)
        drawn = max(map(len, re.findall(rf"\d{{{size},}}", text)), default=0)
        return drawn + (int(earlier.group(1).replace(",", "")) if earlier else 0)

    lengths = [reached(m["content"]["data"]["text/plain"]) for m in updates[:-1]]
    assert lengths == sorted(lengths)
    assert len({n for n in lengths if 0 < n < 500 * size}) >= 3, lengths

    def at(msg: dict) -> datetime:
        date = msg["header"]["date"]
        return date if isinstance(date, datetime) else datetime.fromisoformat(date)

    seconds = (at(updates[-1]) - at(first)).total_seconds()
    assert seconds > 0.5, seconds
    # At most 25 a second (c.AcpNotebook.max_update_rate), plus the final one.
    assert len(updates) <= 25 * seconds + 3, (len(updates), seconds)
    assert len(updates) < 500 / 4  # far fewer messages than chunks


# -- permissions, headless -----------------------------------------------------------------------


def test_headless_permission_rejected_unless_allowed_and_deny_wins(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    notes = (
        "import os\nprint(json.dumps(open('demo_notes.md').read().count('## Demo turn')\n"
        "                 if os.path.exists('demo_notes.md') else 0))"
    )
    nb = execute(
        [
            "import json",
            "%%agent --session asked\nPlease edit the notes.",
            notes,
            "%%agent --session allowed --allow edit\nPlease edit the notes.",
            notes,
            "%%agent --session both --allow edit --deny edit\nPlease edit the notes.",
            notes,
        ],
        tmp_path,
        kernel=kernel,
    )

    asked = only_transcript(nb.cells[1])
    assert asked["success"] is True  # a rejected tool call is not a failed turn
    [perm] = permission_parts(asked)
    assert perm["optionId"] == "reject" and "nobody to ask" in perm["decidedBy"]
    assert tool_call(asked, "edit")["status"] == "failed"
    assert last_json(nb.cells[2]) == 0  # failed closed: nothing written
    html = data(nb.cells[1], "text/html")[0]
    assert "reject" in html.lower()  # the record shows the decision

    allowed = only_transcript(nb.cells[3])
    [perm] = permission_parts(allowed)
    assert perm["optionId"] == "allow" and perm["decidedBy"] == "policy"
    assert tool_call(allowed, "edit")["status"] == "completed"
    assert last_json(nb.cells[4]) == 1

    both = only_transcript(nb.cells[5])
    [perm] = permission_parts(both)
    assert perm["optionId"] == "reject"
    assert tool_call(both, "edit")["status"] == "failed"
    assert last_json(nb.cells[6]) == 1  # unchanged


# -- failures ------------------------------------------------------------------------------------


def run_failing(tmp_path: Path, source: str, **kwargs) -> tuple[CellExecutionError, object]:
    nb = new_nb(source)
    with pytest.raises(CellExecutionError) as info:
        execute(nb, tmp_path, **kwargs)
    return info.value, nb.cells[0]


def assert_one_paragraph(message: str) -> None:
    assert "TurnFailed" in message
    assert "Traceback" not in message and not INTERNAL_FRAME.search(
        message.replace("acp_notebook.demo_agent", "")
    ), message
    assert "What to try:" in message


def test_failed_demo_turn_raises_one_clear_message(tmp_path: Path, kernel: SharedKernel) -> None:
    exc, cell = run_failing(tmp_path, "%%agent\n/fail please", kernel=kernel)
    message = str(exc)
    assert_one_paragraph(message)
    assert "'demo'" in message and "-32603" in message and "demo failure" in message
    # The demo agent's start-up line is not this turn's: a failure quotes the turn's stderr only.
    assert "ready (pid" not in message and "stderr" not in message
    record = only_transcript(cell)  # the failed turn keeps its record in the cell
    assert record["success"] is False


def test_a_failed_turn_states_its_error_once_below_its_record(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    # The live view (not --quiet) ends as the record, above the error the cell raises.
    _, cell = run_failing(tmp_path, "%%agent\n/fail please", kernel=kernel)
    (shown,) = [o for o in outputs(cell) if MIME_TURN in o.get("data", {})]
    for mime in ("text/html", "text/plain"):
        said = shown["data"][mime]
        assert "demo failure" not in said, said
        assert "failed" in said and "the error is below." in said, said
    (error,) = [o for o in outputs(cell) if o["output_type"] == "error"]
    assert "demo failure" in error["evalue"] and "What to try:" in error["evalue"]
    # Nothing lost: the transcript keeps the error, and says it was raised below.
    record = shown["data"][MIME_TURN]
    assert "demo failure" in record["error"] and record["raised"] is True


def test_agent_exit_mid_turn_raises_with_exit_code_and_stderr(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    prompt = script({"say": "half an answer"}, {"stderr": 400}, {"exit": 3})
    exc, cell = run_failing(tmp_path, f"%%agent --agent {scripted()}\n{prompt}", kernel=kernel)
    message = str(exc)
    assert_one_paragraph(message)
    assert "scripted_agent.py" in message  # the agent, by its command line
    assert "exited with code 3" in message
    assert "stderr filler" in message  # the tail of its stderr
    record = only_transcript(cell)
    assert record["success"] is False and answer(record) == "half an answer"


def test_timeout_cancels_the_turn_and_raises(tmp_path: Path, kernel: SharedKernel) -> None:
    log = tmp_path / "agent.jsonl"
    agent = scripted("--record", str(log))
    prompt = script({"say": "working"}, {"sleep": 30})
    # The --timeout covers starting the agent too: a first turn of the same agent (another
    # session) starts it, so the 2 s are the prompt's, not a kernel's first agent start's.
    nb = new_nb(
        f"%%agent --agent {agent} --session warm\nhi",
        f"%%agent --timeout 2 --agent {agent}\n{prompt}",
    )
    started = time.monotonic()
    with pytest.raises(CellExecutionError) as info:
        execute(nb, tmp_path, kernel=kernel)
    assert time.monotonic() - started < 25  # not the agent's 30 s
    exc, cell = info.value, nb.cells[1]
    message = str(exc)
    assert_one_paragraph(message)
    assert "--timeout 2" in message
    methods = [json.loads(x).get("method") for x in log.read_text().splitlines()]
    assert "session/cancel" in methods
    record = only_transcript(cell)
    assert record["stopReason"] == "cancelled" and record["success"] is False


def cell_seconds(cell) -> float:
    """How long the kernel took on the cell (nbclient's timing metadata)."""
    timing = cell.metadata["execution"]
    start, end = (
        datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
        for k in ("iopub.execute_input", "shell.execute_reply")
    )
    return (end - start).total_seconds()


@pytest.mark.parametrize("method", ["initialize", "session/new", "session/set_mode"])
def test_timeout_covers_starting_the_agent_and_the_session(
    tmp_path: Path, method: str, kernel: SharedKernel
) -> None:
    # The agent never answers `method`, once: the first process hangs, the next one answers.
    marker, log = tmp_path / "hung", tmp_path / "agent.jsonl"
    agent = scripted(
        "--record", str(log), "--modes", "--hang-method", method, "--hang-once-marker", str(marker)
    )
    # Starting a kernel's first agent (the SDK's schema models) takes about 3 s of a CPU shared
    # by parallel tests: a first turn of another agent, in another session, does it, so the
    # 3 s of --timeout are left for this agent's own process and the method that hangs.
    nb = execute(
        [
            f"%%agent --agent {scripted()} --session warm\nhi",
            f"%%agent --agent {agent} --timeout 3 --mode code\nhello",
            f"%%agent --agent {agent} --timeout 30 --mode code\nhello again",
        ],
        tmp_path,
        allow_errors=True,
        kernel=kernel,
    )
    found = errors(nb)
    assert len(found) == 1, [(i, "\n".join(e["traceback"])[-600:]) for i, e in found]
    [(index, error)] = found
    assert index == 1 and error["ename"] == "TurnFailed"
    message = "\n".join(error["traceback"])
    assert "--timeout 3" in message and method in message and "What to try:" in message
    assert 3 <= cell_seconds(nb.cells[1]) < 6, cell_seconds(nb.cells[1])
    pid = int(marker.read_text())
    assert process_gone(pid), "the agent that hung must not outlive the cell"
    assert answer(only_transcript(nb.cells[2])).strip() == "echo: hello again"
    methods = [json.loads(x).get("method") for x in log.read_text().splitlines()]
    assert "$/cancel_request" in methods


def test_request_timeout_setting_bounds_session_start(tmp_path: Path, kernel: SharedKernel) -> None:
    marker = tmp_path / "hung"
    agent = scripted("--hang-method", "session/new", "--hang-once-marker", str(marker))
    nb = execute(
        [
            "%config AcpNotebook.request_timeout = 1",
            f"%%agent --agent {agent}\nhello",
            f"%%agent --agent {agent}\nhello again",
        ],
        tmp_path,
        allow_errors=True,
        kernel=kernel,
    )
    [(index, error)] = errors(nb)
    assert index == 1 and error["ename"] == "TurnFailed"
    message = "\n".join(error["traceback"])
    assert "'scripted-agent' did not answer session/new within 1 s" in message, message
    # Not the default 120 s (the agent's start is in the cell too: seconds on a loaded machine).
    assert cell_seconds(nb.cells[1]) < 30, cell_seconds(nb.cells[1])
    assert process_gone(int(marker.read_text()))
    assert answer(only_transcript(nb.cells[2])).strip() == "echo: hello again"


def test_bad_options_are_usage_errors(tmp_path: Path, kernel: SharedKernel) -> None:
    bad = {
        "%%agent --nope\nhi": "unrecognized arguments: --nope",
        "%%agent --timeout -1\nhi": "--timeout must be a positive",
        "%%agent --timeout soon\nhi": "invalid float value",
        "%%agent --allow bogus\nhi": "unknown tool kind(s): bogus",
        "%%agent --agent no-such-agent\nhi": "unknown agent 'no-such-agent'",
        "%%agent --out 1x\nhi": "--out needs a Python name",
        "%%agent --config model\nhi": "expected KEY=VALUE",
        "%agent frobnicate": "unknown %agent command 'frobnicate'",
        "%%agent -q": "this cell has none",  # no prompt: our words, not IPython's
    }
    clients: list = []
    nb = execute(list(bad), tmp_path, allow_errors=True, client_out=clients, kernel=kernel)
    replies = clients[0].replies
    for index, (cell, expected) in enumerate(zip(nb.cells, bad.values(), strict=True)):
        shown = text(cell)
        assert "UsageError" in shown and expected in shown, (cell.source, shown)
        assert "Traceback" not in shown and not INTERNAL_FRAME.search(shown), shown
        assert not transcripts(cell)  # nothing was sent
        assert replies[index]["status"] == "error", cell.source  # a headless run stops here


def test_help_prints_once_and_does_not_fail_even_without_a_body(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    clients: list = []
    nb = execute(
        ["%%agent --help", "%%agent -h\nignored prompt"],
        tmp_path,
        client_out=clients,
        kernel=kernel,
    )
    for index, cell in enumerate(nb.cells):
        shown = text(cell)
        assert shown.count("show this help message and exit") == 1, shown
        assert "--session" in shown and "Error" not in shown, shown
        assert not transcripts(cell)  # nothing was sent
        assert clients[0].replies[index]["status"] == "ok"


# -- sessions, modes, config ----------------------------------------------------------------------


def test_sessions_new_mode_and_config(tmp_path: Path, kernel: SharedKernel) -> None:
    nb = execute(
        [
            "%%agent --session a\nfirst",
            "%%agent --session b\nsecond",
            "%%agent --session a\nthird",
            "%%agent --session a --new\nfourth",
            "%%agent --session m --mode ask --config model=demo-thorough\nfifth",
            "%agent status --session m\nimport json\nprint(json.dumps(_agent_status))",
        ],
        tmp_path,
        kernel=kernel,
    )
    ids = [only_transcript(c)["sessionId"] for c in nb.cells[:5]]
    a1, b, a2, a3, m = ids
    assert a1 != b  # two names, two sessions
    assert a2 == a1  # the same name continues its session
    assert a3 not in (a1, b)  # --new starts another
    assert m not in (a1, b, a3)
    status = last_json(nb.cells[5])
    assert status["session_id"] == m
    assert status["mode"] == "ask"
    assert status["config"]["model"] == "demo-thorough"
    # In ask mode the demo agent does not edit: no permission was asked.
    assert not permission_parts(only_transcript(nb.cells[4]))


# -- background turns ----------------------------------------------------------------------------


def test_background_returns_a_handle_and_finished_resolves(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    agent = scripted()
    nb = execute(
        [
            f"%%agent --background --agent {agent}\n"
            + script({"say": "from the background"}, {"sleep": 0.5}, {"say": " and done"}),
            "h = _\nresult = await h.finished\n"
            "import json\nprint(json.dumps([type(h).__name__, result.success, result.text]))",
            f"%%agent --background --agent {agent}\n" + script({"say": "long"}, {"sleep": 30}),
            "%agent stop",
        ],
        tmp_path,
        kernel=kernel,
    )
    shown = data(nb.cells[0], "text/plain")
    assert any("running in the background" in t for t in shown), shown  # returned at once
    assert last_json(nb.cells[1]) == ["TurnHandle", True, "from the background and done"]
    stopped = " ".join(data(nb.cells[3], "text/plain"))
    assert "Stopped turn" in stopped and "cancelled" in stopped


def test_background_out_stays_the_handle_after_the_turn_ends(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    agent = scripted()
    nb = execute(
        [
            f"%%agent --background --out h --agent {agent}\n"
            + script({"say": "from the background"}, {"sleep": 0.3}, {"say": " and done"}),
            "handle = h\nprint(type(h).__name__, h.result)",
            "r = await h.finished\nimport asyncio\n"
            # The cell's background finisher (which used to rebind h) has ended too.
            "while any(getattr(t.get_coro(), '__qualname__', '') == '_finish_later'\n"
            "          for t in asyncio.all_tasks()):\n"
            "    await asyncio.sleep(0.01)",
            "import json\n"
            "print(json.dumps([type(h).__name__, h is handle, h is Out[1], h.result is r,\n"
            "                  (await h.finished) is r, r.text]))",
        ],
        tmp_path,
        kernel=kernel,
    )
    assert text(nb.cells[1]).split() == ["TurnHandle", "None"]  # bound at once, still running
    assert last_json(nb.cells[3]) == [
        "TurnHandle",
        True,
        True,
        True,
        True,
        "from the background and done",
    ]


# -- %agent --------------------------------------------------------------------------------------


def test_line_commands(tmp_path: Path, kernel: SharedKernel) -> None:
    nb = execute(
        [
            "%agent list",  # 0
            "%agent help",  # 1
            "%%agent\nhello",  # 2
            "%agent status",  # 3
            "%agent sessions",  # 4
            "%agent mode ask",  # 5
            "%agent config model=demo-thorough",  # 6
            "%agent status\nprint(_agent_status['mode'], _agent_status['config']['model'])",  # 7
            "%agent stop",  # 8
            "%agent status\nold_pid = _agent_status['pid']",  # 9
            "%agent restart",  # 10
            "%%agent\nafter the restart",  # 11
            "%agent status\nprint(_agent_status['pid'] != old_pid)",  # 12
            "%agent close",  # 13
            "%agent close --all",  # 14
        ],
        tmp_path,
        kernel=kernel,
    )
    # Each command shows HTML it built itself and the same as plain text, never Markdown.
    md = [" ".join(data(c, "text/plain")) for c in nb.cells]
    for i in (0, 1, 3, 4, 5, 6, 8, 10, 13, 14):
        assert not data(nb.cells[i], "text/markdown"), nb.cells[i].outputs
        assert data(nb.cells[i], "text/html"), nb.cells[i].outputs
    assert "<td><code>demo</code></td>" in data(nb.cells[0], "text/html")[0]
    assert "\ndemo | " in md[0] and "\ngemini | " in md[0] and "No default agent" in md[0]
    assert "%agent status" in md[1] and "%agent close" in md[1]
    assert "pid" in md[3] and "mode: code" in md[3] and "turns: 1" in md[3]
    assert "Sessions of demo in " in md[4] or "no stored sessions" in md[4]
    assert "Mode of demo: ask" in md[5]
    assert "model of demo is now demo-thorough" in md[6]
    assert text(nb.cells[7]).split()[-2:] == ["ask", "demo-thorough"]
    assert "No turn was running." in md[8]
    assert "restarted" in md[10]
    assert only_transcript(nb.cells[11])["success"] is True
    assert text(nb.cells[12]).split()[-1] == "True"  # a fresh agent process
    assert "Closed session demo." in md[13]
    assert "Closed every session" in md[14]
    assert not errors(nb)


# -- kernel shutdown -----------------------------------------------------------------------------


def test_kernel_shutdown_leaves_no_agent_process(tmp_path: Path) -> None:
    nb = new_nb("%%agent\nhello", "%agent status\nprint(_agent_status['pid'])")
    client = make_client(nb, tmp_path)
    with client.setup_kernel(env=kernel_env(tmp_path)):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        pid = int(text(nb.cells[1]).split()[-1])
        assert not process_gone(pid), "the agent should be running while the kernel is"
    # setup_kernel's exit shut the kernel down (gracefully, as nbclient does after a run).
    wait_until(lambda: process_gone(pid), 10, f"agent pid {pid} to exit")


# -- Stop and interrupt without a browser ---------------------------------------------------------


def view_state(client, comm_id: str) -> str | None:
    """The state the live turn view last sent to its page ("starting", "waiting", ...): its
    messages carry the head only when it changed."""
    states = [
        m["content"]["data"].get("content", {}).get("head", {}).get("state")
        for m in client.of_type("comm_msg")
        if m["content"].get("comm_id") == comm_id
    ]
    states = [s for s in states if s is not None]
    return states[-1] if states else None


def stop_button(client, starting: bool = False) -> tuple[str, dict] | None:
    """The Stop of the running turn: the live turn view's (a message to its widget, once the
    view says the turn began, or with `starting` while the agent starts), or an ipywidgets
    Stop button's click."""
    for comm_id, state in client.widget_state.items():
        if state.get("_model_name") == "AnyModel" and state.get("token"):
            now = view_state(client, comm_id)
            if now is not None and (now == "starting") == starting:
                return comm_id, {"type": "stop"}
        if state.get("_model_name") == "ButtonModel" and state.get("description") == "Stop":
            return comm_id, {"event": "click"}
    return None


def click(client, target: tuple[str, dict]) -> None:
    comm_id, content = target
    kc = client.kc
    kc.shell_channel.send(
        kc.session.msg(
            "comm_msg",
            {"comm_id": comm_id, "data": {"method": "custom", "content": content}},
        )
    )


def test_stop_click_cancels_turn_without_raising(tmp_path: Path, kernel: SharedKernel) -> None:
    nb = new_nb(
        '%config AcpNotebook.interactive = "yes"',
        "%%agent\n/slow tell me a long story",
        "print(_.stop_reason, _.success, len(_.text))",
    )
    # Demo delays on: /slow streams for about 20 s unless stopped.
    env = kernel_env(tmp_path, ACP_NOTEBOOK_DEMO_SPEED="1")

    async def main(client: RecordingClient) -> float:
        async with client.async_setup_kernel(env=env):
            await client.async_execute_cell(nb.cells[0], 0)
            started = time.monotonic()
            running = asyncio.create_task(client.async_execute_cell(nb.cells[1], 1))
            button = await until(lambda: stop_button(client), 20, "the Stop button")
            click(client, button)
            await running  # a Stop is not a failure: no CellExecutionError
            took = time.monotonic() - started
            await client.async_execute_cell(nb.cells[2], 2)
            return took

    with in_shared_kernel(kernel, nb, tmp_path, env) as client:
        took = asyncio.run(main(client))
    assert took < 15, took
    reason, success, length = text(nb.cells[2]).split()
    assert reason == "cancelled" and success == "False" and int(length) >= 0
    cell = nb.cells[1]
    record = only_transcript(cell)
    assert record["stopReason"] == "cancelled"
    # The controls were closed when the turn ended: nothing widget-only remains in the cell.
    assert not outputs(cell, MIME_WIDGET), cell.outputs
    assert not errors(nb)


def test_stop_while_the_agent_starts_cancels_the_start(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    """The view is shown before the agent answers initialize; its Stop ends the start: no
    error, the agent process stopped, the kernel free for the next cell."""
    marker = f"never-starts-{tmp_path.name}"
    agent = scripted("--hang-method", "initialize", "--agent-name", marker)
    nb = new_nb(
        '%config AcpNotebook.interactive = "yes"',
        f"%%agent --agent {agent} --session s\nhello",
        "print('the kernel', 'is free')",
    )
    env = kernel_env(tmp_path)

    async def main(client: RecordingClient) -> list[int]:
        async with client.async_setup_kernel(env=env):
            await client.async_execute_cell(nb.cells[0], 0)
            running = asyncio.create_task(client.async_execute_cell(nb.cells[1], 1))
            button = await until(lambda: stop_button(client, starting=True), 20, "the Stop")
            pids = await until(lambda: _pids(marker) or None, 20, "the agent process")
            click(client, button)
            await running  # no CellExecutionError
            await client.async_execute_cell(nb.cells[2], 2)
            return pids

    with in_shared_kernel(kernel, nb, tmp_path, env) as client:
        pids = asyncio.run(main(client))
        # Before the reset, whose kill would end it too (a kernel's shutdown did, at most 10 s).
        wait_until(
            lambda: all(process_gone(p) for p in pids), 10, "the stopped start's agent to end"
        )
    assert "Stopped before the turn started; the agent was stopped." in text(nb.cells[1])
    assert not outputs(nb.cells[1], MIME_WIDGET), nb.cells[1].outputs
    assert "the kernel is free" in text(nb.cells[2])
    assert not errors(nb)


def test_a_prompt_refused_after_the_start_leaves_no_starting_view(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    nb = execute(
        [
            '%config AcpNotebook.interactive = "yes"',
            f"%%agent --agent {scripted()} --schema nowhere\nhello",
        ],
        tmp_path,
        allow_errors=True,
        kernel=kernel,
    )
    assert "--schema nowhere: no pydantic model" in text(nb.cells[1])
    # The view shown while the agent started was replaced: no widget left in the cell.
    assert not outputs(nb.cells[1], MIME_WIDGET), nb.cells[1].outputs


def _pids(marker: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


def test_kernel_interrupt_cancels_turn_and_kernel_stays_usable(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    agent = scripted("--record", str(log))
    nb = new_nb(
        # Short, then silent: shown by the redraw of a view stale for a second, beyond its
        # share of bytes (display/live_meter.py).
        f"%%agent --agent {agent}\n" + script({"say": "streaming"}, {"sleep": 60}),
        "print(6 * 7)",
        f"%%agent --agent {agent}\nstill there?",
    )
    client = make_client(nb, tmp_path)

    def said_streaming() -> bool | None:
        return (
            any(
                m["msg_type"] == "update_display_data"
                and "streaming" in m["content"]["data"].get("text/plain", "")
                for i, m in client.messages
                if i == 0
            )
            or None
        )

    async def main() -> float:
        async with client.async_setup_kernel(env=kernel_env(tmp_path)):
            running = asyncio.create_task(client.async_execute_cell(nb.cells[0], 0))
            await until(said_streaming, 60, "the turn to stream")  # the agent starts, under load
            # Timed from the interrupt: the agent's start is not what is measured (seconds
            # on a loaded machine), the cancel is (the turn would sleep a minute otherwise).
            started = time.monotonic()
            await client.km.interrupt_kernel()
            with pytest.raises(CellExecutionError) as info:  # Run All must stop here
                await running
            took = time.monotonic() - started
            assert info.value.ename == "TurnInterrupted"
            await client.async_execute_cell(nb.cells[1], 1)
            await client.async_execute_cell(nb.cells[2], 2)
            return took

    took = asyncio.run(main())
    assert took < 30, took
    methods = [json.loads(x).get("method") for x in log.read_text().splitlines()]
    assert "session/cancel" in methods
    assert text(nb.cells[1]).strip() == "42"
    assert answer(only_transcript(nb.cells[2])).strip() == "echo: still there?"
    record = only_transcript(nb.cells[0])  # the interrupted turn shows how it ended
    assert record["stopReason"] == "cancelled"
    # One line says what happened: no traceback through the extension's frames or anyio's.
    [error] = [o for o in outputs(nb.cells[0]) if o["output_type"] == "error"]
    assert error["ename"] == "TurnInterrupted"
    shown = "\n".join(error["traceback"])
    assert len(shown.splitlines()) == 1, shown
    assert "cancelled by the kernel's interrupt" in shown and "session/cancel" in shown
    assert not INTERNAL_FRAME.search(shown) and "anyio" not in shown, shown
    assert "Traceback" not in shown and "Traceback" not in text(nb.cells[0])


def test_except_exception_does_not_swallow_the_interrupt_of_a_turn(tmp_path: Path) -> None:
    # A person's `except Exception:` around a turn must let their own interrupt through; an
    # `except KeyboardInterrupt:` catches it, with the cancelled turn's result.
    agent = scripted()
    body = script({"say": "streaming"}, {"sleep": 60})
    turn = f"await get_ipython().run_cell_magic('agent', {'--agent ' + agent!r}, {body!r})"
    nb = new_nb(
        f"try:\n    {turn}\nexcept Exception as exc:\n    print('swallowed', repr(exc))",
        f"try:\n    {turn}\nexcept KeyboardInterrupt as exc:\n"
        "    print('caught', type(exc).__name__, exc.result.stop_reason)",
    )
    client = make_client(nb, tmp_path)

    def streaming(index: int) -> bool | None:
        return (
            any(
                m["msg_type"] == "update_display_data"
                and "streaming" in m["content"]["data"].get("text/plain", "")
                for i, m in client.messages
                if i == index
            )
            or None
        )

    async def interrupted(index: int) -> None:
        running = asyncio.create_task(client.async_execute_cell(nb.cells[index], index))
        # A cell that ended before it streamed has nothing to interrupt: its error is the story.
        await until(lambda: streaming(index) or running.done() or None, 60, f"cell {index}")
        if not running.done():
            await client.km.interrupt_kernel()
        await running

    async def main() -> None:
        async with client.async_setup_kernel(env=kernel_env(tmp_path)):
            with pytest.raises(CellExecutionError) as info:
                await interrupted(0)
            assert info.value.ename == "TurnInterrupted"
            await interrupted(1)

    asyncio.run(main())
    assert "swallowed" not in text(nb.cells[0])
    printed = [o["text"] for o in outputs(nb.cells[1]) if o["output_type"] == "stream"]
    assert "".join(printed).strip() == "caught TurnInterrupted cancelled"


def test_changed_settings_restart_the_agent_so_they_apply(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    nb = execute(
        [
            "%%agent --out a\nhello",
            "%config AcpNotebook.fs = False",
            "%%agent --out b\nhello again",
            "print(a.session_id != b.session_id)",
        ],
        tmp_path,
        kernel=kernel,
    )
    shown = " ".join(data(nb.cells[2], "text/plain"))
    assert "Settings changed (fs)" in shown and "restarted" in shown, shown
    assert text(nb.cells[3]).strip() == "True"


def test_load_shows_the_replayed_history(tmp_path: Path, kernel: SharedKernel) -> None:
    nb = execute(
        [
            "%%agent --out a\nfirst question",
            "%agent load {a.session_id} --session again",
        ],
        tmp_path,
        kernel=kernel,
    )
    said = " ".join(data(nb.cells[1], "text/plain"))
    assert "is now --session again (loaded, 1 earlier turns)" in said, said
    [replayed] = transcripts(nb.cells[1])
    assert replayed["note"] == "replayed history"
    roles = [p.get("role") for p in replayed["parts"] if p.get("type") == "message"]
    assert roles[:1] == ["user"] and "agent" in roles, replayed["parts"]
