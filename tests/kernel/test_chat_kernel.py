"""The chat widget and the turn's controls in real kernels (nbclient), clicked as JupyterLab
clicks them: over a kernel subshell.

JupyterLab 4.4+ sends widget messages over subshells, and ipykernel handles each subshell in its
own thread with its own event loop. A widget callback that started its work on "the running
loop" started it on that thread's loop, away from the agent's client: the chat's Stop failed with
"... is bound to a different event loop" and took the agent's connection (and the session) down.
These tests send their clicks and messages the same way, in the test process's shared kernel
(reset before and after: tests/shared_kernel.py), with a subshell of their own, deleted after.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.nb_util import in_shared_kernel, kernel_env, new_nb, text
from tests.shared_kernel import SharedKernel

# Runs in the kernel: wait (bounded by the test's timeout) for the chat's condition.
WAIT = "while not ({}):\n    await asyncio.sleep(0.02)\n"


async def subshell(client: Any) -> str:
    """A new subshell of the kernel (what JupyterLab opens for widget messages)."""
    kc = client.kc
    request = kc.session.msg("create_subshell_request", {})
    kc.control_channel.send(request)
    while True:
        reply = await kc.control_channel.get_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
            return str(reply["content"]["subshell_id"])


async def delete_subshell(client: Any, shell: str) -> None:
    """The subshell's thread ended: the shared kernel does not keep one per test."""
    kc = client.kc
    request = kc.session.msg("delete_subshell_request", {"subshell_id": shell})
    kc.control_channel.send(request)
    while True:
        reply = await kc.control_channel.get_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
            assert reply["content"]["status"] == "ok", reply["content"]
            return


def comm_msg(client: Any, shell: str, comm_id: str, data: dict[str, Any]) -> None:
    kc = client.kc
    msg = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
    msg["header"]["subshell_id"] = shell
    kc.shell_channel.send(msg)


def model_of(client: Any, name: str, **state: Any) -> str:
    """The newest widget model of that kind and state (an earlier cell's may linger, closed)."""
    for comm_id, found in reversed(client.widget_state.items()):
        if found.get("_model_name") == name and all(found.get(k) == v for k, v in state.items()):
            return comm_id
    raise AssertionError(f"no {name} {state} in {list(client.widget_state.values())}")


