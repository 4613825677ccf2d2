"""A local HTTP server for the ACP registry tests: serves what the test sets, on 127.0.0.1, in
a thread, and a fixture registry (tests/snapshots/acp_registry.json's agents, one of them runnable
here through a program the test puts on the PATH)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from acp_notebook.client.acp_registry import platform_target
from tests.http_stub import Handler, serving


class Served:
    """What the server answers: a status, a body, headers; `hits` counts its requests."""

    def __init__(self) -> None:
        self.status = 200
        self.body = b""
        self.headers: dict[str, str] = {"Content-Type": "application/json"}
        self.hits = 0
        self.url = ""


@contextmanager
def registry_server() -> Iterator[Served]:
    served = Served()

    class Registry(Handler):
        def do_GET(self) -> None:
            served.hits += 1
            self.reply(served.status, served.body, served.headers)

    with serving(Registry) as base:
        served.url = f"{base}/registry.json"
        yield served


def agent(agent_id: str, distribution: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": agent_id,
        "name": extra.pop("name", agent_id.title()),
        "version": "1.2.3",
        "description": extra.pop("description", f"The {agent_id} agent"),
        "authors": ["Someone"],
        "license": "MIT",
        "license_url": "https://example.invalid/license",
        "distribution": distribution,
        **extra,
    }


def fixture_registry(program: str = "acpnb-test-agent") -> dict[str, Any]:
    """A registry: an npx agent, a uvx one (with `cmd`), a binary one for this platform whose
    program is `program`, one for another platform only, and entries that are not agents."""
    return {
        "version": "1.0.0",
        "agents": [
            agent("node-agent", {"npx": {"package": "@x/node-agent@1.2.3", "args": ["--acp"]}}),
            agent("py-agent", {"uvx": {"package": "py-agent==1.2.3", "cmd": "py-agent-acp"}}),
            agent(
                "local-agent",
                {
                    "binary": {
                        platform_target(): {
                            "archive": "https://example.invalid/local.tar.gz",
                            "cmd": f"./{program}",
                            "args": ["--acp"],
                        }
                    }
                },
                name="Local <b>Agent</b>",
            ),
            agent(
                "elsewhere",
                {
                    "binary": {
                        "plan9-mips": {"archive": "https://example.invalid/a.zip", "cmd": "a"}
                    }
                },
            ),
            {"id": "Bad ID", "name": "x", "version": "1", "description": "d", "distribution": {}},
            {"id": "no-dist", "name": "x", "version": "1", "description": "d"},
            agent("huge", {"npx": {"package": "p"}}, description="d" * 10_000),
            "not an object",
        ],
    }


def body(registry: dict[str, Any]) -> bytes:
    return json.dumps(registry).encode()
