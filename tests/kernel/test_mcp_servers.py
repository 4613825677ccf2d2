"""MCP servers as data (issue 9): `[mcp.NAME]`, `c.AcpNotebook.mcp_servers`, an agent's `mcp`
defaults and `%%agent --mcp NAME`, checked, sent in `session/new`, listed by `%agent status`,
their keys never shown."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.client.mcp_config import McpServerSpec, mcp_secrets, parse_mcp_entry
from acp_notebook.config import Registry
from acp_notebook.errors import ConfigError
from tests.agents.script import agent_command
from tests.nb_util import execute, kernel_env, text
from tests.real_agents import fast_agent_command
from tests.shared_kernel import SharedKernel

KEY = "sk-mcp-notes-8Hq2Lw9Zx4Tv7Yb3"
BEARER = "Bearer tk-tracker-5Jm1Rd8Qs6Wc0Ne4"


# -- entries ---------------------------------------------------------------------------------


def test_stdio_and_http_entries() -> None:
    stdio = parse_mcp_entry(
        "notes", {"command": "python3 -m notes", "args": ["--x"], "env": {"A": "1"}}, "f.toml"
    )
    assert (stdio.transport, stdio.command, dict(stdio.env)) == (
        "stdio",
        ("python3", "-m", "notes", "--x"),
        {"A": "1"},
    )
    http = parse_mcp_entry("t", {"url": "https://h.example/mcp", "headers": {"X": "y"}}, "f")
    assert (http.transport, http.url, dict(http.headers)) == (
        "http",
        "https://h.example/mcp",
        {"X": "y"},
    )
    sse = parse_mcp_entry("s", {"type": "sse", "url": "http://127.0.0.1:9/sse"}, "f")
    assert sse.transport == "sse"


@pytest.mark.parametrize(
    ("name", "entry", "says"),
    [
        ("bad name!", {"command": "x"}, "letters, digits"),
        ("n", "x", "expected a table"),
        ("n", {"comand": "x"}, "unknown field(s) for a stdio server: comand"),
        ("n", {"command": "x", "headers": {}}, "unknown field(s) for a stdio server: headers"),
        ("n", {"url": "https://a.example", "env": {}}, "for a http server: env"),
        ("n", {"args": ["a"]}, "needs command"),
        ("n", {"command": ""}, "command is empty"),
        ("n", {"command": "x", "env": {"A": 1}}, "env must be a table of strings"),
        ("n", {"url": "ftp://a.example"}, "http:// or https://"),
        ("n", {"type": "websocket", "url": "https://a.example"}, "type must be one of"),
        ("n", {"url": "https://a.example", "headers": ["a"]}, "headers must be a table"),
    ],
)
def test_a_bad_entry_is_a_clear_error_naming_the_server(name: str, entry: Any, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_mcp_entry(name, entry, "agents.toml")
    assert says in str(raised.value)
    assert "agents.toml" in str(raised.value)
    if name == "n":
        assert "MCP server 'n'" in str(raised.value)


def test_acp_shapes_and_what_status_shows() -> None:
    stdio = McpServerSpec(
        "notes", "stdio", ("python3", "-m", "notes"), {"NOTES_API_KEY": KEY, "LEVEL": "info"}
    )
    wire = stdio.to_acp()
    assert "type" not in wire and Path(wire["command"]).is_absolute()
    assert wire["args"] == ["-m", "notes"]
    assert wire["env"] == [
        {"name": "NOTES_API_KEY", "value": KEY},
        {"name": "LEVEL", "value": "info"},
    ]
    assert stdio.describe() == "stdio: python3 -m notes (env: LEVEL, NOTES_API_KEY)"
    http = McpServerSpec(
        "t",
        "http",
        url="https://u:pw@h.example:8443/mcp?key=abc",
        headers={"Authorization": BEARER},
    )
    assert http.to_acp() == {
        "type": "http",
        "name": "t",
        "url": "https://u:pw@h.example:8443/mcp?key=abc",
        "headers": [{"name": "Authorization", "value": BEARER}],
    }
    assert http.describe() == "http: https://h.example:8443/mcp (headers: Authorization)"
    assert stdio.secrets() == {KEY} and http.secrets() == {BEARER, BEARER.split()[1]}
    assert mcp_secrets([wire, http.to_acp(), {"args": ["--token", "abcdefgh123"]}, "junk"]) == {
        KEY,
        BEARER,
        BEARER.split()[1],
        "abcdefgh123",
    }
    missing = McpServerSpec("gone", "stdio", ("no-such-program-here",), source="f.toml")
    with pytest.raises(ConfigError, match=r"MCP server 'gone' \(f.toml\): command .* not found"):
        missing.to_acp()


def test_registry_reads_mcp_tables_and_agent_defaults(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[agents.a]\ncommand = "a-agent"\nmcp = ["notes", "notes"]\n'
        '[agents.b]\ncommand = "b-agent"\nmcp = ["ghost"]\n'
        '[mcp.notes]\ncommand = "notes-server"\n'
        '[mcp.web]\nurl = "https://w.example/mcp"\n'
    )
    registry = Registry.build({}, None, str(agents), {"web": {"command": ["web-stdio"]}})
    a, b = registry.agents["a"], registry.agents["b"]
    assert a.mcp == ("notes",)
    assert registry.mcp["web"].transport == "stdio"  # the traitlets config wins by name
    assert [s.name for s in registry.mcp_servers(a, ["web", "notes"])] == ["notes", "web"]
    with pytest.raises(ConfigError) as raised:
        registry.mcp_servers(a, ["nope"])
    assert "unknown MCP server 'nope' (from --mcp nope)" in str(raised.value)
    assert "Configured: notes, web" in str(raised.value)
    with pytest.raises(ConfigError, match=r"'ghost' \(from agent 'b'"):
        registry.mcp_servers(b)
    agents.write_text("[agents.c]\ncommand = 'c'\nmcp = 'notes'\n")
    with pytest.raises(ConfigError, match="mcp must be a list of MCP server names"):
        Registry.build({}, None, str(agents))
    agents.write_text("mcp = 3\n")
    with pytest.raises(ConfigError, match=r"\[mcp\] must be a table"):
        Registry.build({}, None, str(agents))


# -- in a kernel -----------------------------------------------------------------------------


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def _agents_file(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    records = {name: tmp_path / f"{name}.jsonl" for name in ("plain", "web")}
    plain = agent_command("--record", str(records["plain"]))
    web = agent_command("--record", str(records["web"]), "--mcp-transports", "http")
    path = tmp_path / "agents.toml"
    path.write_text(
        f'[agents.plain]\ncommand = {json.dumps(plain)}\nmcp = ["notes"]\n'
        f"[agents.web]\ncommand = {json.dumps(web)}\n"
        f'[mcp.notes]\ncommand = {_toml_str(sys.executable)}\nargs = ["-m", "notes"]\n'
        f'env = {{ NOTES_API_KEY = {_toml_str(KEY)}, LEVEL = "info" }}\n'
        '[mcp.more]\ncommand = ["python3", "more.py"]\n'
        '[mcp.tracker]\nurl = "https://tracker.example/mcp?user=me"\n'
        f"headers = {{ Authorization = {_toml_str(BEARER)} }}\n"
    )
    return path, records


def _session_news(record: Path) -> list[dict[str, Any]]:
    messages = [json.loads(line) for line in record.read_text().splitlines()]
    return [m["params"] for m in messages if m.get("method") == "session/new"]


def test_mcp_servers_reach_session_new_and_status(tmp_path: Path, kernel: SharedKernel) -> None:
    agents, records = _agents_file(tmp_path)
    log = tmp_path / "wire.jsonl"
    env = kernel_env(tmp_path, ACP_NOTEBOOK_AGENTS_FILE=str(agents), ACP_NOTEBOOK_LOG=str(log))
    nb = execute(
        [
            "%%agent --agent plain --mcp tracker\nhi",  # 0: http, not advertised
            "%%agent --agent plain --mcp nope\nhi",  # 1: unknown
            "%%agent --agent plain\nhi",  # 2: the agent's default, notes
            "%agent status",  # 3
            "%%agent --agent plain --mcp more\nhi",  # 4: not in the open session
            "%%agent --agent plain --mcp more --new\nhi",  # 5
            "%%agent --agent web --mcp tracker\nhi",  # 6: advertised
            "%agent status",  # 7
            "print(_agent_status['mcp_servers'])",  # 8
        ],
        tmp_path,
        env=env,
        allow_errors=True,
        timeout=90,
        kernel=kernel,
    )
    refused = text(nb.cells[0])
    assert "UsageError" in refused and "MCP server 'tracker' is an http server" in refused
    assert "agent 'plain' does not take http MCP servers" in refused
    assert "unknown MCP server 'nope'" in text(nb.cells[1])
    assert "echo: hi" in text(nb.cells[2])
    first, second = _session_news(records["plain"])
    # The configured servers, then the kernel's own tools (on by default).
    assert [s["name"] for s in first["mcpServers"]] == ["notes", "kernel"]
    assert first["mcpServers"][0] == {
        "name": "notes",
        "command": sys.executable,
        "args": ["-m", "notes"],
        "env": [{"name": "NOTES_API_KEY", "value": KEY}, {"name": "LEVEL", "value": "info"}],
    }
    status = text(nb.cells[3])
    assert "MCP servers: notes (stdio: " in status and "env: NOTES_API_KEY, LEVEL" in status
    reused = text(nb.cells[4])
    assert "session 'plain' was opened without MCP server(s) more" in reused and "--new" in reused
    assert [s["name"] for s in second["mcpServers"]] == ["notes", "more", "kernel"]
    assert Path(second["mcpServers"][1]["command"]).is_absolute()
    (web,) = _session_news(records["web"])
    assert [s["name"] for s in web["mcpServers"]] == ["tracker", "kernel"]
    assert web["mcpServers"][:1] == [
        {
            "type": "http",
            "name": "tracker",
            "url": "https://tracker.example/mcp?user=me",
            "headers": [{"name": "Authorization", "value": BEARER}],
        }
    ]
    assert "tracker (http: https://tracker.example/mcp; headers: Authorization)" in text(
        nb.cells[7]
    )
    assert "tracker (http:" in text(nb.cells[8])
    # The agents got the keys; nothing the kernel showed, saved or logged holds them.
    saved = json.dumps(nb)
    logged = log.read_text()
    assert '"session/new"' in logged and "NOTES_API_KEY" in logged
    for secret in (KEY, BEARER.split()[1]):
        assert secret not in saved and secret not in logged


# Past the folder's 240 s: fast-agent (a real agent) starts in a kernel, then the notes server.
@pytest.mark.timeout(300)
@pytest.mark.real_agent
def test_fast_agent_calls_a_server_passed_from_a_cell(tmp_path: Path) -> None:
    """fast-agent takes `mcpServers` from session/new: its passthrough model calls the notes
    server's tool (`***CALL_TOOL server__tool {args}`), which answers with the env it got."""
    agent = fast_agent_command("passthrough", tmp_path / "fast-home", shell=False)
    server = Path(__file__).parents[1] / "mcp_notes_server.py"
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f"[agents.fast]\ncommand = {json.dumps(agent)}\n"
        f"[mcp.notes]\ncommand = {json.dumps([sys.executable, str(server)])}\n"
        'env = { NOTES_WORD = "walrus" }\n'
    )
    call = '***CALL_TOOL notes__read_note {"key": "a"}'
    nb = execute(
        [
            f"%%agent --agent fast --mcp notes --allow read --out r\n{call}",
            "print(r.text)",
        ],
        tmp_path,
        env=kernel_env(tmp_path, ACP_NOTEBOOK_AGENTS_FILE=str(agents)),
        timeout=240,
    )
    assert "note a: walrus" in text(nb.cells[1])