def test_chat_stop_and_send_over_a_subshell_keep_the_session(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    cells = [
        "%agent chat -s c",
        "import asyncio, json\nchat = _\nprint(type(chat).__name__, chat.session.id)",
        WAIT.format("chat.session.running is not None"),
        WAIT.format("chat.session.running is None and len(chat.records) == 1"),
        WAIT.format("len(chat.records) == 2 and chat.session.running is None"),
        "%%agent --session c --out after\n/plan from a cell",
        WAIT.format("len(chat.records) == 3"),  # the chat shows the cell's turn too (_follow)
        "print(json.dumps({'chat': chat.session.id, 'cell': after.session_id,\n"
        "    'closed': chat.session.closed, 'views': [r['text/html'] for r in chat.records],\n"
        "    'log': len(chat.log.children),\n"
        "    'status': chat.status.value}))",
        "chat.close()",
    ]
    nb = new_nb(*cells)
    env = kernel_env(tmp_path, ACP_NOTEBOOK_DEMO_SPEED="1")  # /slow takes ~20 s unstopped

    async def main(client: Any) -> None:
        async with client.async_setup_kernel(env=env):
            await client.async_execute_cell(nb.cells[0], 0)
            await client.async_execute_cell(nb.cells[1], 1)
            shell = await subshell(client)
            box = model_of(client, "AnyModel", _anywidget_id="acp_notebook.chat.input.ChatInput")
            stop = model_of(client, "ButtonModel", description="Stop")
            custom = {
                "method": "custom",
                "content": {"event": "submit", "text": "/slow a long story"},
            }
            comm_msg(client, shell, box, custom)
            await client.async_execute_cell(nb.cells[2], 2)  # the turn runs
            comm_msg(client, shell, stop, {"method": "custom", "content": {"event": "click"}})
            await client.async_execute_cell(nb.cells[3], 3)  # and ended
            again = {"method": "custom", "content": {"event": "submit", "text": "/plan again"}}
            comm_msg(client, shell, box, again)
            await client.async_execute_cell(nb.cells[4], 4)
            for index in (5, 6, 7, 8):
                await client.async_execute_cell(nb.cells[index], index)
            await delete_subshell(client, shell)

    with in_shared_kernel(kernel, nb, tmp_path, env) as client:
        asyncio.run(main(client))
    said = json.loads(text(nb.cells[7]).strip().splitlines()[-1])
    session_id = text(nb.cells[1]).split()[-1]
    # Stop cancelled the turn cleanly; the next message and the next cell continue the session.
    assert said["chat"] == session_id == said["cell"], said
    assert not said["closed"] and said["log"] == 3
    first, second, from_cell = said["views"]
    assert "from a cell" in from_cell
    assert "Cancelled" in first and "a long story" in first
    assert "different event loop" not in first + second + said["status"]
    assert "again" in second and "Demo turn 2" in second, second
    assert "different event loop" not in "".join(text(c) for c in nb.cells)
    # Closed, the chat's output is a line and its record after it holds the conversation: the
    # user's messages and the three turns, one stylesheet, no widget left to be "not found".
    shown, record = (o["data"] for o in nb.cells[0].outputs)
    assert list(shown) == ["text/plain"] and "closed" in shown["text/plain"]
    html = record["text/html"]
    assert html.count("<style>") == 1 and "a long story" in html and "Demo turn 2" in html
    assert "You: /plan again" in record["text/plain"]
    assert "You: /plan from a cell" in record["text/plain"]
    assert len(record["application/vnd.acp-notebook.chat+json"]["turns"]) == 3


def test_a_cells_stop_and_permission_buttons_work_over_a_subshell(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    cells = [
        '%config AcpNotebook.interactive = "yes"',
        "%%agent --out edited\nPlease add a line about subshells to the notes.",
        "%%agent --out slow\n/slow tell me a long story",
        "%%agent --out after\n/plan still there?",
        "import json\nprint(json.dumps([edited.success, edited.permissions[0].option_id,\n"
        "    slow.stop_reason, after.success, len({edited.session_id, slow.session_id,\n"
        "    after.session_id})]))",
    ]
    nb = new_nb(*cells)
    env = kernel_env(tmp_path, ACP_NOTEBOOK_DEMO_SPEED="1")

    def asked(client: Any, view: str) -> dict[str, Any] | None:
        """The permission request the kernel last showed in this turn view, if any."""
        for _, msg in reversed(client.messages):
            content = msg["content"]
            if msg["msg_type"] != "comm_msg" or content.get("comm_id") != view:
                continue
            pending = (content["data"].get("content") or {}).get("head", {}).get("pending")
            if pending:
                return dict(pending[0])
        return None

    async def press_when_shown(client: Any, shell: str, what: str) -> None:
        """As the page does: a `choose` (the "Allow" option) or a `stop` message from the
        cell's turn view (an anywidget), sent over the subshell."""
        seen = set(client.widget_state)  # an earlier cell's view, closed
        while True:
            views = [
                i for i, s in client.widget_state.items() if s.get("_model_name") == "AnyModel"
            ]
            new = [v for v in views if v not in seen]
            request = asked(client, new[-1]) if new and what == "Allow" else None
            if new and (what == "Stop" or request):
                break
            await asyncio.sleep(0.02)  # nbclient records the messages as the cell runs
        if what == "Stop":
            message: dict[str, Any] = {"type": "stop"}
        else:
            assert request is not None
            option = next(o for o in request["options"] if o["label"] == what)
            message = {"type": "choose", "id": request["id"], "option": option["id"]}
        comm_msg(client, shell, new[-1], {"method": "custom", "content": message})

    async def main(client: Any) -> None:
        async with client.async_setup_kernel(env=env):
            await client.async_execute_cell(nb.cells[0], 0)
            shell = await subshell(client)
            for index, what in ((1, "Allow"), (2, "Stop")):
                running = asyncio.create_task(client.async_execute_cell(nb.cells[index], index))
                await asyncio.wait_for(press_when_shown(client, shell, what), 30)
                await asyncio.wait_for(running, 30)
            for index in (3, 4):
                await client.async_execute_cell(nb.cells[index], index)
            await delete_subshell(client, shell)

    with in_shared_kernel(kernel, nb, tmp_path, env) as client:
        asyncio.run(main(client))
    said = json.loads(text(nb.cells[4]).strip().splitlines()[-1])
    assert said == [True, "allow", "cancelled", True, 1], said
