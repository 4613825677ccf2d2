"""A key a cell puts in `os.environ` after the kernel started never reaches an output.

Headless (nbclient, a real kernel). The cell reads the key from a file (as `load_dotenv()` does),
so the key is in no cell source and the whole saved notebook can be searched for it. A scripted
agent started after that has the key in its environment and echoes it every way it can: whole,
split across chunks (with a redraw in between), cut in two parts, URL-encoded, JSON-escaped,
base64, its first 20 characters, in a thought, a tool call, the session title (`%agent status`,
`%agent sessions`), a turn error, an error answer shown as a usage error, an error at start-up,
and its stderr. An agent configured with `--api-key KEY` does not show it in `%agent list`.
Run twice: the key set by a cell, and the key in the kernel's environment from the start.
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.protocol.redact import prefix_length
from tests.agents.script import AGENT_PATH, script
from tests.nb_util import answer, errors, execute, kernel_env, new_nb, text, transcripts
from tests.shared_kernel import SharedKernel

KEY = "sk-live-Ab3/xY9+zQ7=mN2_pL8-kR4.tW6~vB1c"
MASK = "[redacted]"
SPLIT = 10  # the first chunk ends after this many characters of the key

# The scripted agent, with {KEY...} placeholders in its script's strings replaced by the key from
# its own environment (spelled as asked), announcing a URL-encoded key on stderr at start, failing
# set_mode with the key in the message, and failing initialize when FAIL_INIT is set.
WRAPPER = f"""\
import base64, json, os, sys, urllib.parse
sys.path.insert(0, {str(AGENT_PATH.parent)!r})
from scripted import agent, cli, turn, wire
key = os.environ["MY_API_KEY"]
spell = {{
    "{{KEY}}": key, "{{KEY_A}}": key[:{SPLIT}], "{{KEY_B}}": key[{SPLIT}:],
    "{{KEY_URL}}": urllib.parse.quote(key, safe=""), "{{KEY_HEAD}}": key[:20],
    "{{KEY_TAIL}}": key[20:],
    "{{KEY_JSON}}": json.dumps(key)[1:-1].replace("/", "\\\\/"),
    "{{KEY_BASIC}}": base64.b64encode(("user:" + key).encode()).decode(),
}}
def fill(value):
    if isinstance(value, str):
        for token, spelled in spell.items():
            value = value.replace(token, spelled)
        return value
    if isinstance(value, list):
        return [fill(v) for v in value]
    if isinstance(value, dict):
        return {{k: fill(v) for k, v in value.items()}}
    return value
parse_script = turn.parse_script
turn.parse_script = lambda text: fill(parse_script(text))
def refuse_mode(self, params):
    raise wire.RpcError(wire.INVALID_PARAMS, "mode refused for " + spell["{{KEY_URL}}"])
agent.Agent._set_mode = refuse_mode
def refuse_init(self, params):
    raise wire.RpcError(wire.INTERNAL_ERROR, "bad credentials " + key[:20] + "...")
if os.environ.get("FAIL_INIT"):
    agent.Agent._initialize = refuse_init
