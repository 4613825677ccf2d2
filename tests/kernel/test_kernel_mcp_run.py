"""The agent's code in real kernels (issue 20, items 5 and 6): the kernel's interrupt and the
turn's --timeout stop it, and a turn of the chat waits for the user's running cell.

The scripted agent starts the kernel's entry itself and calls `run_code` (its `mcp` step), in a
`%%agent` cell or in a turn the chat widget starts (its message sent over a subshell, as
JupyterLab sends it).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from tests.agents.script import script
from tests.kernel.test_chat_kernel import comm_msg, delete_subshell, model_of, subshell
from tests.kernel.test_kernel_mcp import ENTRY, Kernel, open_session, params, texts
from tests.nb_util import in_shared_kernel, kernel_env, make_client, new_nb, scripted, text
from tests.polling import until
from tests.shared_kernel import SharedKernel


def run_cell(code: str, options: str = "--allow execute") -> str:
    prompt = script({"mcp": "kernel", "calls": [{"name": "run_code", "arguments": {"code": code}}]})
    return f"%%agent --agent {scripted()} --session s {options}\n{prompt}"


def spin(mark: Path) -> str:
    """Agent code that says it runs (a file), then never ends by itself."""
    return f"open({str(mark)!r}, 'w').close()\nwhile True:\n    pass"


def wait_forever(mark: Path) -> str:
    """`spin` at rest: it blocks the kernel's loop as `spin` does, in `time.sleep` (which a
    signal ends as well), without burning a core until it is stopped."""
    return f"import time\nopen({str(mark)!r}, 'w').close()\nwhile True:\n    time.sleep(0.01)"


def error_of(cell: Any) -> dict[str, Any]:
    (error,) = [o for o in cell.outputs if o["output_type"] == "error"]
    return dict(error)


def in_kernel(
    tmp_path: Path, cells: list[str], body: Any, shared: SharedKernel | None = None
) -> Kernel:
    """A fresh kernel of its own, for the tests that interrupt it; or the `shared` one (reset
    before and after) for those whose code ends otherwise."""
    nb = new_nb(*cells)
    env = kernel_env(tmp_path)

    async def main(kernel: Kernel) -> None:
        async with kernel.client.async_setup_kernel(env=env):
            await body(kernel)

    if shared is None:
        kernel = Kernel(nb, make_client(nb, tmp_path, allow_errors=True))
        asyncio.run(main(kernel))
        return kernel
    with in_shared_kernel(shared, nb, tmp_path, env, allow_errors=True) as client:
        kernel = Kernel(nb, client)
        asyncio.run(main(kernel))
    return kernel


def test_the_kernels_interrupt_stops_the_agents_code_and_the_next_cell_answers(
    tmp_path: Path,
) -> None:
    """`while True: pass` run by the agent went on through three interrupts, and the next cell
    got no reply: ipykernel's interrupt of an awaited cell only queues its cancellation on the
    kernel's loop, which the agent's code blocked."""
    mark = tmp_path / "running"
    cells = [run_cell(spin(mark)), "print('the kernel', 'answers')"]
    took: list[float] = []

    async def body(kernel: Kernel) -> None:
        running = asyncio.create_task(kernel.run())
        await until(mark.exists, 90, "the agent's code to run")
        started = time.monotonic()
        await kernel.client.km.interrupt_kernel()
        done, _ = await asyncio.wait({running}, timeout=30)
        assert done, "the agent's code ran on 30 s after the kernel's interrupt"
        took.append(time.monotonic() - started)
        assert "the kernel answers" in await asyncio.wait_for(kernel.run(), 30)

    kernel = in_kernel(tmp_path, cells, body)
    print(f"[run-code-interrupt] the cell ended {took[0]:.2f} s after the interrupt")
    error = error_of(kernel.nb.cells[0])
    assert error["ename"] == "TurnInterrupted", error


HANGS = """\
class Hangs:  # a lazy object whose repr waits on the network, say
    def __repr__(self):
        open({mark!r}, "w").close()
        while True:
            pass
lazy = Hangs()
"""


@pytest.mark.parametrize("tool", ["run_code", "inspect_variable"])
def test_an_interrupt_stops_the_agents_code_while_no_cell_runs(tmp_path: Path, tool: str) -> None:
    """Between cells (a turn of the chat, say) the kernel ignores SIGINT: the agent's code is
    stopped all the same, the agent is told, and the kernel runs the next cell. A read tool
    runs the user's objects' code (a repr): stopped alike."""
    mark = tmp_path / "running"
    cells = [
        "%config AcpNotebook.allow = ['execute']",
        HANGS.format(mark=str(mark)),
        open_session("i"),
        ENTRY.format(name="i"),
        "print('the kernel', 'answers')",
    ]
    arguments = {"code": spin(mark)} if tool == "run_code" else {"name": "lazy"}

    async def body(kernel: Kernel) -> None:
        await kernel.run(3)
        entry = await kernel.entry()
        async with Client(params(entry)) as mcp:
            call = asyncio.create_task(mcp.call_tool(tool, arguments))
            await until(mark.exists, 60, "the agent's code to run")
            await kernel.client.km.interrupt_kernel()
            done, _ = await asyncio.wait({call}, timeout=30)
            assert done, f"{tool} ran on 30 s after the kernel's interrupt"
            result = call.result()
            said = texts(result)
            assert result.is_error and ("KeyboardInterrupt" in said or "interrupted" in said), said
        assert "the kernel answers" in await asyncio.wait_for(kernel.run(), 30)

    in_kernel(tmp_path, cells, body)


def test_the_turns_timeout_stops_the_agents_code(tmp_path: Path, kernel: SharedKernel) -> None:
    mark = tmp_path / "running"
    # Stopped only by the deadline, 8 s from the turn's start: `spin` would cost 7 s of CPU (the
    # interrupts' tests run it; a timer on the blocked loop fails against either).
    cells = [
        run_cell(wait_forever(mark), "--allow execute --timeout 8"),
        "print('the kernel', 'answers')",
    ]
    took: list[float] = []

    async def body(kernel: Kernel) -> None:
        started = time.monotonic()
        running = asyncio.create_task(kernel.run())
        done, _ = await asyncio.wait({running}, timeout=60)
        assert done, "the agent's code ran on 60 s into a turn of --timeout 8"
        took.append(time.monotonic() - started)
        assert mark.exists()  # it did run, and was stopped
        assert "the kernel answers" in await asyncio.wait_for(kernel.run(), 30)

    ran = in_kernel(tmp_path, cells, body, kernel)
    print(f"[run-code-timeout] the cell of --timeout 8 ended after {took[0]:.2f} s")
    error = error_of(ran.nb.cells[0])
    assert error["ename"] == "TurnFailed" and "--timeout 8" in error["evalue"], error


# The user's cell: it says it runs, then appends to `xs` until the chat's card says the agent's
# code waits (bounded), then a few more: the agent's code, `xs.append(-999)`, must come after all.
USERS_CELL = """\
import asyncio
open({started!r}, "w").close()
for i in range(400):
    if any("Waiting for the running cell" in s for s in seen):
        break
    xs.append(len(xs))
    await asyncio.sleep(0.02)
