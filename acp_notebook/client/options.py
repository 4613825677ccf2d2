"""`ClientOptions`: how a client behaves. Every field is a keyword of `connect()`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import InvalidArgumentError
from ..protocol.limits import DEFAULT_LIMITS, Limits
from ..protocol.terminals import DEFAULT_OUTPUT_LIMIT
from ..protocol.wirelog import DEFAULT_SIZE
from .serving.elicit import ElicitationHandler
from .serving.permissions import PermissionHandler, PermissionPolicy
from .serving.terminal import DEFAULT_MAX_TERMINALS
from .transport import TransportFactory


@dataclass
class ClientOptions:
    """How the client behaves; every field has a keyword of the same name in `connect()`."""

    #: Offer fs/read_text_file and fs/write_text_file, confined to the workspace.
    fs: bool = True
    #: Offer terminal/* (agents then run commands through the client).
    terminal: bool = False
    #: Unreleased terminals at once, all sessions; the next terminal/create gets an error.
    max_terminals: int = DEFAULT_MAX_TERMINALS
    #: Bytes of output kept per terminal, at most, whatever `outputByteLimit` the agent asks.
    terminal_output_limit: int = DEFAULT_OUTPUT_LIMIT
    #: Which tool kinds are allowed, rejected or asked about (`PermissionPolicy`).
    permission_policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    #: Asked when the policy says ask: returns the chosen option id, or None to reject. None:
    #: nobody to ask, so what would be asked is rejected.
    permission_handler: PermissionHandler | None = None
    #: Answers `elicitation/create` (client/serving/elicit.py); None: every elicitation is declined.
    elicitation_handler: ElicitationHandler | None = None
    #: Paths the agent may neither read nor write (the notebook being run), under any name.
    protected_paths: Sequence[str | os.PathLike[str]] = ()
    #: Refuse fs/write_text_file to any `*.ipynb`.
    protect_notebooks: bool = True
    #: Seconds an agent gets to answer session/cancel before it is killed.
    cancel_grace: float = 5.0
    #: Retries of a turn that fails before any visible output or side effect.
    max_retries: int = 5
    #: Seconds before a retry, times its number (0.25 s, 0.5 s, 0.75 s...).
    retry_backoff: float = 0.25
    #: Seconds the agent has to answer `initialize`; then `AgentStartTimeoutError`.
    initialize_timeout: float = 60.0
    #: Every other request but session/prompt (bounded by the caller: a cell's --timeout, a
    #: cancel) waits this long for its answer, then `$/cancel_request` and RequestTimeoutError.
    #: Generous: session/new and session/load may start MCP servers or replay a long history,
    #: and the spec lets agents take their time; what it must not do is never end. None: no limit.
    request_timeout: float | None = 120.0
    #: Bytes of the agent's stderr kept, its end, for error messages.
    stderr_limit: int = 64 * 1024
    #: Authenticate with this method when session/new needs it.
    auth_method: str | None = None
    #: The name the client gives itself in `initialize`.
    client_name: str = "acp_notebook"
    #: Caps on what the agent can make the client keep (parts, text, plan entries...).
    limits: Limits = DEFAULT_LIMITS
    #: How each agent start reaches the agent; None: `command` as a subprocess (`AgentProcess`).
    #: `transport.in_process(serve)` runs a Python agent on a thread of this process instead.
    transport: TransportFactory | None = None
    #: The protocol log: messages kept each way for `client.wire_log` (`%agent log`).
    wire_log_size: int = DEFAULT_SIZE
    #: A file each message is appended to as a JSON line, masked, mode 0600 (None: no file).
    log_file: str | os.PathLike[str] | None = None
    #: Put a W3C `traceparent` in the `_meta` of every request to the agent.
    trace: bool = False
    #: Instructions added to the agent's own (`systemPrompt`, append mode) on session/new,
    #: load and resume, where the agent takes them (`sessionCapabilities.systemPrompt`); ""
    #: sends none.
    system_prompt: str = ""

    def __post_init__(self) -> None:
        for name in ("initialize_timeout", "request_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:  # `not >`: NaN is refused too
                raise InvalidArgumentError(
                    f"{name} must be a positive number of seconds, not {value!r}"
                )
