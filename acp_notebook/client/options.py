"""`ClientOptions`: how a client behaves. Every field is a keyword of `connect()`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import InvalidArgumentError
from ..protocol.limits import DEFAULT_LIMITS, Limits
from ..protocol.state import DEFAULT_OUTPUT_LIMIT
from ..protocol.wirelog import DEFAULT_SIZE
from .elicit import ElicitationHandler
from .permissions import PermissionHandler, PermissionPolicy
from .terminal_slots import DEFAULT_MAX_TERMINALS
from .transport import TransportFactory


@dataclass
class ClientOptions:
    """How the client behaves; every field has a keyword of the same name in `connect()`."""

    fs: bool = True  # offer fs/read_text_file and fs/write_text_file, confined to the workspace
    terminal: bool = False  # offer terminal/* (agents then run commands through the client)
    max_terminals: int = DEFAULT_MAX_TERMINALS  # unreleased terminals at once, all sessions
    terminal_output_limit: int = DEFAULT_OUTPUT_LIMIT  # bytes kept per terminal, at most
    permission_policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    permission_handler: PermissionHandler | None = None
    #: Answers `elicitation/create` (client/elicit.py); None: every elicitation is declined.
    elicitation_handler: ElicitationHandler | None = None
    protected_paths: Sequence[str | os.PathLike[str]] = ()
    protect_notebooks: bool = True  # refuse fs/write_text_file to any *.ipynb
    cancel_grace: float = 5.0
    max_retries: int = 5
    retry_backoff: float = 0.25
    initialize_timeout: float = 60.0
    # Every other request but session/prompt (bounded by the caller: a cell's --timeout, a
    # cancel) waits this long for its answer, then `$/cancel_request` and RequestTimeoutError.
    # Generous: session/new and session/load may start MCP servers or replay a long history,
    # and the spec lets agents take their time; what it must not do is never end. None: no limit.
    request_timeout: float | None = 120.0
    stderr_limit: int = 64 * 1024
    auth_method: str | None = None  # authenticate with this method when session/new needs it
    client_name: str = "acp_notebook"
    #: Caps on what the agent can make the client keep (parts, text, plan entries...).
    limits: Limits = DEFAULT_LIMITS
    #: How each agent start reaches the agent; None: `command` as a subprocess (`AgentProcess`).
    #: `transport.in_process(serve)` runs a Python agent on a thread of this process instead.
    transport: TransportFactory | None = None
    #: The protocol log: messages kept each way for `client.wire_log` (`%agent log`), and a
    #: file each message is appended to as a JSON line, masked (None: no file).
    wire_log_size: int = DEFAULT_SIZE
    log_file: str | os.PathLike[str] | None = None
    #: Put a W3C `traceparent` in the `_meta` of every request to the agent.
    trace: bool = False

    def __post_init__(self) -> None:
        for name in ("initialize_timeout", "request_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:  # `not >`: NaN is refused too
                raise InvalidArgumentError(
                    f"{name} must be a positive number of seconds, not {value!r}"
                )
