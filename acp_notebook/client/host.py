"""What a session, and the code that opens sessions, need of their client.

`Client` is the one implementation. Typing `Session` and `opening.py` against this protocol
rather than against `Client` keeps the imports pointing one way: `client.py` builds sessions,
sessions never import `client.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .connection import Connection
from .registry import SessionRegistry
from .runner import AgentLink
from .serving.terminal import TerminalSlots


class SessionHost(AgentLink, Protocol):
    """The client of a session: its agent's facts, its connection and its session table
    (and, from `AgentLink`, what the session's turn runner needs)."""

    cwd: str
    agent_info: dict[str, Any]
    agent_capabilities: dict[str, Any]
    auth_methods: list[dict[str, Any]]
    registry: SessionRegistry[Any]
    terminal_slots: TerminalSlots

    @property
    def session_capabilities(self) -> dict[str, Any]: ...

    @property
    def authenticated(self) -> bool: ...

    @property
    def closed(self) -> bool: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def stderr_tail(self) -> str: ...

    @property
    def stderr_mark(self) -> int: ...

    def stderr_since(self, mark: int) -> str: ...

    def mask(self, secrets: Iterable[str]) -> None: ...

    async def live_connection(self) -> Connection: ...

    async def open_new(
        self,
        cwd: str,
        mcp_servers: list[dict[str, Any]],
        additional_directories: list[str],
        system_prompt: str,
    ) -> tuple[str, dict[str, Any]]: ...

    async def authenticate(
        self, method_id: str, *, on_output: Callable[[str], None] | None = None
    ) -> None: ...

    async def delete_session(self, session_id: str) -> None: ...
