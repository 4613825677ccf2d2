"""The `initialize` handshake: what the client offers, and what it accepts back.

Every way the handshake can fail becomes an `AgentStartError` (or `AgentStartTimeoutError`) that
names the command and quotes the agent's last stderr, and the process is stopped: a user who
configured the wrong command learns why from one message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from .._version import __version__
from ..errors import (
    AgentExitedError,
    AgentStartError,
    AgentStartTimeoutError,
    ProtocolError,
    RequestError,
)
from ..protocol import jsonrpc as rpc
from ..protocol import methods
from .connection import Connection
from .options import ClientOptions
from .transport import AgentTransport

log = logging.getLogger("acp_notebook")

PROTOCOL_VERSION = 1
_NOT_ACP_GRACE = 5.0  # seconds to answer initialize once the agent wrote non-JSON-RPC to stdout


@dataclass(frozen=True)
class AgentFacts:
    """What the agent said about itself in its `initialize` answer."""

    protocol_version: int
    info: dict[str, Any]
    capabilities: dict[str, Any]
    auth_methods: list[dict[str, Any]]


def initialize_params(options: ClientOptions) -> dict[str, Any]:
    """The `initialize` request: our protocol version, capabilities and name."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {
            "fs": {"readTextFile": options.fs, "writeTextFile": options.fs},
            "terminal": options.terminal,
            # Notices (a banner in the turn) and compaction (a marker, its summary): notes.py.
            # Prompt suggestions (unstable): buttons under the answer (suggestions.py).
            "session": {
                "configOptions": {"boolean": {}},
                "notices": {},
                "compaction": {},
                "promptSuggestions": {},
            },
            # Plans by id, Markdown plans, removal (plans.py); child sessions shown as sub-turn
            # cards, cancelled with the turn where they allow it (subagents.py).
            "plan": {},
            "subagents": {},
            # Terminal auth methods: the client runs the agent's login (client/auth.py).
            "auth": {"terminal": True},
            # Both modes: unanswered (no handler, headless) they are declined, recorded.
            "elicitation": {"form": {}, "url": {}},
        },
        "clientInfo": {
            "name": options.client_name,
            "title": "acp_notebook",
            "version": __version__,
        },
    }


async def initialize(
    tg: anyio.abc.TaskGroup,
    process: AgentTransport,
    conn: Connection,
    params: dict[str, Any],
    timeout: float,
    garbage: list[str],
    not_acp: anyio.Event,
) -> Any:
    """Send `initialize`; `not_acp` is set (and `garbage` holds what) once the agent wrote
    something other than JSON-RPC to stdout."""
    # A command that is not an ACP agent (a CLI without its --acp flag, a wrapper printing a
    # banner) writes text to stdout and then waits for a human: that used to hang for the
    # whole initialize_timeout (60 s). Stdout is for JSON-RPC only, so once it carries
    # something else, the initialize answer gets a few seconds more, not a minute.
    watchdog = anyio.CancelScope()

    async def give_up_on_garbage() -> None:
        with watchdog:
            await not_acp.wait()
            await anyio.sleep(_NOT_ACP_GRACE)
            conn.close(
                ProtocolError(
                    f"the agent did not answer initialize within {_NOT_ACP_GRACE:g} s after "
                    "writing output that is not ACP JSON-RPC to stdout "
                    f"({garbage[0]}). Is this the command of an ACP agent? "
                    "Some need a flag such as --acp (command: "
                    f"{process.display})"
                )
            )

    tg.start_soon(give_up_on_garbage, name=f"acp not-acp watchdog {process.pid}")
    try:
        return await conn.request(methods.INITIALIZE, params, timeout=timeout)
    except ProtocolError as exc:  # from the watchdog
        await process.aclose(grace=0.5)
        raise AgentStartError(str(exc) + stderr_tail(process)) from None
    except TimeoutError:
        await process.aclose(grace=0.5)
        raise AgentStartTimeoutError(
            methods.INITIALIZE,
            repr(process.display),
            timeout,
            " and was stopped" + stderr_tail(process),
        ) from None
    except AgentExitedError as exc:
        wrote = f"; before that, {garbage[0]}" if garbage else ""
        raise AgentStartError(
            f"the agent exited during initialize (command: {process.display}): {exc}{wrote}"
        ) from None
    except RequestError as exc:
        await process.aclose(grace=0.5)
        raise AgentStartError(f"the agent refused initialize: {exc}") from None
    finally:
        watchdog.cancel()


async def accept(response: Any, process: AgentTransport, conn: Connection) -> AgentFacts:
    """Check the `initialize` answer (the process is stopped if it is unusable)."""
    if not isinstance(response, dict):
        await process.aclose(grace=0.5)
        raise ProtocolError(
            f"the agent's initialize answer is not an object: {rpc.excerpt(repr(response))}"
        )
    version = response.get("protocolVersion")
    if version != PROTOCOL_VERSION:
        await process.aclose(grace=0.5)
        raise ProtocolError(
            f"the agent speaks ACP protocol version {rpc.excerpt(repr(version))}; "
            f"acp_notebook speaks "
            f"version {PROTOCOL_VERSION}. Use an agent release that supports version 1."
        )
    if conn.malformed:
        log.warning("agent wrote %d malformed lines before initialize", conn.malformed)
    return AgentFacts(
        protocol_version=version,
        info=_obj(response.get("agentInfo")),
        capabilities=_obj(response.get("agentCapabilities")),
        auth_methods=[m for m in response.get("authMethods") or [] if isinstance(m, dict)],
    )


def stderr_tail(process: AgentTransport) -> str:
    """The agent's last stderr output, as the end of an error message (or nothing)."""
    tail = process.stderr.text()
    return f"; its last stderr output:\n{tail}" if tail else ""


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
