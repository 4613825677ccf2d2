"""The kernel as MCP tools (issue 9): an MCP client (the official `mcp` SDK's) against the
server in a real kernel (nbclient), through the relay an agent would start.

One kernel per test: a session opened by a `%%agent` cell (the scripted agent, echoing) gets the
kernel's entry in its `mcpServers`; the test reads that entry from the kernel and starts it as
an agent would, with the SDK's stdio client.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from nbformat import NotebookNode

from acp_notebook.kernel_tools import relay as kernel_mcp
from acp_notebook.kernel_tools import server as kernel_server
from tests.nb_util import (
    RecordingClient,
    in_shared_kernel,
    kernel_env,
    make_client,
    new_nb,
    process_gone,
    scripted,
    text,
)
from tests.polling import until
from tests.shared_kernel import SharedKernel

HAVE_SCIENCE = all(
    __import__("importlib").util.find_spec(m) for m in ("numpy", "pandas", "matplotlib")
)
SETUP = """\
import numpy as np, pandas as pd, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
df = pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "temp": [3.5, 19.0, 31.2]})
arr = np.arange(12).reshape(3, 4)
fig, ax = plt.subplots()
ax.plot([1, 2, 3])
"""
BASIC = """\
big = "x" * 50_000_000
count = 7
_private = 1
def helper():
    pass
"""
ENTRY = (
    "import json\nfrom acp_notebook.magics import instance\n"
    "print(json.dumps(instance(get_ipython()).runtime.sessions[{name!r}].session.mcp_servers))"
)


FIRST_ENTRY = """\
import socket
from acp_notebook.magics import instance
from acp_notebook.kernel_tools.server import kernel_mcp_entry
entry = kernel_mcp_entry(instance(get_ipython()))
with socket.socket(socket.AF_UNIX) as probe:
    probe.connect(entry["args"][-1])  # no await in between: the loop has not run since
