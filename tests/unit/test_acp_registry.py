"""The ACP registry (client/acp_registry.py), offline: a fixture registry served by a local HTTP
server, the copy cached and read when the server is gone, the message when there is neither;
hostile registries (too big, not JSON, entries that are not agents, a redirect elsewhere)
bounded; how each agent runs here; `--agent <id>` from the cached copy; `acp-notebook agents`."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from acp_notebook.client import acp_registry
from acp_notebook.client.acp_registry import cache_path, load, runner
from acp_notebook.config import Registry
from acp_notebook.errors import ConfigError, RegistryUnavailable
from acp_notebook.run.cli import main
from tests.registry_server import Served, body, fixture_registry, registry_server


@pytest.fixture
def offline_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache and a PATH of the test's own: an `npx` and the local agent's program on it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("ACP_NOTEBOOK_AGENTS_FILE", raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("npx", "acpnb-test-agent"):
        program = bin_dir / name
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(program.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    return tmp_path


@pytest.fixture
def served(offline_home: Path, monkeypatch: pytest.MonkeyPatch) -> Served:
    with registry_server() as served:
        served.body = body(fixture_registry())
        monkeypatch.setenv(acp_registry.ENV_URL, served.url)
        yield served


def test_fetched_validated_cached_then_read_offline(served: Served) -> None:
    listing = load()
    assert listing.source == "online" and listing.version == "1.0.0" and listing.problem is None
    assert [a.id for a in listing.agents] == ["node-agent", "py-agent", "local-agent", "elsewhere"]
    assert listing.skipped == 4  # a bad id, no distribution, a description past its bound, a str
    assert cache_path().read_bytes() == served.body
    assert "fetched now" in acp_registry.describe_source(listing)
    served.status, served.body = 503, b"down"
    cached = load()
    assert cached.source == "cache" and cached.problem == "HTTP 503"
    assert [a.id for a in cached.agents] == [a.id for a in listing.agents]
    assert acp_registry.describe_source(cached).startswith("Offline (HTTP 503): the copy")
    assert load(online=False).source == "cache"


def test_neither_online_nor_cached_says_what_to_do(served: Served) -> None:
    served.body = b"<html>not json</html>"
    with pytest.raises(RegistryUnavailable) as caught:
        load()
    said = str(caught.value)
    assert "could not be fetched (it is not JSON" in said and "no copy of it is cached" in said
    assert "%agent list" in said
    assert not cache_path().exists()  # what is not a registry is not kept


@pytest.mark.parametrize(
    ("status", "payload", "problem"),
    [
        (200, b"x" * (acp_registry.MAX_BYTES + 10), "larger than 4 MB"),
        (200, b'{"agents": "no"}', "it has no list of agents"),
        (200, b"[" * 100_000, "it is not JSON"),
        (200, b"\xff\xfe", "it is not JSON"),
    ],
)
def test_hostile_registries_are_refused_whole(
    served: Served, status: int, payload: bytes, problem: str
) -> None:
    served.status, served.body = status, payload
    with pytest.raises(RegistryUnavailable, match=problem):
        load()


def test_a_redirect_to_another_scheme_is_not_followed(served: Served) -> None:
    served.status, served.body = 302, b""
    served.headers["Location"] = "ftp://127.0.0.1/registry.json"
    with pytest.raises(RegistryUnavailable, match="HTTP 302"):
        load()


def test_an_address_that_is_not_http_is_refused(
    offline_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(acp_registry.ENV_URL, f"file://{offline_home}/registry.json")
    with pytest.raises(RegistryUnavailable, match="must be an http"):
        load()


def test_how_each_runs_here(served: Served) -> None:
    agents = {a.id: a for a in load().agents}
    local = runner(agents["local-agent"])
    assert (local.status, local.command) == ("installed", ("acpnb-test-agent", "--acp"))
    node = runner(agents["node-agent"])  # npx is on the PATH: it fetches the package
    assert (node.status, node.command) == ("npx", ("npx", "-y", "@x/node-agent@1.2.3", "--acp"))
    py = runner(agents["py-agent"])  # no uvx here
    assert py.status == "missing" and py.hint.startswith("uv (uvx), then: uvx --from py-agent")
    elsewhere = runner(agents["elsewhere"])
    assert elsewhere.status == "missing" and "plan9-mips" in elsewhere.hint


def test_listed_is_what_both_listings_show(served: Served) -> None:
    """`listed`, the one formatter of `%agent registry` and `acp-notebook agents`: how each
    runs here in words, its command as a shell line or what to install, its description on one
    line and cut, whether the agent table has its name."""
    registry = fixture_registry()
    registry["agents"][0]["description"] = "Line one\n\n   two\t" + "x" * 1_000
    served.body = body(registry)
    rows = {row.id: row for row in acp_registry.listed(load(), {"node-agent", "demo"})}
    node = rows["node-agent"]
    assert (node.status, node.here, node.in_table) == ("npx", "via npx", True)
    assert node.runs_as() == node.command == "npx -y @x/node-agent@1.2.3 --acp"
    assert node.description == ("Line one two " + "x" * 1_000)[: acp_registry.LISTED_CHARS]
    assert node.table_note() == "(the agent table has an entry of this name)"
    local = rows["local-agent"]
    assert (local.here, local.command, local.name) == (
        "installed",
        "acpnb-test-agent --acp",
        "Local <b>Agent</b>",  # unescaped: each view escapes its own way
    )
    py = rows["py-agent"]
    assert (py.here, py.command, py.in_table, py.table_note()) == ("not installed", "", False, "")
    assert py.runs_as() == f"install {py.hint}" and py.hint.startswith("uv (uvx), then: ")


def test_agent_id_runs_from_the_cached_copy_only(served: Served) -> None:
    registry = Registry.build()
    with pytest.raises(ConfigError, match="unknown agent 'local-agent'"):
        registry.resolve("local-agent")  # nothing cached yet, and the network is not asked
    assert served.hits == 0
    load()
    served.status = 500  # from now on, only the copy
    spec, _ = registry.resolve("local-agent")
    assert spec.command == ("acpnb-test-agent", "--acp") and spec.source == "ACP registry"
    assert spec.description == "Local <b>Agent</b> 1.2.3 (ACP registry)"
    with pytest.raises(ConfigError, match="not installed here: install uv"):
        registry.resolve("py-agent")
    assert registry.resolve("demo")[0].name == "demo"  # the agent table comes first
    assert served.hits == 1


def test_the_command_lists_them_escaped(served: Served) -> None:
    served.body = body(fixture_registry()).replace(
        b"The node-agent agent", b"Bell \\u0007 \\u001b[2J"
    )
    out = io.StringIO()
    assert main(["agents"], stdout=out) == 0
    text = out.getvalue()
    assert "node-agent" in text and "via npx" in text and "npx -y @x/node-agent@1.2.3 --acp" in text
    assert "local-agent              installed      acpnb-test-agent --acp" in text
    assert "not installed  install uv (uvx)" in text
    assert "\x1b" not in text and "\x07" not in text and "\\x1b[2J" in text
    served.status = 404
    offline = io.StringIO()
    assert main(["agents", "--offline"], stdout=offline) == 0
    assert "the copy of the ACP registry cached on" in offline.getvalue()
    os.remove(cache_path())
    gone = io.StringIO()
    assert main(["agents"], stdout=gone) == 1
    assert "could not be fetched (HTTP 404) and no copy of it is cached" in gone.getvalue()


def test_a_program_is_a_name_on_the_path_never_a_path_of_the_registrys(
    served: Served, offline_home: Path
) -> None:
    planted = offline_home / "bin" / "acpnb-test-agent"
    registry = fixture_registry()
    # A package's `cmd` that is a path: the entry is not an agent (skipped).
    registry["agents"][1]["distribution"]["uvx"]["cmd"] = str(planted)
    # A binary's `cmd` that climbs out of its archive: only its name is looked up.
    local = registry["agents"][2]["distribution"]["binary"]
    (target,) = local.values()
    target["cmd"] = "../../../../bin/acpnb-test-agent"
    served.body = body(registry)
    listing = load()
    assert "py-agent" not in [a.id for a in listing.agents] and listing.skipped == 5
    local_agent = next(a for a in listing.agents if a.id == "local-agent")
    assert runner(local_agent).command == ("acpnb-test-agent", "--acp")
    target["cmd"] = "./run me; rm -rf ~"
    served.body = body(registry)
    odd = next(a for a in load().agents if a.id == "local-agent")
    assert runner(odd).status == "missing"  # not a program's name: nothing on the PATH is run


def test_a_package_that_reads_as_an_option_is_not_an_agent(served: Served) -> None:
    """`npx --package -e…` / `uvx --from --with…`: a package name starting with `-` would be
    read as an option of npx or uvx; such an entry is skipped."""
    registry = fixture_registry()
    registry["agents"][1]["distribution"]["uvx"]["package"] = "--with=evil"
    served.body = body(registry)
    listing = load()
    assert "py-agent" not in [a.id for a in listing.agents]
