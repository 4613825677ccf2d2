"""One exception family, named for the condition. Translated once, at the boundary that sees it.

A turn never raises these from `await turn.finished`: it resolves to a result whose `error` holds
the message. They are raised by calls that cannot give a result: connecting, creating or loading
a session, a JSON-RPC request the agent answered with an error, bad input.
"""

from __future__ import annotations

from typing import Any


class AcpError(Exception):
    """Base of every error acp_notebook raises on purpose."""


class AgentStartError(AcpError):
    """The agent command could not be started (not found, not executable, exited at once)."""


class RequestTimeoutError(AcpError, TimeoutError):
    """The agent did not answer a request in time; it was told with `$/cancel_request`.

    Also a `TimeoutError`, so `except TimeoutError` catches it. `method`, `agent` and `timeout`
    say which request, to which agent, waited how long.
    """

    def __init__(self, method: str, agent: str, timeout: float, detail: str = "") -> None:
        super().__init__(f"the agent {agent} did not answer {method} within {timeout:g} s"
                         f"{detail}")
        self.method = method
        self.agent = agent
        self.timeout = timeout


class AgentStartTimeoutError(AgentStartError, RequestTimeoutError):
    """`initialize` was not answered in time: the agent could not be started (and was stopped)."""


class AgentExitedError(AcpError):
    """The agent process exited or closed its output while the client still needed it."""

    def __init__(self, message: str, *, returncode: int | None = None,
                 stderr_tail: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class ProtocolError(AcpError):
    """The agent broke the protocol: garbage on stdout, an unsupported version, bad replies."""


class RequestError(AcpError):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{method} failed: {message} (JSON-RPC error {code})")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


class AuthRequiredError(RequestError):
    """`session/new` answered -32000: the agent wants `authenticate` first."""

    def __init__(self, method: str, code: int, message: str, data: Any = None,
                 auth_methods: list[dict[str, Any]] | None = None) -> None:
        super().__init__(method, code, message, data)
        self.auth_methods = auth_methods or []
        names = ", ".join(f"{m.get('id')} ({m.get('name')})" for m in self.auth_methods)
        if names:
            self.args = (f"{self.args[0]}. Authenticate with one of: {names}",)


class CapabilityError(AcpError):
    """The agent does not advertise what this call needs (load, resume, list, close, modes...)."""


class PromptError(AcpError, ValueError):
    """The prompt input is invalid: empty, a bad context tag, an unreadable file."""


class ClientClosedError(AcpError):
    """The client or session was closed."""


class TurnStateError(AcpError, RuntimeError):
    """A turn was moved in a way its state machine does not allow (a bug in the caller)."""
