"""acp_notebook: talk to any Agent Client Protocol (ACP) agent from Python and Jupyter.

    async with acp_notebook.connect(["gemini", "--acp"]) as client:
        session = await client.new_session()
        turn = await session.prompt("Summarise README.md")
        result = await turn.finished

In a notebook: `%load_ext acp_notebook`, then `%%agent` cells.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    AcpError,
    AgentExitedError,
    AgentStartError,
    AgentStartTimeoutError,
    AuthFailedError,
    AuthRequiredError,
    BudgetExceededError,
    CapabilityError,
    ClientClosedError,
    ConfigError,
    ElicitationError,
    HelpShown,
    InvalidArgumentError,
    InvalidCommandError,
    McpTransportError,
    NotOfferedError,
    PromptError,
    ProtocolError,
    RegistryUnavailable,
    ReplayError,
    RequestError,
    RequestTimeoutError,
    RpcError,
    SchemaError,
    TurnFailed,
    TurnInterrupted,
    TurnStateError,
)
from .protocol.limits import Limits
from .protocol.mutations import (
    Delta,
    Mutation,
    PartUpdated,
    RequestWarning,
    SessionChanged,
    TurnFinished,
    TurnStarted,
)
from .protocol.state import PlanEntry, Usage
from .protocol.subagents import SubagentResult
from .protocol.turn import TurnResult

if TYPE_CHECKING:
    from .client.client import Client, connect
    from .client.options import ClientOptions
    from .client.serving.permissions import PermissionPolicy, PermissionRequest
    from .client.session import Session
    from .client.turn import TurnHandle

# The client layer needs anyio; it is imported on first use so `%load_ext` stays light.
_LAZY = {
    "connect": ".client.client",
    "Client": ".client.client",
    "ClientOptions": ".client.options",
    "Session": ".client.session",
    "TurnHandle": ".client.turn",
    "PermissionPolicy": ".client.serving.permissions",
    "PermissionRequest": ".client.serving.permissions",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'acp_notebook' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as unload

    unload(ipython)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Jupyter Server's entry: `server_extension.py` (compressed kernel websockets)."""
    return [{"module": "acp_notebook.server_extension"}]


__all__ = [
    "AcpError",
    "AgentExitedError",
    "AgentStartError",
    "AgentStartTimeoutError",
    "AuthFailedError",
    "AuthRequiredError",
    "BudgetExceededError",
    "CapabilityError",
    "Client",
    "ClientClosedError",
    "ClientOptions",
    "ConfigError",
    "Delta",
    "ElicitationError",
    "HelpShown",
    "InvalidArgumentError",
    "InvalidCommandError",
    "Limits",
    "McpTransportError",
    "Mutation",
    "NotOfferedError",
    "PartUpdated",
    "PermissionPolicy",
    "PermissionRequest",
    "PlanEntry",
    "PromptError",
    "ProtocolError",
    "RegistryUnavailable",
    "ReplayError",
    "RequestError",
    "RequestTimeoutError",
    "RequestWarning",
    "RpcError",
    "SchemaError",
    "Session",
    "SessionChanged",
    "SubagentResult",
    "TurnFailed",
    "TurnFinished",
    "TurnHandle",
    "TurnInterrupted",
    "TurnResult",
    "TurnStarted",
    "TurnStateError",
    "Usage",
    "__version__",
    "connect",
]
