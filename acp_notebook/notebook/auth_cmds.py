"""`%agent auth`, `%agent logout` and `%agent delete`: what they show and do.

Method ids, names, descriptions and a terminal login's command line and output all come from the
agent: masked, escaped (`views.Doc`), control characters out (`views.lines`), bounded.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

from ..client import auth
from ..client.client import Client
from ..config import AgentSpec
from ..display import publish
from ..display.views import Code, Doc, lines
from .host import Host


def methods_doc(spec: AgentSpec, client: Client, host: Host) -> Doc:
    mask = host.runtime.redactor.text
    doc = Doc(mask)
    offered = auth.how_to(client)
    if not offered:
        return doc.para("Agent ", Code(spec.name), " offers no authentication methods.")
    doc.para("Agent ", Code(spec.name), " offers these ways to log in:")
    rows = []
    for way in offered:
        run = Code(f"%agent auth {way.method_id} -a {shlex.quote(spec.name)}")
        what: Any = "the command below" if way.runs else f"({way.note})" if way.note else ""
        rows.append([Code(way.method_id), way.name, run, what or "one request"])
    doc.table(["method", "name", "run", "what it runs"], rows)
    for way in offered:
        if way.runs:  # whole: a cell of the table is one bounded line, which hid its end
            doc.para(Code(way.method_id), " runs (a terminal login, with these variables):")
            doc.pre(way.runs)
    if any(way.runs for way in offered):
        doc.para("A terminal login runs here without input; one that asks questions must be run")
        doc.para("in a terminal instead (the command above), then the agent restarted.")
    return doc


async def authenticate(host: Host, spec: AgentSpec, client: Client, method_id: str) -> None:
    mask = host.runtime.redactor.text

    def show(text: str) -> None:
        sys.stdout.write(lines(mask(text), 64 * 1024))
        sys.stdout.flush()

    kind = auth.kind(auth.method(client, method_id))
    await client.authenticate(method_id, on_output=show)
    done = "logged in; the agent restarted" if kind == "terminal" else "authenticated"
    publish.show(
        Doc(mask).para("Agent ", Code(spec.name), f": {done} with ", Code(method_id), ".").bundle()
    )


async def logout(host: Host, spec: AgentSpec, client: Client) -> None:
    await client.logout()
    publish.show(
        Doc(host.runtime.redactor.text)
        .para(
            "Agent ", Code(spec.name), ": logged out. Its sessions may now fail until you log in."
        )
        .bundle()
    )


async def delete(host: Host, spec: AgentSpec, client: Client, session_id: str) -> None:
    await client.delete_session(session_id)
    publish.show(
        Doc(host.runtime.redactor.text)
        .para("Deleted session ", Code(session_id), " of agent ", Code(spec.name), ".")
        .bundle()
    )
