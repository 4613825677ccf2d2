"""The ACP registry: the agents the protocol's registry lists, and how each runs here.

`GET REGISTRY_URL` answers `{version, agents: [{id, name, version, description, repository?,
website?, authors?, license?, license_url?, icon?, distribution: {npx?, uvx?, binary?}}]}` (the
registry repository's FORMAT.md and agent.schema.json). `npx` and `uvx` give a `package` (and
`cmd`, `args`, `env`); `binary` an archive and a `cmd` per platform (`linux-x86_64`,
`darwin-aarch64`, …).

`load` fetches it (the standard library's urllib: bounded in bytes and in time), keeps a copy in
the user's cache directory (platformdirs), and falls back to that copy when the registry cannot
be reached; with neither it raises `RegistryUnavailable`, whose message says what to do. Every
byte of it is the network's: each entry is validated on its own (pydantic, every string and list
bounded) and an invalid one is skipped and counted, not the whole list lost.

`runner` says how an agent runs here: a program of its on the PATH (installed), npx or uvx
fetching its package, or not at all (what to install). `cached_agent` is what `--agent <id>`
reads: the cached copy only, never the network, while a cell runs. `listed` is what the two
listings show of each agent (`%agent registry` draws it as a table, `acp-notebook agents` as
terminal lines), `describe_source` their first sentence.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from .._version import __version__
from ..errors import RegistryUnavailable

#: The ACP registry (the protocol's address for it: the one place the project names it).
REGISTRY_URL = "https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json"
#: Another address for it (a mirror, a test's server): an http(s) URL.
ENV_URL = "ACP_NOTEBOOK_REGISTRY_URL"
#: The largest registry read (it is about 100 KB for some 50 agents).
MAX_BYTES = 4 * 1024 * 1024
#: Seconds a fetch may take in all (connecting, and reading every byte).
TIMEOUT = 10.0
#: Agents kept from one registry.
MAX_AGENTS = 1_000
CACHE_FILE = "acp-registry.json"

#: A program's name: looked up on the PATH, never a path of the registry's choosing.
PROGRAM = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}"
_Text = Annotated[str, StringConstraints(max_length=2_000)]
_Short = Annotated[str, StringConstraints(max_length=200)]
_Args = Annotated[list[_Text], Field(max_length=50)]
_Env = Annotated[dict[_Short, _Text], Field(max_length=50)]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Package(_Entry):
    """An `npx` or `uvx` distribution: the package, and the program of it to run if not its
    default one."""

    package: Annotated[str, StringConstraints(min_length=1, max_length=300, pattern=r"^[^-\s]")]
    cmd: Annotated[str, StringConstraints(pattern=f"^{PROGRAM}$")] | None = None
    args: _Args = []
    env: _Env = {}


class Binary(_Entry):
    """A platform's archive, and the program in it to run."""

    archive: _Text
    cmd: _Text
    args: _Args = []
    env: _Env = {}


class Distribution(_Entry):
    npx: Package | None = None
    uvx: Package | None = None
    binary: Annotated[dict[_Short, Binary], Field(max_length=20)] | None = None


class RegistryAgent(_Entry):
    """One agent of the registry, as its `agent.json` describes it."""

    id: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*$", max_length=100)]
    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    version: _Short
    description: _Text
    distribution: Distribution
    repository: _Text | None = None
    website: _Text | None = None
    authors: Annotated[list[_Short], Field(max_length=50)] = []
    license: _Short | None = None
    license_url: _Text | None = None


@dataclass(frozen=True)
class Listing:
    """The registry's agents, where they came from, and what of it was left out."""

    agents: tuple[RegistryAgent, ...]
    version: str
    #: `online` (fetched now) or `cache` (the copy kept when it last was).
    source: str
    #: When the copy was fetched (seconds since the epoch).
    fetched: float
    #: Entries that are not what the format says (skipped), and those past `MAX_AGENTS`.
    skipped: int = 0
    #: Why the registry was not fetched now (a cached listing), else None.
    problem: str | None = None


def registry_url() -> str:
    return os.environ.get(ENV_URL) or REGISTRY_URL


def cache_path() -> Path:
    """Where the last copy is kept: the user's cache directory, as the platform has it."""
    return Path(platformdirs.user_cache_dir("acp_notebook", appauthor=False)) / CACHE_FILE


