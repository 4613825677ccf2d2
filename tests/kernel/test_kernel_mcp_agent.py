"""An agent uses the kernel tools in a turn: the scripted agent takes the `mcpServers` of its
`session/new`, starts the kernel's entry itself (as real agents do), calls the tools, and says
what it saw (its `mcp` step). Headless, through nbclient: the run is a card of kind `execute` in
the turn, decided by the same policy as any tool call.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.agents.script import script
from tests.fake_model_server import Script, fake_model
from tests.kernel.test_run_cli import notebook, run_cli
from tests.nb_util import data, execute, outputs, scripted, text, transcripts
from tests.real_agents import claude_code_acp_command, codex_acp_command, fast_agent_command
from tests.shared_kernel import SharedKernel

CALLS = [
    {"name": "list_variables", "arguments": {}},
    {"name": "inspect_variable", "arguments": {"name": "count"}},
    {"name": "run_code", "arguments": {"code": "made_by_agent = count * 6\nmade_by_agent"}},
]


def cell(options: str, session: str = "s", calls: list[dict[str, Any]] = CALLS) -> str:
    prompt = script({"mcp": "kernel", "calls": calls})
    return f"%%agent --agent {scripted()} --session {session} {options}\n{prompt}"


def seen(cell_node: Any) -> list[dict[str, Any]]:
    """What the agent reported of its MCP calls (its `MCP <json>` message)."""
    (record,) = transcripts(cell_node)
    said = "".join(p["text"] for p in record["parts"] if p.get("type") == "message")
    assert said.startswith("MCP "), said[:500]
    return list(json.loads(said[4:]))


def run_card(cell_node: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    (record,) = transcripts(cell_node)
    (card,) = [p for p in record["parts"] if p.get("type") == "tool_call"]
    (asked,) = [p for p in record["parts"] if p.get("type") == "permission"]
    return card, asked


def run_card_of(cell_node: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Our card and its permission, among the agent's own (an agent reports its MCP calls as
    tool calls too)."""
    (record,) = transcripts(cell_node)
    (card,) = [
        p for p in record["parts"] if p.get("type") == "tool_call" and p.get("byClient") is True
    ]
    (asked,) = [
        p
        for p in record["parts"]
        if p.get("type") == "permission" and p.get("toolCallId") == card["toolCallId"]
    ]
    return card, asked


def card_text(card: dict[str, Any]) -> str:
    return "\n".join(c["content"]["text"] for c in card.get("content", []))


def test_an_agent_reads_and_runs_code_when_allowed(tmp_path: Path, kernel: SharedKernel) -> None:
    nb = execute(
        [
            "count = 7",
            cell("--allow execute"),
            "print(made_by_agent)",
        ],
        tmp_path,
        timeout=150,
        kernel=kernel,
    )
    listed, inspected, ran, closed = seen(nb.cells[1])
    assert "count: int = 7" in listed["text"] and not listed["isError"]
    assert "type: int" in inspected["text"] and "7" in inspected["text"]
    assert "result:\n42" in ran["text"] and not ran["isError"]
    assert closed == {"exit": 0}  # the relay ended when the agent closed its stdin
    assert text(nb.cells[2]).strip() == "42"  # set in the user's namespace
    card, asked = run_card(nb.cells[1])
    assert card["kind"] == "execute" and card["status"] == "completed"
    assert card["title"] == "Run code in the kernel: `made_by_agent = count * 6` (+1 more lines)"
    assert "made_by_agent = count * 6" in card_text(card) and "42" in card_text(card)
    assert asked["toolCallId"] == card["toolCallId"] and card["byClient"] is True
    assert asked["optionId"] == "allow" and asked["decidedBy"] == "policy"


