"""Opening sessions: session/new (with authentication), load, resume, and session/list.

The bodies of `Client.new_session`, `load_session`, `resume_session` and `list_sessions`; they
use the client's public side only (`request`, `registry`, its capabilities and options).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import (
    AuthRequiredError,
    CapabilityError,
    RequestError,
)
from ..protocol import jsonrpc as rpc
from ..protocol import methods
from ..protocol.limits import bounded
from .host import SessionHost
from .mcp_config import mcp_secrets
from .session import Session, answered_id, setup_params

log = logging.getLogger("acp_notebook")


def obj(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (agents answer what they like)."""
    return value if isinstance(value, dict) else {}


def _directories(client: SessionHost, additional: Sequence[str]) -> list[str]:
    dirs = [str(Path(d).resolve()) for d in additional]
    if dirs and client.session_capabilities.get("additionalDirectories") is None:
        raise CapabilityError(
            f"{client.agent_name} does not take additional directories "
            "(no sessionCapabilities.additionalDirectories)"
        )
    return dirs


def _session_cwd(client: SessionHost, cwd: str | os.PathLike[str] | None) -> str:
    return str(Path(cwd).resolve()) if cwd is not None else client.cwd


def _servers(client: SessionHost, mcp_servers: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The `mcpServers` to send; their keys (env, headers) are masked in this client's logs."""
    servers = list(mcp_servers or [])
    client.mask(mcp_secrets(servers))
    return servers


def system_prompt(client: SessionHost, requested: str | None = None) -> str:
    """The instructions a session of this client is opened with: `requested` (None: the
    client's, `ClientOptions.system_prompt`), where the agent takes them
    (`sessionCapabilities.systemPrompt`), else none."""
    takes = isinstance(client.session_capabilities.get("systemPrompt"), dict)
    text = client.options.system_prompt if requested is None else requested
    return text if takes else ""


async def open_new(
    client: SessionHost,
    cwd: str,
    mcp_servers: list[dict[str, Any]],
    additional_directories: list[str],
    prompt: str,
) -> tuple[str, dict[str, Any]]:
    """`session/new` with the system prompt `prompt` ("": none), authenticating first if the
    agent asks and an auth method is set; returns the new id and the answer. Used by
    `new_session` and by a session reopening."""
    servers = _servers(client, mcp_servers)
    params = setup_params(None, cwd, servers, additional_directories, prompt)
    try:
        with client.registry.opening():
            response = await client.request(methods.SESSION_NEW, params)
    except RequestError as exc:
        if exc.code != rpc.AUTH_REQUIRED:
            raise
        if client.options.auth_method is None or client.authenticated:
            raise AuthRequiredError(
                exc.method, exc.code, exc.message, exc.data, client.auth_methods
            ) from None
        await client.authenticate(client.options.auth_method, on_output=_login_output)
        with client.registry.opening():
            response = await client.request(methods.SESSION_NEW, params)
    response = obj(response)
    return answered_id(methods.SESSION_NEW, response), response


def _login_output(text: str) -> None:
    # A login run on its own (ClientOptions.auth_method) has no cell to print to.
    log.info("acp_notebook: login: %s", text.rstrip())


async def delete_session(client: SessionHost, session_id: str) -> None:
    """`session/delete`; a session of this client with that id is closed here first."""
    if client.session_capabilities.get("delete") is None:
        raise CapabilityError(f"{client.agent_name} cannot delete sessions")
    live = client.registry.get(session_id)
    if live is not None:
        await live.close()
    await client.request(methods.SESSION_DELETE, {"sessionId": session_id})


def _adopt(
    client: SessionHost,
    sid: str,
    cwd: str,
    dirs: list[str],
    servers: list[dict[str, Any]],
    prompt: str,
    response: Any,
) -> Session:
    session = Session(client, sid, cwd, dirs, servers, prompt)
    session.apply_answer(response)
    client.registry.register(session)
    return session


async def new_session(
    client: SessionHost,
    cwd: str | os.PathLike[str] | None,
    mcp_servers: list[dict[str, Any]] | None,
    additional_directories: Sequence[str],
    requested_prompt: str | None = None,
) -> Session:
    path = _session_cwd(client, cwd)
    dirs = _directories(client, additional_directories)
    servers = _servers(client, mcp_servers)
    prompt = system_prompt(client, requested_prompt)
    sid, response = await open_new(client, path, servers, dirs, prompt)
    return _adopt(client, sid, path, dirs, servers, prompt, response)


async def load_session(
    client: SessionHost,
    session_id: str,
    cwd: str | os.PathLike[str] | None,
    mcp_servers: list[dict[str, Any]] | None,
    additional_directories: Sequence[str],
    requested_prompt: str | None = None,
) -> Session:
    if not client.agent_capabilities.get("loadSession"):
        raise CapabilityError(f"{client.agent_name} cannot load sessions (no loadSession)")
    path = _session_cwd(client, cwd)
    dirs = _directories(client, additional_directories)
    servers = _servers(client, mcp_servers)
    session = Session(
        client, session_id, path, dirs, servers, system_prompt(client, requested_prompt)
    )
    session.begin_replay()
    client.registry.register(session)  # replayed updates arrive before the answer
    try:
        response = await client.request(methods.SESSION_LOAD, session.setup_params(session_id))
    except BaseException:
        client.registry.forget(session)
        session.discard()
        raise
    session.end_replay()
    session.apply_answer(response)
    return session


async def resume_session(
    client: SessionHost,
    session_id: str,
    cwd: str | os.PathLike[str] | None,
    mcp_servers: list[dict[str, Any]] | None,
    additional_directories: Sequence[str],
    requested_prompt: str | None = None,
) -> Session:
    if client.session_capabilities.get("resume") is None:
        raise CapabilityError(f"{client.agent_name} cannot resume sessions")
    return await _reopened(
        client,
        methods.SESSION_RESUME,
        session_id,
        cwd,
        mcp_servers,
        additional_directories,
        requested_prompt,
    )


async def fork_session(
    client: SessionHost,
    session_id: str,
    cwd: str | os.PathLike[str] | None,
    mcp_servers: list[dict[str, Any]] | None,
    additional_directories: Sequence[str],
    requested_prompt: str | None = None,
) -> Session:
    """`session/fork` (unstable, `sessionCapabilities.fork`): a new session that starts from
    the conversation of `session_id`, which is left as it was."""
    if client.session_capabilities.get("fork") is None:
        raise CapabilityError(f"{client.agent_name} cannot fork sessions")
    return await _reopened(
        client,
        methods.SESSION_FORK,
        session_id,
        cwd,
        mcp_servers,
        additional_directories,
        requested_prompt,
    )


async def _reopened(
    client: SessionHost,
    method: str,
    session_id: str,
    cwd: str | os.PathLike[str] | None,
    mcp_servers: list[dict[str, Any]] | None,
    additional_directories: Sequence[str],
    requested_prompt: str | None,
) -> Session:
    """session/resume or session/fork of `session_id`: the session answered (a fork's id is
    in its answer, a resumed one keeps its own)."""
    path = _session_cwd(client, cwd)
    dirs = _directories(client, additional_directories)
    servers = _servers(client, mcp_servers)
    prompt = system_prompt(client, requested_prompt)
    params = setup_params(session_id, path, servers, dirs, prompt)
    with client.registry.opening():
        response = await client.request(method, params)
    if method != methods.SESSION_FORK:
        return _adopt(client, session_id, path, dirs, servers, prompt, response)
    sid = answered_id(methods.SESSION_FORK, response)
    return _adopt(client, sid, path, dirs, servers, prompt, response)


async def list_sessions(
    client: SessionHost, cwd: str | os.PathLike[str] | None, limit: int
) -> list[dict[str, Any]]:
    if client.session_capabilities.get("list") is None:
        raise CapabilityError(f"{client.agent_name} cannot list sessions")
    limits = client.options.limits
    limit = min(limit, limits.listed_sessions)
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[int] = set()  # hashes: a cursor may be long
    for _ in range(limits.list_pages):
        params: dict[str, Any] = {}
        if cwd is not None:
            params["cwd"] = _session_cwd(client, cwd)
        if cursor is not None:
            params["cursor"] = cursor
        response = obj(await client.request(methods.SESSION_LIST, params))
        sessions = response.get("sessions")
        page = [
            s
            for s in (sessions if isinstance(sessions, list) else [])[:limit]
            if isinstance(s, dict)
        ]
        out.extend(bounded(s, limits.value_chars)[0] for s in page[: limit - len(out)])
        cursor = response.get("nextCursor")
        if not isinstance(cursor, str) or not cursor or len(out) >= limit:
            break
        if not page or hash(cursor) in seen:
            # An agent paging for ever (153,000 empty pages in 20 s) or in a circle.
            log.warning(
                "acp_notebook: session/list stopped: the agent sent %s",
                "an empty page with a cursor" if not page else "a cursor again",
            )
            break
        seen.add(hash(cursor))
    else:
        log.warning("acp_notebook: session/list stopped after %d pages", limits.list_pages)
    return out
