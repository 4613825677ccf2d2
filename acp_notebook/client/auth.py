"""Authentication: the agent's auth methods of both types, and logout.

- An **agent** method (no `type`, or `"agent"`) is one `authenticate {methodId}` request.
- A **terminal** method (`type: "terminal"`, offered only to clients that say
  `clientCapabilities.auth.terminal`) is the agent's own command run again with the method's
  `args` appended and its `env` (a map) overlaid; exit code 0 means logged in. The agent process
  is then restarted, so the next request initializes a fresh one that finds the credentials.

A terminal login runs without a terminal (stdin is /dev/null: a notebook has none to give);
its output, stdout and stderr merged, goes to `on_output` line by line, bounded in size, and it
is killed after `timeout` seconds. Everything in a method comes from the agent: the arguments and
variables are bounded and must be strings.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import anyio

from ..errors import AuthFailedError, CapabilityError, NotOfferedError
from ..protocol import methods
from ..protocol.redact import MASK, secret_args, secret_values
from ..protocol.weburl import web_link
from .process import child_env


class Client(Protocol):
    """What authentication needs of a client (typed here, so this module imports no client)."""

    command: list[str]
    env: dict[str, str | None]
    cwd: str
    auth_methods: list[dict[str, Any]]
    agent_capabilities: dict[str, Any]

    @property
    def agent_name(self) -> str: ...

    async def request(self, method: str, params: Any, *, deadline: bool = True) -> Any: ...

    async def restart_agent(self) -> None: ...


LOGIN_TIMEOUT = 300.0  # seconds a terminal login may take (a browser round trip)
MAX_ARGS = 64  # arguments a method may add
MAX_ARG_CHARS = 4096  # characters of one argument, name or value
MAX_OUTPUT = 256 * 1024  # bytes of a login's output passed on; the rest is counted
#: The longest command line a login may have, as shown (`shell_line`): it is shown whole.
MAX_LINE_CHARS = 16 * 1024
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What a terminal or a page would not show as itself: C0/C1 controls (escape sequences), bidi
# controls and invisible marks (text that reads otherwise than it runs), lone surrogates.
_UNSEEN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)


def method(client: Client, method_id: str) -> dict[str, Any]:
    """The offered method of this id, or `NotOfferedError` naming those offered."""
    for each in client.auth_methods:
        if each.get("id") == method_id:
            return each
    offered = ", ".join(str(m.get("id")) for m in client.auth_methods) or "none"
    raise NotOfferedError(f"unknown auth method {method_id!r}; the agent offers: {offered}")


def kind(auth_method: dict[str, Any]) -> str:
    """`agent`, `terminal`, or the unknown type the agent gave (unusable, per the spec)."""
    value = auth_method.get("type")
    return "agent" if value is None else str(value)


def login_command(client: Client, auth_method: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """A terminal method's command line and the variables it sets, checked and bounded."""
    return _checked(client.command, auth_method)


def login_line(command: Sequence[str], auth_method: dict[str, Any]) -> str:
    """What a terminal method runs, whole, as one shell line (`shell_line`); `CapabilityError`
    for a method that cannot be run (nor shown)."""
    return shell_line(*_checked(command, auth_method))


def _checked(
    command: Sequence[str], auth_method: dict[str, Any]
) -> tuple[list[str], dict[str, str]]:
    args = auth_method.get("args") or []
    env = auth_method.get("env") or {}
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise CapabilityError("the auth method's args are not a list of strings")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise CapabilityError("the auth method's env is not a map of strings")
    if len(args) > MAX_ARGS or len(env) > MAX_ARGS:
        raise CapabilityError(f"the auth method gives more than {MAX_ARGS} args or variables")
    too_long = [a for a in [*args, *env, *env.values()] if len(a) > MAX_ARG_CHARS or "\0" in a]
    if too_long:
        raise CapabilityError("the auth method gives an argument that is too long or has NUL")
    if not all(_ENV_NAME.fullmatch(k) for k in env):
        # A name such as "X=1 rm -rf ~;" would make the line shown another command.
        raise CapabilityError("the auth method gives a variable whose name is not a name")
    argv = [*command, *args]
    # Everything a login runs is shown whole (`%agent auth`, a cell's advice); what cannot be
    # shown whole is not run.
    if len(shell_line(argv, dict(env))) > MAX_LINE_CHARS:
        raise CapabilityError(
            f"the auth method's command line is longer than {MAX_LINE_CHARS:,} characters"
        )
    return argv, dict(env)


