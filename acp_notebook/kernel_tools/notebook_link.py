"""The kernel's end of the JupyterLab extension's comm (labextension/): the live notebook.

The extension opens one comm (target `TARGET`) per notebook session with that notebook's
kernel. Over it the kernel's cell tools (`notebook_edit`) send requests (`{"request": n, "op":
...}`) and await the reply of the same number: the live cells, an insert, a run. A comm belongs
to the front-end connection that opened it (its messages' `session`); a turn belongs to the
connection whose `%%agent` cell started it (`note_origin`): a turn's operations go to that
notebook's comm only, never to another notebook that shares the kernel.

Light: the target is registered at extension load (the front-end opens the comm when it
connects, before any `%%agent`), and this module imports only the standard library then.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import weakref
from dataclasses import dataclass
from typing import Any

TARGET = "acp_notebook.notebook"
PROTOCOL = 1
#: Seconds a request waits for its reply (a run waits for its cell instead, see `request`).
REPLY_TIMEOUT = 15.0
#: Set by `acp-notebook run` for its kernels (run/execute.py, `CELLS_ENV` there): a random token
#: that marks the cells a turn inserted, for the runner to save below the turn's cell.
CELLS_ENV = "ACP_NOTEBOOK_RUN_CELLS"
_runner_token: str | None = None


class FrontEndError(Exception):
    """The front-end did not do what it was asked: it said why, closed, or did not answer."""


@dataclass(frozen=True)
class Origin:
    """Where a turn's `%%agent` cell ran: the front-end connection and the cell's id, as the
    execute request said (JupyterLab and Notebook 7 send both; other front-ends may not), and
    whether a person is there (a widget front-end: not nbclient or the headless runner)."""

    client: str | None
    cell_id: str | None
    interactive: bool = False


class Link:
    """One notebook's comm: requests out, replies in."""

    def __init__(self, comm: Any, client: str | None) -> None:
        self.comm = comm
        self.client = client
        self.closed = False
        self._numbers = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        comm.on_msg(self._on_msg)
        comm.on_close(self._on_close)

    async def request(self, op: str, timeout: float | None, **fields: Any) -> dict[str, Any]:
        """Ask the front-end to do `op`; its reply (`ok` true), or FrontEndError."""
        if self.closed:
            raise FrontEndError("the notebook's front-end has closed its link")
        number = next(self._numbers)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[number] = future
        try:
            self.comm.send({"request": number, "op": op, **fields})
            reply = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise FrontEndError("the notebook's front-end did not answer in time") from None
        finally:
            self._waiting.pop(number, None)
        if reply.get("ok") is not True:
            error = reply.get("error")
            raise FrontEndError(str(error)[:500] if error else "the front-end refused")
        return reply

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data")
        number = data.get("reply") if isinstance(data, dict) else None
        future = self._waiting.get(number) if isinstance(number, int) else None
        if future is not None and not future.done():
            future.set_result(data)

    def _on_close(self, msg: Any = None) -> None:
        self.closed = True
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(FrontEndError("the notebook's front-end closed its link"))
        if _LINKS.get(self.client) is self:
            del _LINKS[self.client]


#: The open links by front-end connection (the newest wins: a reconnected page opens anew).
_LINKS: dict[str | None, Link] = {}
#: Each turn's origin, noted as its cell started it.
_ORIGINS: weakref.WeakKeyDictionary[object, Origin] = weakref.WeakKeyDictionary()


def _opened(comm: Any, msg: dict[str, Any]) -> None:
    client = msg.get("header", {}).get("session")
    client = client if isinstance(client, str) else None
    old = _LINKS.get(client)
    if old is not None and not old.closed:
        old.closed = True  # replaced: its page reloaded, or its kernel connection restarted
    _LINKS[client] = Link(comm, client)


def register() -> None:
    """The comm target, at extension load (the kernel's comm manager, as ipywidgets uses)."""
    import comm

    global _runner_token
    # Taken out of the environment, so the agent (a child of the kernel) does not inherit it.
    _runner_token = os.environ.pop(CELLS_ENV, None) or _runner_token
    comm.get_comm_manager().register_target(TARGET, _opened)


def runner_token() -> str | None:
    """The token of `acp-notebook run`, when it runs this kernel (headless, no comm)."""
    return _runner_token


def current_origin(interactive: bool = False) -> Origin:
    """The origin of the cell running now (the execute request's `session` and `cellId`)."""
    from IPython import get_ipython

    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    parent: Any = None
    try:
        parent = kernel.get_parent("shell") if kernel is not None else None
    except Exception:  # an older kernel, or no request: no origin
        parent = None
    parent = parent if isinstance(parent, dict) else {}
    client = parent.get("header", {}).get("session")
    cell_id = parent.get("metadata", {}).get("cellId")
    return Origin(
        client if isinstance(client, str) else None,
        cell_id if isinstance(cell_id, str) and len(cell_id) <= 200 else None,
        interactive,
    )


def note_origin(turn: object, interactive: bool) -> None:
    """Remember where `turn`'s cell ran (called as the cell starts the turn)."""
    _ORIGINS[turn] = current_origin(interactive)


def origin_of(turn: object | None) -> Origin | None:
    return _ORIGINS.get(turn) if turn is not None else None


def link_for(origin: Origin | None) -> Link | None:
    """The open link of the notebook the turn's cell ran in, if it has the extension."""
    if origin is None or origin.client is None:
        return None
    link = _LINKS.get(origin.client)
    return link if link is not None and not link.closed else None