waited = len(xs) < 400
for i in range(5):
    xs.append(len(xs))
    await asyncio.sleep(0.02)
"""
WAIT = "while not ({}):\n    await asyncio.sleep(0.02)\n"


def test_a_chat_turns_code_waits_for_the_running_cell(tmp_path: Path, kernel: SharedKernel) -> None:
    """A turn the chat started while an async cell of the user's ran was taken for that cell's
    (it started after the cell did): its code ran in the middle of the cell, which printed
    [0, 1, 2, 3, 4, -999, 6, ...]."""
    started = tmp_path / "cell-started"
    cells = [
        "%config AcpNotebook.allow = ['execute']",
        f"%agent chat -s c --agent {scripted()}",
        "import asyncio, json\nchat = _\nseen, xs = [], []\n"
        "unsubscribe = chat.session.subscribe(lambda m: seen.append(repr(m)))",
        USERS_CELL.format(started=str(started)),
        WAIT.format("len(chat.records) == 1 and chat.session.running is None"),
        "print(json.dumps({'xs': xs, 'waited': waited, 'views': chat.records[0]['text/html']}))",
    ]
    nb = new_nb(*cells)
    prompt = script(
        {"mcp": "kernel", "calls": [{"name": "run_code", "arguments": {"code": "xs.append(-999)"}}]}
    )
    env = kernel_env(tmp_path)

    async def main(client: Any) -> None:
        async with client.async_setup_kernel(env=env):
            for index in range(3):
                await client.async_execute_cell(nb.cells[index], index)
            shell = await subshell(client)
            box = model_of(client, "AnyModel", _anywidget_id="acp_notebook.chat.input.ChatInput")
            running = asyncio.create_task(client.async_execute_cell(nb.cells[3], 3))
            await until(started.exists, 30, "the user's cell to start")
            submit = {"method": "custom", "content": {"event": "submit", "text": prompt}}
            comm_msg(client, shell, box, submit)
            await asyncio.wait_for(running, 60)
            for index in (4, 5):
                await asyncio.wait_for(client.async_execute_cell(nb.cells[index], index), 60)
            await delete_subshell(client, shell)

    with in_shared_kernel(kernel, nb, tmp_path, env) as client:
        asyncio.run(main(client))
    said = json.loads(text(nb.cells[5]).strip().splitlines()[-1])
    xs = said["xs"]
    assert said["waited"], "the chat's card never said the code waits for the cell"
    assert xs[-1] == -999 and xs[:-1] == list(range(len(xs) - 1)), xs
    assert "xs.append(-999)" in said["views"]


def test_an_interrupt_stops_a_chat_turns_code_and_ends_the_turn(tmp_path: Path) -> None:
    """The chat's turn runs its code while no cell runs: the kernel's interrupt stops the code
    and cancels the turn, as the chat's Stop does; the next cell answers."""
    mark = tmp_path / "running"
    cells = [
        "%config AcpNotebook.allow = ['execute']",
        f"%agent chat -s c --agent {scripted()}",
        "import asyncio, json\nchat = _",
        WAIT.format("len(chat.records) == 1 and chat.session.running is None"),
        "print(json.dumps(chat.records[0]['text/html']))",
    ]
    nb = new_nb(*cells)
    client = make_client(nb, tmp_path)
    code = spin(mark)
    prompt = script({"mcp": "kernel", "calls": [{"name": "run_code", "arguments": {"code": code}}]})

    async def main() -> None:
        async with client.async_setup_kernel(env=kernel_env(tmp_path)):
            for index in range(3):
                await client.async_execute_cell(nb.cells[index], index)
            shell = await subshell(client)
            box = model_of(client, "AnyModel", _anywidget_id="acp_notebook.chat.input.ChatInput")
            submit = {"method": "custom", "content": {"event": "submit", "text": prompt}}
            comm_msg(client, shell, box, submit)
            await until(mark.exists, 60, "the agent's code to run")
            await client.km.interrupt_kernel()
            for index in (3, 4):
                await asyncio.wait_for(client.async_execute_cell(nb.cells[index], index), 30)

    asyncio.run(main())
    html = json.loads(text(nb.cells[4]).strip().splitlines()[-1])
    assert "Cancelled" in html and "KeyboardInterrupt" in html, html[-3000:]
