"""The JSON-RPC connection on its own, over a stream that has already ended (no agent needed)."""

from __future__ import annotations

import traceback
from typing import Any

import anyio
import pytest

from acp_notebook.client.connection import Connection
from acp_notebook.client.process import StderrTail
from acp_notebook.errors import AgentExitedError
from acp_notebook.protocol import methods

pytestmark = pytest.mark.anyio


class EndedStream:
    """The part of a transport a Connection uses, for an agent that exited with code 3."""

    def __init__(self) -> None:
        self.stderr = StderrTail()
        self.killed_by_us = False

    async def receive(self) -> bytes:
        raise anyio.EndOfStream

    async def send(self, data: bytes) -> None:
        raise BrokenPipeError

    async def wait(self, timeout: float) -> int | None:
        return 3


async def closed_connection() -> Connection:
    async def on_request(method: str, params: Any) -> Any:
        return None

    conn = Connection(
        EndedStream(),
        on_update=lambda _: None,  # type: ignore[arg-type]
        on_request=on_request,
        on_protocol_error=lambda _: None,
    )
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.run, tg)
    assert isinstance(conn.closed, AgentExitedError)
    return conn


async def test_each_request_after_the_close_gets_a_fresh_error_chained_to_the_cause() -> None:
    conn = await closed_connection()
    raised: list[AgentExitedError] = []
    for _ in range(5):
        with pytest.raises(AgentExitedError) as info:
            await conn.request(methods.SESSION_NEW, {})
        raised.append(info.value)
    # A new object each time, saying the same thing, with the close as its cause; the stored
    # reason itself is never raised, so its traceback never grows.
    assert len({id(exc) for exc in raised}) == len(raised)
    assert all(exc is not conn.closed for exc in raised)
    assert all(exc.__cause__ is conn.closed for exc in raised)
    assert all(str(exc) == str(conn.closed) and exc.returncode == 3 for exc in raised)
    depths = [len(traceback.extract_tb(exc.__traceback__)) for exc in raised]
    assert depths == [depths[0]] * len(depths), depths
    assert conn.closed.__traceback__ is None


async def test_a_request_waiting_when_the_connection_closes_gets_its_own_error() -> None:
    class Silent(EndedStream):
        def __init__(self) -> None:
            super().__init__()
            self.end = anyio.Event()

        async def receive(self) -> bytes:
            await self.end.wait()
            raise anyio.EndOfStream

        async def send(self, data: bytes) -> None:
            pass

    stream = Silent()

    async def on_request(method: str, params: Any) -> Any:
        return None

    conn = Connection(
        stream,
        on_update=lambda _: None,  # type: ignore[arg-type]
        on_request=on_request,
        on_protocol_error=lambda _: None,
    )
    errors: list[BaseException] = []

    async def ask() -> None:
        try:
            await conn.request(methods.INITIALIZE, {})
        except AgentExitedError as exc:
            errors.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.run, tg)
            tg.start_soon(ask)
            tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            stream.end.set()
    assert len(errors) == 2 and errors[0] is not errors[1]
    assert all(exc.__cause__ is conn.closed for exc in errors)
