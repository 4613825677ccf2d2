"""How many terminals one client may have unreleased at once, across its sessions."""

from __future__ import annotations

from ..protocol import jsonrpc as rpc
from ..protocol import methods
from .connection import RpcError

DEFAULT_MAX_TERMINALS = 16


class TerminalSlots:
    """How many terminals one client may have unreleased at once, across its sessions."""

    def __init__(self, limit: int = DEFAULT_MAX_TERMINALS) -> None:
        self.limit = limit
        self.used = 0

    def take(self) -> None:
        if self.used >= self.limit:
            raise RpcError(
                rpc.INTERNAL_ERROR,
                f"too many terminals: {self.used} are open, the limit is {self.limit}; "
                f"release one ({methods.TERMINAL_RELEASE}) before creating another",
            )
        self.used += 1

    def give_back(self) -> None:
        self.used = max(0, self.used - 1)