def parse(raw: bytes) -> tuple[str, tuple[RegistryAgent, ...], int]:
    """The registry's version, its valid agents (at most `MAX_AGENTS`, each id once) and how
    many entries were skipped; ValueError when it is not a registry at all."""
    if len(raw) > MAX_BYTES:
        raise ValueError(f"it is larger than {MAX_BYTES // 1024 // 1024} MB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"it is not JSON ({type(exc).__name__})") from None
    entries = data.get("agents") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError("it has no list of agents")
    version = data.get("version")
    agents: dict[str, RegistryAgent] = {}
    skipped = 0
    for entry in entries:
        try:
            agent = RegistryAgent.model_validate(entry)
        except ValidationError:
            skipped += 1
            continue
        if agent.id in agents or len(agents) >= MAX_AGENTS:
            skipped += 1
            continue
        agents[agent.id] = agent
    return (str(version)[:40] if isinstance(version, str) else "?"), tuple(agents.values()), skipped


class _WebOnly(urllib.request.HTTPRedirectHandler):
    """Redirects to http(s) only (urllib's own would follow one to ftp)."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        if not newurl.startswith(("https://", "http://")):
            raise urllib.error.HTTPError(newurl, code, "a redirect to another scheme", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_WebOnly)


def fetch(url: str, *, timeout: float = TIMEOUT, max_bytes: int = MAX_BYTES) -> bytes:
    """The body at `url` (http or https), within `max_bytes` and `timeout` seconds in all;
    OSError (urllib's errors are) or ValueError saying why not."""
    if not url.startswith(("https://", "http://")):
        raise ValueError("the registry's address must be an http(s) URL")
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(
        url, headers={"Accept": "application/json", "User-Agent": f"acp_notebook/{__version__}"}
    )
    with _OPENER.open(request, timeout=timeout) as response:
        body = bytearray()
        while chunk := response.read(64 * 1024):
            body += chunk
            if len(body) > max_bytes:
                raise ValueError(f"the registry is larger than {max_bytes // 1024 // 1024} MB")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the registry took more than {timeout:g} s")
    return bytes(body)


def load(*, online: bool = True) -> Listing:
    """The registry: fetched now (and cached) when `online` and it can be; else the cached copy;
    `RegistryUnavailable` when there is neither."""
    problem = "not fetched"
    if online:
        try:
            raw = fetch(registry_url())
            version, agents, skipped = parse(raw)
        except (OSError, ValueError) as exc:
            problem = _why(exc)
        else:
            _keep(raw)
            return Listing(agents, version, "online", time.time(), skipped)
    cached = _cached()
    if cached is None:
        raise RegistryUnavailable(
            f"the ACP registry could not be fetched ({problem}) and no copy of it is cached "
            "here. Connect to the network and try again; meanwhile cells can use the agents "
            'of %agent list, or a command line (--agent "my-agent --acp").'
        )
    raw, fetched = cached
    version, agents, skipped = parse(raw)
    return Listing(agents, version, "cache", fetched, skipped, problem)


def _why(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return f"no connection: {str(exc.reason)[:200]}"
    return str(exc)[:200] or type(exc).__name__


def _keep(raw: bytes) -> None:
    """The copy, replaced whole (a reader never sees half of it); not kept is no failure."""
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".registry-")
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
        os.replace(tmp, path)
    except OSError:
        return


def _cached() -> tuple[bytes, float] | None:
    """The cached copy and when it was fetched; None if there is none that reads."""
    path = cache_path()
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
        parse(raw)
        return raw, path.stat().st_mtime
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Runner:
    """How a registry agent runs here."""

    #: `installed` (its program is on the PATH), `npx` or `uvx` (the launcher fetches its
    #: package as it starts), or `missing`.
    status: str
    #: What `--agent <id>` runs; empty when it cannot run here.
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    #: What to install (a missing one), or how it was found.
    hint: str = ""


def platform_target() -> str:
    """This machine as the registry names platforms (`linux-x86_64`, `darwin-aarch64`, …)."""
    system = {"win32": "windows", "darwin": "darwin"}.get(sys.platform, sys.platform)
    system = "linux" if system.startswith("linux") else system
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{system}-{arch}"


def launch(kind: str, package: Package) -> tuple[str, ...]:
    """The registry's command for an npx or uvx distribution (FORMAT.md)."""
    tool, flag = (("npx", "-y"), "--package") if kind == "npx" else (("uvx",), "--from")
    head = (*tool, flag, package.package, package.cmd) if package.cmd else (*tool, package.package)
    return (*head, *package.args)


def runner(agent: RegistryAgent) -> Runner:
    """Its own program on the PATH first (a binary's, or a package's `cmd` installed
    globally), then npx or uvx fetching it, else what to install."""
    dist = agent.distribution
    binary = (dist.binary or {}).get(platform_target())
    if binary is not None:
        program = Path(binary.cmd.replace("\\", "/")).name  # the archive's program, by name
        if re.fullmatch(PROGRAM, program) and shutil.which(program):
            return Runner("installed", (program, *binary.args), dict(binary.env), program)
    for kind, package in (("npx", dist.npx), ("uvx", dist.uvx)):
        if package is not None and package.cmd and shutil.which(package.cmd):
            return Runner("installed", (package.cmd, *package.args), dict(package.env), kind)
    for kind, package in (("npx", dist.npx), ("uvx", dist.uvx)):
        if package is not None and shutil.which(kind):
            return Runner(kind, launch(kind, package), dict(package.env))
    return Runner("missing", hint=install_hint(agent))


def install_hint(agent: RegistryAgent) -> str:
    """What a person installs to run it here."""
    dist = agent.distribution
    if dist.npx is not None:
        return f"Node.js (npx), then: {' '.join(launch('npx', dist.npx))}"
    if dist.uvx is not None:
        return f"uv (uvx), then: {' '.join(launch('uvx', dist.uvx))}"
    binary = (dist.binary or {}).get(platform_target())
    if binary is not None:
        return f"{binary.archive} (unpack it; put {binary.cmd} on the PATH)"
    return f"nothing for {platform_target()} (its platforms: {', '.join(dist.binary or {})})"


def cached_agent(agent_id: str) -> tuple[RegistryAgent, Runner] | None:
    """`--agent <id>`: the agent of that id in the cached registry, and how it runs here; None
    when the copy has no such agent (or there is no copy). Never the network."""
    cached = _cached()
    if cached is None:
        return None
    _, agents, _ = parse(cached[0])
    found = next((a for a in agents if a.id == agent_id), None)
    return None if found is None else (found, runner(found))


def describe_source(listing: Listing) -> str:
    """Where the listing came from, in a sentence."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(listing.fetched))
    said = (
        f"The ACP registry (version {listing.version}), fetched now"
        if listing.source == "online"
        else f"Offline ({listing.problem}): the copy of the ACP registry cached on {when}"
    )
    if listing.skipped:
        said += f"; {listing.skipped} entries that are not what the format says were left out"
    return said + "."


#: How a registry agent runs here, in a listing (`Runner.status`).
HERE = {"installed": "installed", "npx": "via npx", "uvx": "via uvx", "missing": "not installed"}
#: The characters of an agent's description a listing shows.
LISTED_CHARS = 300


@dataclass(frozen=True)
class Listed:
    """One agent as a listing shows it. The strings are the registry's, unescaped: each view
    escapes them its own way."""

    id: str
    name: str
    version: str
    #: Its whitespace collapsed (a listing's line), cut to `LISTED_CHARS`.
    description: str
    #: `Runner.status`, and how a listing says it (`HERE`).
    status: str
    here: str
    #: What `--agent <id>` runs, as a shell line; empty when it cannot run here.
    command: str
    #: What to install when it cannot run here.
    hint: str
    #: The agent table has an entry of this name (which `--agent` takes first).
    in_table: bool

    def runs_as(self) -> str:
        """The command, or what to install."""
        return self.command or f"install {self.hint}"

    def table_note(self) -> str:
        """Said beside its id when the agent table has an entry of its name, else ""."""
        return "(the agent table has an entry of this name)" if self.in_table else ""


def listed(listing: Listing, table: Container[str]) -> list[Listed]:
    """Each agent of `listing` as a listing shows it; `table` holds the agent table's names."""
    rows = []
    for agent in listing.agents:
        run = runner(agent)
        rows.append(
            Listed(
                id=agent.id,
                name=agent.name,
                version=agent.version,
                description=" ".join(agent.description.split())[:LISTED_CHARS],
                status=run.status,
                here=HERE.get(run.status, run.status),
                command=shlex.join(run.command) if run.command else "",
                hint=run.hint,
                in_table=agent.id in table,
            )
        )
    return rows