print("connected at once")
"""


def open_session(name: str, *options: str) -> str:
    return f"%%agent --agent {scripted()} --session {name} {' '.join(options)}\nhello"


def params(entry: dict[str, Any]) -> StdioServerParameters:
    env = {e["name"]: e["value"] for e in entry["env"]}
    return StdioServerParameters(command=entry["command"], args=entry["args"], env=env)


def texts(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def closed(proc: subprocess.Popen[bytes]) -> None:
    """The relay killed if it still runs, waited for, its pipes closed."""
    if proc.poll() is None:
        proc.kill()
    with proc:  # closes the pipes and waits
        pass


def relay(entry: dict[str, Any], token: str | None = None) -> subprocess.Popen[bytes]:
    """The relay as an agent starts it, kept open (stdin a pipe nobody writes to). Its pipes are
    the caller's to close (`closed`)."""
    env = dict(os.environ, **{e["name"]: e["value"] for e in entry["env"]})
    if token is not None:
        env[kernel_mcp.TOKEN_ENV] = token
    return subprocess.Popen(
        [entry["command"], *entry["args"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


class Kernel:
    """A kernel to run cells in one at a time, between MCP calls."""

    def __init__(self, nb: NotebookNode, client: RecordingClient) -> None:
        self.nb = nb
        self.client = client
        self.next = 0

    async def run(self, count: int = 1) -> str:
        out = ""
        for _ in range(count):
            cell = self.nb.cells[self.next]
            await self.client.async_execute_cell(cell, self.next)
            self.next += 1
            out = text(cell)
        return out

    async def entry(self) -> dict[str, Any]:
        (entry,) = json.loads((await self.run()).strip().splitlines()[-1])
        return dict(entry)


def in_kernel(
    tmp_path: Path,
    cells: list[str],
    body: Callable[[Kernel], Awaitable[None]],
    shared: SharedKernel | None = None,
    **env: str,
) -> None:
    """Run `body` in a fresh kernel, or in the `shared` one (reset before and after)."""
    nb = new_nb(*cells)
    environ = kernel_env(tmp_path, **env)

    async def main(client: RecordingClient) -> None:
        async with client.async_setup_kernel(env=environ):
            await body(Kernel(nb, client))

    if shared is None:
        asyncio.run(main(make_client(nb, tmp_path, allow_errors=True)))
    else:
        with in_shared_kernel(shared, nb, tmp_path, environ, allow_errors=True) as client:
            asyncio.run(main(client))


def test_the_relay_and_the_kernel_agree_on_the_handshake() -> None:
    for name in ("TOKEN_ENV", "HELLO", "OK", "MAX_HELLO"):
        assert getattr(kernel_mcp, name) == getattr(kernel_server, name), name


def test_read_tools_and_a_run_rejected_headless(tmp_path: Path, kernel: SharedKernel) -> None:
    cells = [
        *([SETUP] if HAVE_SCIENCE else []),
        BASIC,
        'raise ValueError("bad value 42")',
        open_session("a"),
        ENTRY.format(name="a"),
        "print('agent_was_here' in globals())",
    ]

    async def body(kernel: Kernel) -> None:
        await kernel.run(len(cells) - 2)
        entry = await kernel.entry()
        assert entry["name"] == "kernel" and entry["command"] == sys.executable
        assert entry["args"][-3:-1] == ["acp_notebook.kernel_tools.relay", "--socket"]
        token = {e["name"]: e["value"] for e in entry["env"]}[kernel_mcp.TOKEN_ENV]
        assert token not in " ".join(entry["args"])  # never in argv (ps shows argv to all)
        socket_path = Path(entry["args"][-1])
        assert socket_path.stat().st_mode & 0o777 == 0o600
        assert socket_path.parent.stat().st_mode & 0o777 == 0o700
        async with Client(params(entry)) as mcp:
            tools = {t.name for t in (await mcp.list_tools()).tools}
            assert tools == {
                "list_variables",
                "inspect_variable",
                "notebook_cells",
                "last_error",
                "run_code",
                "insert_cell",
                "edit_cell",
                "run_cell",
            }
            listed = texts(await mcp.call_tool("list_variables", {}))
            assert "count: int = 7" in listed
            assert "big: str, length 50000000" in listed
            assert "helper" not in listed and "_private" not in listed
            hidden = texts(await mcp.call_tool("list_variables", {"include_hidden": True}))
            assert "helper" in hidden and "_private" in hidden
            started = time.monotonic()
            big = await mcp.call_tool("inspect_variable", {"name": "big"})
            assert time.monotonic() - started < 5
            assert len(texts(big)) < 25_000 and "50,000,000 in all" in texts(big)
            missing = await mcp.call_tool("inspect_variable", {"name": "cuont"})
            assert missing.is_error and "count" in texts(missing)
            if HAVE_SCIENCE:
                frame = texts(await mcp.call_tool("inspect_variable", {"name": "df"}))
                assert "schema" in frame and "temp" in frame and "float64" in frame
                assert "Oslo" in frame and "mean" in frame  # head and describe()
                array = texts(await mcp.call_tool("inspect_variable", {"name": "arr"}))
                assert "shape (3, 4)" in array and "int64" in array and "[0, 1, 2" in array
                figure = await mcp.call_tool("inspect_variable", {"name": "fig"})
                assert [c.type for c in figure.content] == ["text", "image"]
                assert figure.content[1].mime_type == "image/png"
            error = texts(await mcp.call_tool("last_error", {}))
            assert "ValueError" in error and "bad value 42" in error
            cells_text = texts(await mcp.call_tool("notebook_cells", {"count": 5}))
            assert 'raise ValueError("bad value 42")' in cells_text
            run = await mcp.call_tool("run_code", {"code": "agent_was_here = 1"})
            assert "did not allow" in texts(run)
            # Headless without --allow edit: no cell is inserted (issue 22).
            insert = await mcp.call_tool("insert_cell", {"source": "inserted = 1", "run": True})
            assert "not inserted: the user (or the permission policy) did not allow" in texts(
                insert
            )
            # No notebook front-end with the extension (nbclient): nothing to edit or run.
            edit = await mcp.call_tool("edit_cell", {"cell": 1, "source": "x = 2"})
            assert edit.is_error and "not edited: this notebook's front-end" in texts(edit)
            run_cell = await mcp.call_tool("run_cell", {"cell": "some-id"})
            assert run_cell.is_error and "not run: this notebook's front-end" in texts(run_cell)
        assert (await kernel.run()).strip() == "False"  # the code did not run

    in_kernel(tmp_path, cells, body, kernel)


def test_run_code_allowed_and_a_wrong_token_refused(tmp_path: Path, kernel: SharedKernel) -> None:
    cells = [
        FIRST_ENTRY,
        "%config AcpNotebook.allow = ['execute']",
        open_session("b"),
        ENTRY.format(name="b"),
        "print(answer, type(answer).__name__)",
    ]

    async def body(kernel: Kernel) -> None:
        # The first entry's socket listens before the entry is handed out: an agent may start
        # the relay while it answers session/new, before the kernel's loop runs anything else.
        assert (await kernel.run()).strip().endswith("connected at once")
        await kernel.run(2)
        entry = await kernel.entry()
        async with Client(params(entry)) as mcp:
            code = (
                "answer = 6 * 7\nprint('printed', answer)\n"
                "import sys\nprint('oops', file=sys.stderr)\nanswer"
            )
            run = texts(await mcp.call_tool("run_code", {"code": code}))
            assert "stdout:\nprinted 42" in run and "stderr:\noops" in run
            assert "result:\n42" in run
            failed = await mcp.call_tool("run_code", {"code": "1 / 0"})
            assert failed.is_error and "ZeroDivisionError" in texts(failed)
            awaiting = await mcp.call_tool(
                "run_code", {"code": "import asyncio\nawait asyncio.sleep(0)"}
            )
            assert awaiting.is_error and "SyntaxError" in texts(awaiting)
        assert (await kernel.run()).strip() == "42 int"
        wrong = relay(entry, token="not-the-token")
        _, err = wrong.communicate(timeout=30)
        assert wrong.returncode == 1 and b"refused" in err and b"unknown token" in err
        with socket.socket(socket.AF_UNIX) as raw:  # no relay at all: the same refusal
            raw.settimeout(10)
            raw.connect(entry["args"][-1])
            raw.sendall(kernel_mcp.HELLO + b" guess\n")
            assert raw.recv(100).startswith(b"ERR ")

    in_kernel(tmp_path, cells, body, kernel)


def test_the_relay_goes_with_its_session_and_with_the_kernel(tmp_path: Path) -> None:
    cells = [
        open_session("c"),
        ENTRY.format(name="c"),
        open_session("d"),
        ENTRY.format(name="d"),
        "%agent close --session c",
    ]
    relays: list[subprocess.Popen[bytes]] = []
    socket_dir: list[Path] = []

    async def body(kernel: Kernel) -> None:
        await kernel.run()
        first = await kernel.entry()
        await kernel.run()
        second = await kernel.entry()
        socket_dir.append(Path(second["args"][-1]).parent)
        relays.extend([relay(first), relay(second)])
        await kernel.run()  # session c closes: its relay ends, d's stays
        await until(lambda: relays[0].poll() is not None, 15, "c's relay to exit")
        assert relays[1].poll() is None
        refused = relay(first)  # and c's token is refused from now on
        _, err = refused.communicate(timeout=30)
        assert refused.returncode == 1 and b"has ended" in err

    try:
        in_kernel(tmp_path, cells, body)
        # The kernel shut down: d's relay saw its socket close and exited, nothing is left.
        for proc in relays:
            proc.wait(timeout=15)
            assert process_gone(proc.pid)
        # And nobody can connect any more (a kernel that exits cleanly also removes the
        # directory; one killed outright leaves it, with a socket nobody listens on).
        with socket.socket(socket.AF_UNIX) as probe, pytest.raises(OSError):
            probe.connect(str(socket_dir[0] / "kernel.sock"))
    finally:
        for proc in relays:
            closed(proc)


def test_without_a_socket_there_are_no_tools_and_the_cell_still_runs(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    deep = tmp_path / ("d" * 120)  # a Unix socket path may not be this long: bind fails
    deep.mkdir()
    cells = [open_session("e"), ENTRY.format(name="e")]

    async def body(kernel: Kernel) -> None:
        assert "echo: hello" in await kernel.run()
        assert (await kernel.run()).strip().splitlines()[-1] == "[]"

    in_kernel(tmp_path, cells, body, kernel, XDG_RUNTIME_DIR=str(deep))


def test_the_relays_token_is_not_left_in_its_proc_environ(tmp_path: Path) -> None:
    """The relay popped its token from `os.environ`, which only drops the C pointer to it: the
    bytes stayed in its environment block, which `/proc/<pid>/environ` shows to any process of
    the same user (another agent's terminal, say) for as long as the relay runs."""
    path = str(tmp_path / "kernel.sock")
    token = "t0ken-" + "x" * 40
    entry = {
        "command": sys.executable,
        "args": ["-P", "-m", "acp_notebook.kernel_tools.relay", "--socket", path],
        "env": [{"name": kernel_mcp.TOKEN_ENV, "value": token}, {"name": "MARK", "value": "kept"}],
    }
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(1)
        listener.settimeout(30)
        proc = relay(entry)
        try:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(30)
                hello = conn.recv(1024)  # it has read its token and is past the start
                assert hello == kernel_mcp.HELLO + b" " + token.encode() + b"\n"
                environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
                assert token.encode() not in environ
                assert b"\0MARK=kept\0" in environ  # the rest of the block is intact
                conn.sendall(kernel_mcp.OK + b"\n")
            proc.stdin.close()  # type: ignore[union-attr]
            assert proc.wait(timeout=30) == 0
        finally:
            closed(proc)


SECRET = "sk-test-" + "q7Zr2Lx9" * 4
KEYED = """\
import os
key = os.environ["ACPNB_TEST_API_KEY"]
config = {"key": key, "model": "m-1"}
"""


def test_every_tool_masks_a_secret_alike(tmp_path: Path, kernel: SharedKernel) -> None:
    """`inspect_variable` (and `list_variables`) handed the agent a variable holding a key as it
    was, while `run_code`'s `print(key)` was masked: one rule now, every answer masked."""
    cells = [
        KEYED,
        "%config AcpNotebook.allow = ['execute']",
        open_session("m"),
        ENTRY.format(name="m"),
    ]

    async def body(kernel: Kernel) -> None:
        await kernel.run(3)
        entry = await kernel.entry()
        async with Client(params(entry)) as mcp:
            answers = {
                "inspect": texts(await mcp.call_tool("inspect_variable", {"name": "key"})),
                "inspect a dict": texts(
                    await mcp.call_tool("inspect_variable", {"name": "config"})
                ),
                "list": texts(await mcp.call_tool("list_variables", {})),
                "run": texts(await mcp.call_tool("run_code", {"code": "print(key)\nconfig"})),
            }
        for tool, said in answers.items():
            assert SECRET[:16] not in said and "[redacted]" in said, (tool, said)
        assert "'model': 'm-1'" in answers["inspect a dict"]

    in_kernel(tmp_path, cells, body, kernel, ACPNB_TEST_API_KEY=SECRET)
