"""The kernel tools' listener under a flood (issue 20, item 7): 957 connections opened with a
token were all kept until the kernel ran out of file descriptors, and the accept that failed
with EMFILE ended the listener for the kernel's life: every later relay was refused.

Real kernels (nbclient), raw connections to the kernel's socket, then a relay as an agent starts
it (the `mcp` SDK's client) to show that the tools still answer. The test process's shared kernel
(reset before and after: a new runtime, a new listener), except for the test that lowers the
kernel's limit of file descriptors: a kernel of its own.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from mcp.client import Client

from acp_notebook.kernel_tools import relay as kernel_mcp
from tests.kernel.test_kernel_mcp import ENTRY, Kernel, in_kernel, open_session, params
from tests.polling import until
from tests.shared_kernel import SharedKernel


def token_of(entry: dict[str, Any]) -> str:
    return str({e["name"]: e["value"] for e in entry["env"]}[kernel_mcp.TOKEN_ENV])


def connect(entry: dict[str, Any], token: str | None = None) -> socket.socket:
    """A raw connection; with `token`, its handshake sent."""
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(entry["args"][-1])  # blocking: a full backlog waits (non-blocking: EAGAIN)
    sock.settimeout(30)  # every answer below comes well within the kernel's own deadlines
    if token is not None:
        sock.sendall(kernel_mcp.HELLO + b" " + token.encode() + b"\n")
    return sock


def answer(sock: socket.socket) -> bytes:
    """The kernel's one-line answer (b"" if it closed without one)."""
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = sock.recv(1)
        except ConnectionResetError:
            return b"(reset)"
        if not chunk:
            break
        data += chunk
    return data.strip()


async def tools_answer(entry: dict[str, Any]) -> None:
    async with Client(params(entry)) as mcp:
        assert "run_code" in {t.name for t in (await mcp.list_tools()).tools}


def test_connections_are_bounded_and_a_legitimate_relay_still_works(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    cells = [open_session("a"), ENTRY.format(name="a"), open_session("b"), ENTRY.format(name="b")]

    async def body(kernel: Kernel) -> None:
        await kernel.run()
        first = await kernel.entry()
        await kernel.run()
        second = await kernel.entry()
        # Silent connections: a few wait for their token (closed at the deadline), the rest
        # are refused at once.
        silent = [connect(first) for _ in range(40)]
        refusals = [answer(s) for s in silent]
        busy = [r for r in refusals if b"too many connections" in r]
        assert len(busy) >= 40 - 8, refusals
        assert all(r.startswith(b"ERR ") for r in refusals), refusals  # the rest: at the deadline
        for sock in silent:
            sock.close()
        # With the token: a few connections, not hundreds.
        hogs = [connect(first, token_of(first)) for _ in range(20)]
        answers = [answer(s) for s in hogs]
        assert answers.count(b"OK") == 4, answers
        assert answers.count(b"ERR too many connections with this token") == 16, answers
        await tools_answer(second)  # another session's relay is not held up
        for sock in hogs:
            sock.close()

        def first_token_works() -> bool:  # once the kernel saw the hogs close
            with connect(first, token_of(first)) as probe:
                return answer(probe) == b"OK"

        await until(first_token_works, 30, "the first session's token to work again")
        await tools_answer(first)

    in_kernel(tmp_path, cells, body, kernel)


def test_silent_connections_held_open_do_not_keep_a_relay_out(
    tmp_path: Path, kernel: SharedKernel
) -> None:
    """Any process of the user (the agent's shell) held `MAX_PENDING` silent connections, each
    renewed at its deadline: every relay that came meanwhile was refused ("too many
    connections") and its session had no kernel tools. The oldest silent one now makes room."""
    from acp_notebook.kernel_tools.server import MAX_PENDING

    cells = [open_session("a"), ENTRY.format(name="a")]

    async def body(kernel: Kernel) -> None:
        await kernel.run()
        entry = await kernel.entry()
        silent = [connect(entry) for _ in range(MAX_PENDING)]
        try:
            # Each was accepted and waits for its token (the probe's answer shows the kernel
            # has seen them all: it is answered after them).
            with connect(entry, token_of(entry)) as probe:
                assert answer(probe) == b"OK"
            await tools_answer(entry)  # a relay, while silent connections keep coming
            assert answer(silent[0]).startswith(b"ERR too many connections"), "made room"
        finally:
            for sock in silent:
                sock.close()

    in_kernel(tmp_path, cells, body, kernel)


LIMIT = """\
import os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 2, hard))
print("limited")
"""
UNLIMIT = "resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))\nprint('unlimited')"


def test_the_listener_survives_running_out_of_file_descriptors(tmp_path: Path) -> None:
    cells = [open_session("a"), ENTRY.format(name="a"), LIMIT, UNLIMIT]

    async def body(kernel: Kernel) -> None:
        await kernel.run()
        entry = await kernel.entry()
        said = await kernel.run()
        assert said.strip() == "limited", said
        # The kernel has two descriptors left: the first connections take them, the next
        # accept fails with EMFILE; those connections are told so, not left hanging.
        flood = [connect(entry) for _ in range(10)]
        refusals = [answer(s) for s in flood]
        assert any(b"out of file descriptors" in r for r in refusals), refusals
        for sock in flood:
            sock.close()
        said = await kernel.run()
        assert said.strip() == "unlimited", said
        await tools_answer(entry)  # the listener still accepts

    in_kernel(tmp_path, cells, body)