def test_running_code_is_rejected_headless_and_by_deny_execute(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    nb = execute(
        [
            "count = 7",
            cell(""),  # nobody to ask: rejected
            "%config AcpNotebook.allow = ['execute']",
            cell("--deny execute"),  # deny wins over the kernel's allow
            "print('made_by_agent' in globals())",
            cell("--no-kernel-tools"),  # the session has the tools: they refuse this turn
            cell("--no-kernel-tools", session="bare"),  # a new session: none offered
        ],
        tmp_path,
        timeout=150,
        kernel=kernel,
    )
    for index, decided in ((1, "policy (nobody to ask)"), (3, "policy")):
        *_, ran, _ = seen(nb.cells[index])
        assert "did not allow" in ran["text"], ran
        card, asked = run_card(nb.cells[index])
        assert card["kind"] == "execute" and card["status"] == "failed"
        assert "made_by_agent = count * 6" in card_text(card)
        assert asked["optionId"] == "reject" and asked["decidedBy"] == decided
    assert text(nb.cells[4]).strip() == "False"
    refused = seen(nb.cells[5])
    assert all(r.get("isError") and "off for this turn" in r["text"] for r in refused[:3])
    (record,) = transcripts(nb.cells[6])
    said = "".join(p["text"] for p in record["parts"] if p.get("type") == "message")
    assert said == "MCP no server 'kernel' in []"


@pytest.mark.real_agent
def test_fast_agent_takes_the_kernel_tools_from_mcp_servers(tmp_path: Path) -> None:
    """fast-agent (written by others) starts the kernel's entry itself and calls its tools
    (`***CALL_TOOL` of its passthrough model); it asks for each MCP call with a permission of
    its own, then ours asks for the run."""
    home = tmp_path / "fast-agent-home"
    home.mkdir()
    agent = shlex.quote(shlex.join(fast_agent_command("passthrough", home, shell=False)))
    run = json.dumps({"code": "made_by_fast_agent = count * 6\nmade_by_fast_agent"})
    line = f"%%agent --agent {agent} --allow read,execute\n***CALL_TOOL kernel__"
    nb = execute(
        [
            "count = 7",
            line + "list_variables {}",
            line + f"run_code {run}",
            "print(made_by_fast_agent)",
        ],
        tmp_path,
        timeout=150,
    )
    assert "count: int = 7" in text(nb.cells[1])
    assert "result:\n42" in text(nb.cells[2])
    assert text(nb.cells[3]).strip() == "42"
    card, asked = run_card_of(nb.cells[2])
    assert card["kind"] == "execute" and card["status"] == "completed"
    assert asked["optionId"] == "allow"


@pytest.mark.real_agent
@pytest.mark.timeout(240)
def test_fast_agent_inserts_a_cell_the_runner_saves_below_its_cell_and_runs(
    tmp_path: Path,
) -> None:
    """fast-agent (written by others) calls `kernel__insert_cell` with run=True under
    `acp-notebook run --allow other,edit,execute` (issue 22, real agents): the saved notebook holds
    the cell right below the agent's cell, executed before the next cell."""
    home = tmp_path / "fast-agent-home"
    home.mkdir()
    agent = shlex.quote(shlex.join(fast_agent_command("passthrough", home, shell=False)))
    source = "made_by_fast_agent = count * 6\nprint(made_by_fast_agent)"
    call = json.dumps({"source": source, "run": True})
    agent_cell = f"%%agent --agent {agent}\n***CALL_TOOL kernel__insert_cell {call}"
    last = "print(made_by_fast_agent + 1)"
    notebook(tmp_path / "fa.ipynb", "count = 7", agent_cell, last)
    # fast-agent asks for its MCP call first, as kind `other`; then ours asks for the insert.
    done = run_cli(tmp_path, "fa.ipynb", "--allow", "other,edit,execute")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "+ 1 cell(s) inserted below, 1 to run" in done.stdout
    saved = nbformat.read(tmp_path / "fa.out.ipynb", as_version=4)
    got = [(c.cell_type, c.source, c.get("execution_count")) for c in saved.cells]
    assert got == [
        ("code", "count = 7", 1),
        ("code", agent_cell, 2),
        ("code", source, 3),
        ("code", last, 4),
    ]
    assert outputs(saved.cells[2])[0]["text"] == "42\n"
    assert outputs(saved.cells[3])[0]["text"] == "43\n"
    # Ours: the insert (kind edit), then the run it asked for (kind execute), each allowed.
    (record,) = transcripts(saved.cells[1])
    ours = [p for p in record["parts"] if p.get("type") == "tool_call" and p.get("byClient")]
    assert [(c["kind"], c["status"]) for c in ours] == [
        ("edit", "completed"),
        ("execute", "completed"),
    ]
    asked = {p["toolCallId"]: p for p in record["parts"] if p.get("type") == "permission"}
    assert [asked[c["toolCallId"]]["optionId"] for c in ours] == ["allow", "allow"]


VENDOR_SOURCE = "made_by_vendor = 6 * 7\nprint(made_by_vendor)"


def a_vendor_inserts_a_cell(
    tmp_path: Path, agent: list[str], model: Script, **env: str
) -> dict[str, Any]:
    """`acp-notebook run --allow edit,execute` of a notebook whose agent's cell runs `agent`
    against `model` (a scripted endpoint that calls `insert_cell` with VENDOR_SOURCE, run=True,
    then says "Inserted it."): the saved notebook holds the cell below the agent's cell,
    executed before the next cell; our cards allowed it. Returns the turn's record."""
    agent_cell = f"%%agent --agent {shlex.quote(shlex.join(agent))}\nPut 6 * 7 in a cell, run it."
    last = "print(made_by_vendor + 1)"
    notebook(tmp_path / "v.ipynb", "x = 1", agent_cell, last)
    done = run_cli(tmp_path, "v.ipynb", "--allow", "edit,execute", NO_PROXY="127.0.0.1", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "+ 1 cell(s) inserted below, 1 to run" in done.stdout
    (result,) = model.results  # the tool's answer went back to the model
    assert "inserted below your %%agent cell" in result, result
    saved = nbformat.read(tmp_path / "v.out.ipynb", as_version=4)
    got = [(c.cell_type, c.source, c.get("execution_count")) for c in saved.cells]
    assert got == [
        ("code", "x = 1", 1),
        ("code", agent_cell, 2),
        ("code", VENDOR_SOURCE, 3),
        ("code", last, 4),
    ]
    assert outputs(saved.cells[2])[0]["text"] == "42\n"
    assert outputs(saved.cells[3])[0]["text"] == "43\n"
    (record,) = transcripts(saved.cells[1])
    said = "".join(p["text"] for p in record["parts"] if p.get("type") == "message")
    assert said.strip().endswith("Inserted it."), said
    ours = [p for p in record["parts"] if p.get("type") == "tool_call" and p.get("byClient")]
    assert [(c["kind"], c["status"]) for c in ours] == [
        ("edit", "completed"),
        ("execute", "completed"),
    ]
    return dict(record)


@pytest.mark.real_agent
@pytest.mark.timeout(240)
def test_claude_codes_adapter_inserts_a_cell_through_a_local_model_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code's ACP adapter (a vendor's agent, written by others) behind a scripted
    Anthropic Messages endpoint on 127.0.0.1 (tests/fake_model_server.py) calls the kernel's
    MCP tool `insert_cell` (issue 22, real agents)."""
    agent = claude_code_acp_command()
    for key in list(os.environ):  # only the endpoint and key below reach it
        if key.startswith(("ANTHROPIC_", "CLAUDE_", "AWS_BEARER_TOKEN_BEDROCK")):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    # Claude Code asks for an MCP tool with a permission of its own that states no kind, which
    # a headless policy cannot decide: its settings trust the kernel's tool, whose own
    # permission (kind edit) our policy decides.
    (home / ".claude").mkdir(parents=True)
    settings = {"permissions": {"allow": ["mcp__kernel__insert_cell"]}}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    with fake_model({"source": VENDOR_SOURCE, "run": True}, final="Inserted it.") as model:
        a_vendor_inserts_a_cell(
            tmp_path,
            agent,
            model,
            HOME=str(home),  # none of the developer's Claude settings or credentials
            ANTHROPIC_BASE_URL=model.url,
            ANTHROPIC_API_KEY="fake-key",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",  # no telemetry, no update check
            IS_SANDBOX="1",  # as root (CI), Claude Code refuses to start without it
        )
    assert model.called == ["mcp__kernel__insert_cell"]


@pytest.mark.real_agent
@pytest.mark.timeout(240)
def test_codexs_adapter_inserts_a_cell_through_a_local_model_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex's ACP adapter (a vendor's agent, written by others) behind a scripted OpenAI
    Responses endpoint on 127.0.0.1 (tests/fake_model_server.py) calls the kernel's MCP tool
    `insert_cell`, which Codex offers in an `mcp__kernel` namespace (issue 22, real agents)."""
    for key in list(os.environ):  # only the provider below reaches it
        if key.startswith(("OPENAI_", "CODEX_")):
            monkeypatch.delenv(key)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    with fake_model({"source": VENDOR_SOURCE, "run": True}, final="Inserted it.") as model:
        (codex_home / "config.toml").write_text(
            'model = "fake-model"\n'
            'model_provider = "fake"\n'
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{model.url}/v1"\n'
            'env_key = "FAKE_MODEL_KEY"\n'
            'wire_api = "responses"\n'
        )
        # Codex asks for an MCP tool call with a permission of its own that states no kind (a
        # headless policy cannot decide it) unless it runs unsandboxed and never asks; the
        # kernel's tool still asks ours (kind edit). The scripted model runs no command.
        never_ask = ["-c", 'approval_policy="never"', "-c", 'sandbox_mode="danger-full-access"']
        agent = [*codex_acp_command(), *never_ask]
        a_vendor_inserts_a_cell(
            tmp_path, agent, model, CODEX_HOME=str(codex_home), FAKE_MODEL_KEY="fake-key"
        )
    assert model.called == ["mcp__kernel.insert_cell"]


INSERT = [{"name": "insert_cell", "arguments": {"source": "proposed = 1", "run": True}}]


def test_insert_cell_headless_is_rejected_without_allow_edit(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    """nbclient without --allow edit: nothing inserted, and the agent is told (issue 22)."""
    nb = execute([cell("", calls=INSERT)], tmp_path, kernel=kernel)
    said, _ = seen(nb.cells[0])  # the call, then how the relay exited
    assert "not inserted: the user (or the permission policy) did not allow it" in said["text"]
    card, asked = run_card_of(nb.cells[0])
    assert card["kind"] == "edit" and "proposed = 1" in json.dumps(card["content"])
    assert asked["optionId"] == "reject"
    assert asked["decidedBy"] == "policy (nobody to ask)"
    assert len(nb.cells) == 1


def test_insert_cell_without_the_extension_is_proposed_as_the_next_input(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    """A front-end with a person and no extension (interactive, no comm): the turn's first cell
    is proposed through set_next_input, in the reply of the agent's cell; the second is listed
    in the record to copy."""
    twice = [
        {"name": "insert_cell", "arguments": {"source": "proposed = 1", "run": True}},
        {"name": "insert_cell", "arguments": {"source": "second = 2"}},
    ]
    replies: list[Any] = []
    nb = execute(
        ["%config AcpNotebook.interactive = 'yes'", cell("--allow edit,execute", calls=twice)],
        tmp_path,
        on_cell_executed=lambda cell, cell_index, execute_reply: replies.append(execute_reply),
        kernel=kernel,
    )
    first, second, _ = seen(nb.cells[1])
    assert "shown for the user to insert" in first["text"] and "not run" in first["text"]
    # The second is listed in the record for the person to copy (issue 22, item 3).
    assert second["text"].startswith("not inserted: this notebook's front-end cannot change")
    assert "listed in the turn's record for the user to copy" in second["text"]
    assert listed(nb.cells[1], "second = 2")
    payloads = replies[1]["content"]["payload"]
    assert [p for p in payloads if p.get("source") == "set_next_input"] == [
        {"source": "set_next_input", "text": "proposed = 1", "replace": False}
    ]


def test_insert_cell_under_plain_nbclient_lists_the_cell_in_the_record(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    """nbclient (no person, no extension, no runner) with --allow edit: nothing inserted, the
    proposed cell listed whole in the record, and the agent told so, not as an error."""
    proposed = [{"name": "insert_cell", "arguments": {"source": "cleaned = 3", "run": True}}]
    nb = execute([cell("--allow edit,execute", calls=proposed)], tmp_path, kernel=kernel)
    said, _ = seen(nb.cells[0])
    assert said["text"].startswith("not inserted or run: this notebook's front-end cannot")
    assert not said.get("isError")
    assert listed(nb.cells[0], "cleaned = 3")
    assert len(nb.cells) == 1


def listed(cell_node: Any, source: str) -> bool:
    """Whether the record's card lists the cell `source` whole for the person to copy: in the
    transcript and in the HTML the notebook shows."""
    (record,) = transcripts(cell_node)
    cards = [p for p in record["parts"] if p.get("type") == "tool_call"]
    card = json.dumps(cards[-1]["content"])
    page = "".join(data(cell_node, "text/html"))
    return all(s in card and s in page for s in (source, "Listed here for you to copy"))