sys.stderr.write("starting with MY_API_KEY=" + spell["{{KEY_URL}}"] + "\\n")
sys.stderr.flush()
cli.main()
"""


def spellings() -> dict[str, str]:
    """What must appear nowhere: the key, prefixes of it, and its encodings."""
    basic = base64.b64encode(("user:" + KEY).encode()).decode()
    return {
        "key": KEY,
        "head20": KEY[:20],
        "tail16": KEY[-16:],
        "prefix": KEY[: prefix_length(len(KEY))],
        "split": KEY[:SPLIT],
        "url": urllib.parse.quote(KEY, safe=""),
        "url-head": urllib.parse.quote(KEY, safe="")[:20],
        "json": json.dumps(KEY)[1:-1].replace("/", "\\/"),
        "basic": basic,
        "basic-middle": basic[12:36],
    }


def found(haystack: str) -> dict[str, int]:
    return {name: haystack.count(s) for name, s in spellings().items() if s in haystack}


def setup(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "key.env").write_text(f"MY_API_KEY={KEY}\n")
    wrapper = tmp_path / "secret_agent.py"
    wrapper.write_text(WRAPPER)
    env = kernel_env(tmp_path)
    env.pop("MY_API_KEY", None)
    config = Path(env["XDG_CONFIG_HOME"]) / "acp_notebook"
    config.mkdir(parents=True)
    command = [
        sys.executable,
        str(wrapper),
        "--list",
        "--modes",
        "--state-dir",
        str(tmp_path / "state"),
        "--record",
        str(tmp_path / "record.jsonl"),
    ]
    (config / "agents.toml").write_text(
        f"[agents.secretive]\ncommand = {json.dumps(command)}\n\n"
        f"[agents.flagged]\ncommand = {json.dumps(['my-agent', '--api-key', KEY])}\n\n"
        f"[agents.broken]\ncommand = {json.dumps(command)}\n"
        'env = { FAIL_INIT = "1" }\n'
    )
    return env


def tool_call(call_id: str, title: str) -> dict[str, Any]:
    return {
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": title,
            "kind": "read",
            "status": "completed",
            "rawInput": {"q": "{KEY_URL}"},
            "content": [{"type": "content", "content": {"type": "text", "text": "{KEY_BASIC}"}}],
        }
    }


@pytest.mark.parametrize("when", ["set by a cell", "in the kernel's environment"])
def test_a_key_never_reaches_the_saved_notebook(
    tmp_path: Path, when: str, kernel: SharedKernel
) -> None:
    env = setup(tmp_path)
    if when != "set by a cell":  # every other way of leaking, without the late key
        env["MY_API_KEY"] = KEY
    echoes = script(
        # A long answer: its share of bytes pays for redraws (display/live_meter.py).
        {"huge_say": 40_000},
        {"say": "whole: {KEY}. "},
        {"say": "split: {KEY_A}"},
        {"sleep": 0.5},
        {"say": "{KEY_B} joined. "},
        {"say": "url: {KEY_URL} json: {KEY_JSON} basic: {KEY_BASIC} head: {KEY_HEAD}..."},
        {"think": "thinking about {KEY_HEAD}"},
        {"say": "cut in two: {KEY_HEAD} and then {KEY_TAIL}. "},
        tool_call("c1", "read {KEY}"),
        {"update": {"sessionUpdate": "session_info_update", "title": "title {KEY}"}},
    )
    failing = {"error": {"code": -32603, "message": "boom {KEY_URL}"}}
    cells = [
        "%agent list",  # the extension is loaded and its runtime built: the key is not set yet
        # What load_dotenv() does: the key is read from a file into the environment.
        "import os\nname, _, value = open('key.env').read().strip().partition('=')\n"
        "os.environ[name] = value",
        f"%%agent --agent secretive --out res\n{echoes}",
        "res",
        "%agent status -s secretive",
        "_agent_status['title']",
        "%agent sessions -a secretive",
        "%agent mode code -s secretive",
        f"%%agent --agent secretive\n{script({'say': 'x'}, failing)}",
        f"%%agent --agent secretive --new\n{script({'say': 'x'}, {'exit': 3})}",
        "%%agent --agent broken\nhello",
    ]
    clients: list[Any] = []
    # The key in the environment a kernel starts with: a fresh kernel, started with it.
    shared = kernel if when == "set by a cell" else None
    nb = execute(
        new_nb(*cells), tmp_path, env=env, allow_errors=True, client_out=clients, kernel=shared
    )
    saved = (tmp_path / "executed.ipynb").read_text()
    # The agent did see the key and send it: the record of what the client answered is not
    # needed, the transcript shows the masks where the key was.
    (turn,) = transcripts(nb.cells[2])
    assert turn["success"], turn
    assert f"whole: {MASK}." in answer(turn)
    assert f"split: {MASK} joined." in answer(turn)

    leaked = {i: found(json.dumps(cell.outputs)) for i, cell in enumerate(nb.cells)}
    assert found(saved) == {}, {i: f for i, f in leaked.items() if f}
    # Every message the kernel sent, live updates included (they are not all saved).
    (client,) = clients
    sent = "\n".join(json.dumps(m["content"]) for _, m in client.messages)
    assert found(sent) == {}, found(sent)
    assert found(json.dumps(client.replies)) == {}
    # A redraw happened while only the key's first chunk had arrived, and it showed none of it.
    updates = [
        json.dumps(m["content"])
        for _, m in client.messages
        if m["msg_type"] == "update_display_data"
    ]
    assert any("split: " in u and "joined" not in u for u in updates), len(updates)

    # Where each output was, there is a mask, not nothing.
    assert f"my-agent --api-key '{MASK}'" in text(nb.cells[0])  # %agent list: the command
    assert MASK in text(nb.cells[4]) and MASK in text(nb.cells[5]), nb.cells[4].outputs
    assert MASK in text(nb.cells[6])
    failed = dict(errors(nb))
    assert sorted(failed) == [8, 9, 10], sorted(failed)
    # A usage error (IPython shows it on stderr, without a traceback) quoting the agent's answer.
    assert f"UsageError: session/set_mode failed: mode refused for {MASK}" in text(nb.cells[7])
    assert f"boom {MASK}" in failed[8]["evalue"]
    assert f"MY_API_KEY={MASK}" in failed[9]["evalue"]  # the stderr tail, URL-encoded
    assert failed[10]["ename"] == "TurnFailed" and MASK in failed[10]["evalue"]  # at start-up
