"""One exception family, named for the condition. Translated once, at the boundary that sees it.

A turn never raises these from `await turn.finished`: it resolves to a result whose `error` holds
the message. They are raised by calls that cannot give a result: connecting, creating or loading
a session, a JSON-RPC request the agent answered with an error, bad input.

Every exception of the package is here, and exported from `acp_notebook`; each is an `AcpError`
but `TurnInterrupted`, a `KeyboardInterrupt` only (`except Exception` must not catch the user's
interrupt). Where a built-in names the same condition (a bad value, a timeout), the class also
subclasses it, so `except ValueError` or `except TimeoutError` catches it too. This module
imports nothing of the package: any layer may import it.
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
        super().__init__(f"the agent {agent} did not answer {method} within {timeout:g} s{detail}")
        self.method = method
        self.agent = agent
        self.timeout = timeout


class AgentStartTimeoutError(AgentStartError, RequestTimeoutError):
    """`initialize` was not answered in time: the agent could not be started (and was stopped)."""


class AgentExitedError(AcpError):
    """The agent process exited or closed its output while the client still needed it."""

    def __init__(
        self, message: str, *, returncode: int | None = None, stderr_tail: str = ""
    ) -> None:
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

    def __init__(
        self,
        method: str,
        code: int,
        message: str,
        data: Any = None,
        auth_methods: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(method, code, message, data)
        self.auth_methods = auth_methods or []
        names = ", ".join(f"{m.get('id')} ({m.get('name')})" for m in self.auth_methods)
        if names:
            self.args = (f"{self.args[0]}. Authenticate with one of: {names}",)


class AuthFailedError(AcpError):
    """A login did not succeed (a terminal auth method exited non-zero or timed out)."""


class CapabilityError(AcpError):
    """The agent does not advertise what this call needs (load, resume, list, close, modes...)."""


class McpTransportError(CapabilityError, ValueError):
    """An MCP server's transport (http, sse) is not one the agent advertises in
    `mcpCapabilities`; the message names the server, the agent and the transport."""


class PromptError(AcpError, ValueError):
    """The prompt input is invalid: empty, a bad context tag, an unreadable file."""


class ClientClosedError(AcpError):
    """The client or session was closed."""


class InvalidArgumentError(AcpError, ValueError):
    """A public call got a value it does not accept: an option out of range, an unknown tool
    kind or permission default, a session name already used for another agent.

    Also a `ValueError`, so `except ValueError` catches it.
    """


class NotOfferedError(InvalidArgumentError):
    """The agent does not offer what was asked: a mode, a config option or one of its values,
    an auth method. The message lists what it offers."""


class InvalidCommandError(InvalidArgumentError, TypeError):
    """The agent command is not a list of strings (a single string would be split wrongly).

    Also a `TypeError`, what it was before it had a class of its own.
    """


class SchemaError(InvalidArgumentError):
    """`output_type=` or `%%agent --schema` is not a pydantic model or type, nor a valid JSON
    schema (or the schema is too big to send)."""


class ConfigError(AcpError, ValueError):
    """A user agent entry is malformed, or the agent named is unknown; the message names the
    entry and the field."""


class RegistryUnavailable(ConfigError):
    """The ACP registry could not be fetched, and no copy of it is cached here
    (`%agent registry`, `acp-notebook agents`)."""


class RpcError(AcpError):
    """Raised by a handler of the agent's requests (fs, terminal, permission) to answer it with
    a JSON-RPC error; the client never raises it to its caller."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class TurnFailed(AcpError):
    """A `%%agent` turn failed: the agent errored, exited, timed out, or refused.

    Raised in the cell so nbclient, papermill and Run All stop on it. `result` is the turn's
    `TurnResult` when there was a turn (None when the agent could not even start).
    """

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result

    def _render_traceback_(self) -> list[str]:
        # IPython's hook (by this name) to show something instead of a Python traceback: the
        # paragraph is the whole story.
        return [f"\x1b[31m{type(self).__name__}\x1b[0m: {self.args[0]}"]


class BudgetExceededError(TurnFailed):
    """The kernel spent its `c.AcpNotebook.max_cost_total`: it refuses new turns (no result)."""


class ElicitationError(AcpError, ValueError):
    """An elicitation cannot be read, or an answer does not fit its form (the message says how).

    `field` names the form's field the answer got wrong ("" when it is not one field's fault),
    so a form can say it next to that field."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class HelpShown(AcpError):
    """`--help` printed the help: the magic stops there, without an error (not a failure)."""


class ReplayError(AcpError, ValueError):
    """A `%%agent` cell cannot be replayed (`ACP_NOTEBOOK_REPLAY`): the recorded notebook is
    missing or malformed, or the cell has no recording, or changed since it was recorded.

    Raised in the cell, like `TurnFailed`, so the run fails; the message names the cell.
    """

    def _render_traceback_(self) -> list[str]:
        # As TurnFailed: the message is the whole story, a Python traceback adds nothing.
        return [f"\x1b[31mReplayError\x1b[0m: {self.args[0]}"]


class TurnInterrupted(KeyboardInterrupt):
    """The kernel's interrupt stopped a `%%agent` cell; its turn was cancelled (`session/cancel`).

    A `KeyboardInterrupt` only, what the interrupt means: Run All and nbclient stop on it, and
    a person's `except Exception:` around a turn does not swallow their own interrupt (it was an
    `AcpError` too, so it did). The one class of this module that is not an `AcpError`, for
    that reason. `result` is the cancelled turn's `TurnResult` when there was a turn (None when
    the interrupt came before it). IPython shows it as one line, not a traceback through the
    extension's and anyio's frames.
    """

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[31mTurnInterrupted\x1b[0m: {self.args[0]}"]


class TurnStateError(AcpError, RuntimeError):
    """A turn was moved in a way its state machine does not allow (a bug in the caller)."""
