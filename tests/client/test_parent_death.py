"""An agent dies with the process that started it, even when that process is SIGKILLed.

No atexit hook runs then, and an agent stuck in a turn may ignore both the closed stdin and
SIGTERM. The client starts agents so the kernel's death kills them (Linux: PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import anyio
import pytest

from tests.client_helpers import gone

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's"),
]

# An agent as stubborn as they come: once prompted it ignores SIGTERM, a closed stdin and a
# broken stdout, and sleeps. Only SIGKILL ends it.
STUBBORN_AGENT = textwrap.dedent("""
    import json, signal, sys, time
    def send(msg):
        sys.stdout.write(json.dumps(msg) + "\\n"); sys.stdout.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
                  "update": {"sessionUpdate": "agent_message_chunk",
                             "content": {"type": "text", "text": "working"}}}})
            while True:
                time.sleep(60)
""")

# A client in its own process: it starts an agent that ignores SIGTERM and hangs in a turn
# ignoring cancels and stdin, prints the agent's pid, then waits to be killed.
CLIENT = textwrap.dedent("""
    import sys, anyio, acp_notebook
    async def main(argv, prompt):
        async with acp_notebook.connect(argv) as client:
            session = await client.new_session()
            working = anyio.Event()
            def seen(m):
                if "working" in getattr(getattr(m, "part", None), "text", ""):
                    working.set()
            session.subscribe(seen)
            turn = await session.prompt(prompt)
            await working.wait()  # the agent now ignores cancels and its closed stdin
            print(client.pid, flush=True)
            await turn.finished
    anyio.run(main, sys.argv[2:], sys.argv[1])
""")


async def test_agent_dies_when_the_client_process_is_killed() -> None:
    argv = [sys.executable, "-c", STUBBORN_AGENT]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    async with await anyio.open_process(
        [sys.executable, "-c", CLIENT, "work forever", *argv], stderr=subprocess.DEVNULL, cwd=repo
    ) as client:
        assert client.stdout is not None
        with anyio.fail_after(30):
            line = await client.stdout.receive()
        agent_pid = int(line.split()[0])
        try:
            assert not await gone(agent_pid, timeout=0.2), "the agent should be running"
            client.kill()  # SIGKILL: no atexit, no clean-up code of the client runs
            await client.wait()
            assert await gone(agent_pid, timeout=10), "the agent outlived its killed client"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(agent_pid, signal.SIGKILL)