async def authenticate(
    client: Client,
    method_id: str,
    on_output: Callable[[str], None] | None = None,
    timeout: float = LOGIN_TIMEOUT,
) -> str:
    """Authenticate with `method_id`, of either type (see the module's docstring); the type."""
    chosen = method(client, method_id)
    what = kind(chosen)
    if what == "agent":
        await client.request(methods.AUTHENTICATE, {"methodId": method_id})
        return what
    if what != "terminal":
        raise CapabilityError(f"auth method {method_id!r} is of type {what!r}, unknown here")
    argv, env = login_command(client, chosen)
    code = await run_login(argv, child_env({**client.env, **env}), client.cwd, on_output, timeout)
    if code != 0:
        raise AuthFailedError(
            f"the login {method_id!r} exited with code {code}; run it in a terminal: "
            + shell_line(argv, env)
        )
    await client.restart_agent()  # the spec: reconnect and initialize again
    return what


async def run_login(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    on_output: Callable[[str], None] | None,
    timeout: float,
) -> int | None:
    """Run a login command; its exit code, or None if it was killed after `timeout`."""
    shown = 0
    async with await anyio.open_process(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    ) as process:
        assert process.stdout is not None
        with anyio.move_on_after(timeout) as scope:
            async for data in process.stdout:
                if on_output is not None and shown < MAX_OUTPUT:
                    on_output(data[: MAX_OUTPUT - shown].decode("utf-8", "replace"))
                shown += len(data)
            await process.wait()
        if scope.cancelled_caught:
            # Its own process group (start_new_session): whatever the login started goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with anyio.CancelScope(shield=True):
                await process.wait()
            return None
        return process.returncode


async def logout(client: Client) -> None:
    auth = client.agent_capabilities.get("auth")
    if not isinstance(auth, dict) or not isinstance(auth.get("logout"), dict):
        raise CapabilityError(f"{client.agent_name} does not offer logout (no auth.logout)")
    await client.request(methods.LOGOUT, {})


def shell_line(argv: Sequence[str], env: dict[str, str]) -> str:
    """`NAME=VALUE ... command args` as a shell would run it, on one line and exact: a word
    with a control, bidi or invisible character is written in `$'...'` with that character as an
    escape (`\\x1b`), not as itself (it would draw over the terminal or the page, or hide what
    follows). Secret-looking variables and options (`protocol.redact`) show as `[redacted]`."""
    secrets = secret_values(env) | secret_args(argv)

    def word(value: str) -> str:
        return MASK if value in secrets else _shell_word(value)

    return " ".join([*(f"{k}={word(v)}" for k, v in env.items()), *(word(a) for a in argv)])


def _shell_word(value: str) -> str:
    if not _UNSEEN.search(value):
        return shlex.quote(value)
    escaped = "".join(
        "\\" + c if c in "\\'" else _escape(c) if _UNSEEN.fullmatch(c) else c for c in value
    )
    return f"$'{escaped}'"


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class Offered(NamedTuple):
    """One offered method as `%agent auth` lists it."""

    method_id: str
    name: str
    runs: str  # a terminal method's whole command line (`login_line`), else ""
    note: str  # why it cannot be used, or "" (an agent method: one request)


def how_to(client: Client) -> list[Offered]:
    """Each offered method: its id, name, and for a terminal method the command it runs (to
    run in a terminal instead), whole."""
    out = []
    for each in client.auth_methods:
        method_id, name = str(each.get("id")), str(each.get("name") or each.get("id"))
        what = kind(each)
        runs = note = ""
        if what == "terminal":
            try:
                runs = login_line(client.command, each)
            except CapabilityError as exc:
                note = f"unusable: {exc}"
        elif what != "agent":
            note = f"type {what!r}: not one this client can use" + _credentials_page(each)
        out.append(Offered(method_id, name, runs, note))
    return out


def _credentials_page(auth_method: dict[str, Any]) -> str:
    """An `env_var` method's `link` (where to get the credentials), as text with the host the
    browser opens for it (`weburl`), never as the agent spelled it; a misleading one refused."""
    url = auth_method.get("link")
    if not isinstance(url, str) or not url:
        return ""
    page = web_link(url)
    if not page.ok:
        return f"; its credentials link is refused ({page.refused})"
    return f"; credentials at {page.href} (host {page.shown_host})"
