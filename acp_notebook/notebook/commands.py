"""`%agent` subcommands: list agents, show status, manage sessions, modes and config, log in.

Each subcommand is one `_name` function in `_COMMANDS`; what it shows is drawn in
`command_docs.py` (escaped documents of the agent's values), or by `ledger.py` for the ledger.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import anyio
from IPython.core.error import UsageError

from ..client import acp_registry, auth
from ..display import publish, views
from ..display.views import Code, Doc, Value
from ..errors import AcpError, CapabilityError, InvalidArgumentError
from ..kernel_tools import notebook_undo
from . import mcp_servers, replay
from .command_docs import (
    cells_revert_doc,
    key,
    log_doc,
    methods_doc,
    revert_doc,
    sessions_doc,
    status_doc,
)
from .host import Host
from .ledger import ledger_doc
from .options import CellOptions, Parser, parse
from .runtime import NamedSession
from .start import apply_settings, open_named, prestart_failure, start_error_message
from .stored_sessions import Memory
from .stored_sessions import sessions_doc as sessions_of_kernel

MAX_LOG = 1000  # messages each way asked for; the client keeps `wire_log_size` reads' worth

USAGE = """\
%agent list                          agents you can use (built-in, TOML file, config)
%agent registry                      the ACP registry's agents: how each runs here
%agent status [-s NAME]              agent, session, mode, config options, usage
%agent sessions [-a AGENT] [-n N] [--cwd DIR | --all]  this kernel's, stored and the
                                     agent's sessions (of the workspace, or of DIR, or all)
%agent resume ID [-a AGENT] [-s NAME]  continue a listed session (session/resume)
%agent load ID [-a AGENT] [-s NAME]    reopen a session with its history (session/load)
%agent mode MODE [-s NAME]           set the session mode
%agent config KEY=VALUE [-s NAME]    set a session config option
%agent stop [-s NAME]                cancel the running turn
%agent start [-a AGENT]              start the agent and its session in the background
%agent restart [-a AGENT]            restart the agent process (sessions resume on it)
%agent close [-s NAME | -a AGENT | --all]  close sessions and stop agents
%agent chat [-s NAME] [-a AGENT]     a chat widget on the session
%agent log [-n N] [--raw] [-a AGENT] the last N JSON-RPC messages each way (masked)
%agent auth [METHOD] [-a AGENT]      the agent's login methods; log in with one
%agent logout [-a AGENT]             log out (where the agent offers it)
%agent delete ID [-a AGENT]          delete a listed session (session/delete)
%agent revert [TURN] [--force] [-s NAME]  undo the files a turn (default: the last) wrote
                                     through the client and the notebook cells it inserted
                                     or edited; --force also those changed since
%agent ledger                        this kernel's turns: tokens, cost, time, and the totals
"""


def _parser() -> Parser:
    p = Parser(prog="%agent", usage=USAGE, add_help=False)
    p.add_argument("command", nargs="?", default="list")
    p.add_argument("value", nargs="?")
    p.add_argument("--session", "-s")
    p.add_argument("--agent", "-a")
    p.add_argument("--all", action="store_true")
    p.add_argument("--help", "-h", action="store_true")
    p.add_argument("-n", type=int, default=20, dest="count")
    p.add_argument("--raw", action="store_true")
    p.add_argument("--cwd")  # %agent sessions: list those of this directory
    p.add_argument("--force", action="store_true")  # %agent revert
    return p


async def run(host: Host, line: str) -> Any:
    """One `%agent` line: the subcommand's display, or a usage error."""
    args = parse(_parser(), line)
    if args.help or args.command == "help":
        _show(Doc().pre(USAGE))
        return None
    handler = _COMMANDS.get(args.command)
    if handler is None:
        raise UsageError(f"unknown %agent command {args.command!r}\n\n{USAGE}")
    try:
        return await handler(host, args)
    except (ValueError, AcpError) as exc:  # ConfigError, NotOfferedError, a refusal...
        raise UsageError(_error_text(host, exc)) from None


def _error_text(host: Host, exc: BaseException | str) -> str:
    """An error that may quote the agent, for a usage error: masked, no control characters."""
    return views.lines(host.runtime.redactor.text(str(exc)))


def _need(args: argparse.Namespace, what: str) -> str:
    if not args.value:
        raise UsageError(f"%agent {args.command} needs {what}\n\n{USAGE}")
    return str(args.value)


def _session(host: Host, args: argparse.Namespace) -> NamedSession:
    runtime = host.runtime
    name = args.session or runtime.last_session
    entry = runtime.find(name) if name else None
    if entry is None:
        known = ", ".join(sorted(runtime.sessions)) or "none yet: run an %%agent cell first"
        raise UsageError(
            f"no session {name!r}; open sessions: {known}"
            if name
            else f"no session is open ({known})"
        )
    return entry


def _show(doc: Doc | dict[str, str]) -> None:
    # HTML built by `views` (every value escaped) and the same as plain text; never Markdown,
    # whose escaping would depend on the renderer (see views).
    publish.show(doc.bundle() if isinstance(doc, Doc) else doc)


def _masker(host: Host) -> Callable[[str], str]:
    return host.runtime.redactor.text


async def _list(host: Host, args: argparse.Namespace) -> None:
    registry = host.registry()
    default = registry.default
    rows = []
    for name, spec in sorted(registry.agents.items()):
        rows.append(
            [
                (Code(name), " (default)" if name == default else ""),
                Code(spec.command_line),
                "yes" if spec.available else "no",
                spec.source,
            ]
        )
    doc = Doc(_masker(host)).table(["agent", "command", "found", "from"], rows)
    if not default:
        doc.para(
            "No default agent: cells without ", Code("--agent"), " use the embedded demo agent."
        )
    _show(doc)


async def _registry(host: Host, args: argparse.Namespace) -> None:
    """The ACP registry's agents (fetched, or its cached copy), each with how it runs here."""
    listing = await anyio.to_thread.run_sync(acp_registry.load)
    rows = []
    for agent in acp_registry.listed(listing, host.registry().agents):
        how = Code(agent.command) if agent.command else ("install ", Value(agent.hint))
        mark = "✓ " if agent.status == "installed" else ""
        rows.append(
            [
                (Code(agent.id), f" {agent.table_note()}".rstrip()),
                (Value(agent.name), " ", Value(agent.version)),
                Value(agent.description),
                mark + agent.here,
                how,
            ]
        )
    doc = Doc(_masker(host)).para(acp_registry.describe_source(listing))
    doc.table(["--agent", "agent", "description", "here", "runs as"], rows)
    doc.para("Run one with ", Code("%%agent --agent ID"), " (installed, or through npx or uvx).")
    _show(doc)


def _status_facts(entry: NamedSession) -> dict[str, Any]:
    """What `%agent status` shows, as data (`_agent_status`): the agent's values as it sent them."""
    session = entry.session
    client = session.client
    usage = session.usage
    options = session.config_options
    return {
        "session": entry.name,
        "agent": entry.agent,
        "agent_info": client.agent_info,
        "session_id": session.id,
        "title": session.title,
        "mode": session.mode,
        "modes": [m.get("id") for m in session.modes],
        # An id that is not a string (an agent's mistake) must not break the mapping.
        "config": {key(o.get("id")): o.get("currentValue") for o in options},
        "config_options": [{k: o.get(k) for k in ("id", "name", "currentValue")} for o in options],
        "commands": [c.get("name") for c in session.commands],
        "usage": usage.to_json() if usage else None,
        "pid": client.pid,
        "mcp_servers": mcp_servers.status_lines(session),  # names, never env or header values
        # What the session was opened with, added to the agent's instructions ("": none).
        "system_prompt": session.system_prompt,
        # Forks per cell (cell_forks.py): whether the agent forks, the cells of the story.
        "forks": client.session_capabilities.get("fork") is not None,
        "story": len(entry.story.points),
        "turns": len(session.history),
        "running": session.running is not None,
    }


async def _start(host: Host, args: argparse.Namespace) -> None:
    from .prestart import begin

    spec, _ = host.registry().resolve(args.agent)
    entry = host.runtime.find(spec.name)
    if entry is not None and entry.agent == spec.name:
        _show(views.message("Agent ", Code(spec.name), " and its session are already open."))
        return
    begin(host, spec)
    _show(
        views.message(
            "Starting agent ",
            Code(spec.name),
            " and its session in the background: the next %%agent cell uses them "
            "(%agent status says how the start went).",
        )
    )


def _prestart_status(host: Host, args: argparse.Namespace) -> bool:
    """What `%agent status` says of a background start: under way or failed (True if said)."""
    pre = host.runtime.prestart
    if pre is None or (args.session not in (None, pre.session)):
        return False
    if not pre.task.done():
        _show(views.message("Agent ", Code(pre.agent), " is starting in the background."))
        return True
    if pre.error is not None:  # kept for the first cell too
        _show(views.message(prestart_failure(pre.error), mask=_masker(host)))
        return True
    return False


async def _status(host: Host, args: argparse.Namespace) -> None:
    said = _prestart_status(host, args)
    name = args.session or host.runtime.last_session
    if said and (name is None or host.runtime.find(name) is None):
        return  # no session to show yet
    if not host.runtime.sessions and (replaying := replay.status(host)) is not None:
        _show(replaying)  # a replay opens no session: say so rather than fail
        return
    facts = _status_facts(_session(host, args))
    _show(status_doc(facts, _masker(host)))
    host.user_ns["_agent_status"] = publish.REDACTOR.obj(facts)  # the same facts as data


async def _client(host: Host, args: argparse.Namespace) -> Any:
    spec, _ = host.registry().resolve(args.agent)
    try:
        return spec, await host.runtime.client(spec, host.client_options())
    except AcpError as exc:
        raise UsageError(_error_text(host, start_error_message(exc, spec))) from None


async def _sessions(host: Host, args: argparse.Namespace) -> None:
    if not 0 < args.count <= MAX_LOG:
        raise UsageError(f"%agent sessions -n takes 1 to {MAX_LOG}, not {args.count}")
    spec, client = await _client(host, args)
    memory = Memory.of(host.remember_sessions, host.user_ns)
    kernel_doc = sessions_of_kernel(host.runtime, client.cwd, memory, _masker(host))
    if kernel_doc is not None:
        _show(kernel_doc)
    try:
        # The workspace's sessions by default (session/list's cwd filter); --all: every one.
        where = None if args.all else (args.cwd or client.cwd)
        sessions: list[dict[str, Any]] = await client.list_sessions(where, args.count + 1)
    except CapabilityError:  # the kernel's and the stored sessions above are all there is
        _show(views.message("Agent ", Code(spec.name), " does not list its sessions."))
        host.user_ns["_agent_sessions"] = []
        return
    except AcpError as exc:
        raise UsageError(_error_text(host, exc)) from None
    more, sessions = len(sessions) > args.count, sessions[: args.count]
    _show(sessions_doc(spec.name, sessions, _masker(host), where, more))
    host.user_ns["_agent_sessions"] = publish.REDACTOR.obj(sessions)  # the same, as data


async def _open(host: Host, args: argparse.Namespace, how: str) -> None:
    session_id = _need(args, "a session id (see %agent sessions)")
    spec, client = await _client(host, args)
    name = args.session or spec.name
    if host.runtime.find(name) is not None:
        await host.runtime.close_session(name)
    opener = client.resume_session if how == "resume" else client.load_session
    try:
        servers = await mcp_servers.session_servers(host, spec, client)
        session = await opener(session_id, mcp_servers=servers)
    except AcpError as exc:
        raise UsageError(_error_text(host, exc)) from None
    host.runtime.add(name, spec.name, session)
    memory = Memory.of(host.remember_sessions, host.user_ns)
    if memory is not None:  # the name now means this session, after a restart too
        memory.keep(host.runtime, client, spec.name, name, session)
    earlier = f", {len(session.history)} earlier turns" if how == "load" else ""
    _show(
        views.message(
            "Session ",
            Code(session_id),
            " is now ",
            Code(f"--session {name}"),
            f" ({how.rstrip('e')}ed{earlier}).",
            mask=_masker(host),
        )
    )
    if how == "load" and session.history:
        from ..client.transcript import record_transcript

        for record in session.history:  # replayed history may echo the agent's keys too
            transcript = {
                **record_transcript(record, session),
                "success": True,
                "stopReason": "end_turn",
                "note": "replayed history",
            }
            transcript.pop("duration")  # the replay's timing says nothing about the turn
            publish.show(publish.turn(transcript))


async def _resume(host: Host, args: argparse.Namespace) -> None:
    await _open(host, args, "resume")


async def _load(host: Host, args: argparse.Namespace) -> None:
    await _open(host, args, "load")


async def _mode(host: Host, args: argparse.Namespace) -> None:
    mode = _need(args, "a mode id")
    entry = _session(host, args)
    await entry.session.set_mode(mode)
    _show(views.message("Mode of ", Code(entry.name), ": ", Code(mode), mask=_masker(host)))


async def _config(host: Host, args: argparse.Namespace) -> None:
    pair = _need(args, "KEY=VALUE")
    key, sep, value = pair.partition("=")
    if not sep:
        raise UsageError("%agent config needs KEY=VALUE")
    entry = _session(host, args)
    await apply_settings(entry.session, CellOptions(config=[(key, value)]))
    _show(
        views.message(
            Code(key), " of ", Code(entry.name), " is now ", Code(value), mask=_masker(host)
        )
    )


async def _stop(host: Host, args: argparse.Namespace) -> None:
    entry = _session(host, args)
    result = await entry.session.stop()
    _show(
        views.message("No turn was running.")
        if result is None
        else views.message(
            "Stopped turn ",
            Code(result.turn_id),
            " (",
            Value(result.stop_reason),
            ").",
            mask=_masker(host),
        )
    )


async def _restart(host: Host, args: argparse.Namespace) -> None:
    spec, _ = host.registry().resolve(args.agent or _agent_of_last(host))
    await host.runtime.restart_agent(spec.name)
    _show(
        views.message(
            "Agent ",
            Code(spec.name),
            " restarted: its sessions continue on a fresh process at the next prompt.",
        )
    )


async def _close(host: Host, args: argparse.Namespace) -> None:
    runtime = host.runtime
    if args.all:
        await runtime.close_all()
        _show(views.message("Closed every session and stopped every agent."))
    elif args.agent:
        spec, _ = host.registry().resolve(args.agent)
        await runtime.close_agent(spec.name)
        _show(views.message("Stopped agent ", Code(spec.name), " and closed its sessions."))
    else:
        entry = _session(host, args)
        await runtime.close_session(entry.name)
        _show(views.message("Closed session ", Code(entry.name), "."))


async def _chat(host: Host, args: argparse.Namespace) -> Any:
    spec, _ = host.registry().resolve(args.agent or _agent_of_last(host))
    name = args.session or spec.name
    try:
        session = await open_named(host, spec, name)
    except AcpError as exc:
        raise UsageError(_error_text(host, start_error_message(exc, spec))) from None
    # The cell's value, so it shows as the cell's result and `chat = _` reaches it from code.
    return host.widgets.chat(session, redactor=host.runtime.redactor)


async def _log(host: Host, args: argparse.Namespace) -> None:
    if not 0 < args.count <= MAX_LOG:
        raise UsageError(f"%agent log -n takes 1 to {MAX_LOG} messages, not {args.count}")
    name = args.agent or _agent_of_last(host) or host.registry().resolve(None)[0].name
    agent = host.runtime.hosts.get(name)
    client = agent.client if agent is not None else None
    entries = client.wire_log.entries(args.count) if client is not None else []
    _show(log_doc(name, entries, args.count, args.raw, _masker(host)))


async def _auth(host: Host, args: argparse.Namespace) -> None:
    """`%agent auth [METHOD]`: the agent's ways to log in, or one of them run (a terminal
    login's output is the agent's: masked, control characters out, bounded)."""
    spec, client = await _client(host, args)
    mask = _masker(host)
    if not args.value:
        _show(methods_doc(spec.name, auth.how_to(client), mask))
        return
    method_id = str(args.value)

    def show(text: str) -> None:
        sys.stdout.write(views.lines(mask(text), 64 * 1024))
        sys.stdout.flush()

    kind = auth.kind(auth.method(client, method_id))
    await client.authenticate(method_id, on_output=show)
    done = "logged in; the agent restarted" if kind == "terminal" else "authenticated"
    _show(Doc(mask).para("Agent ", Code(spec.name), f": {done} with ", Code(method_id), "."))


async def _logout(host: Host, args: argparse.Namespace) -> None:
    spec, client = await _client(host, args)
    await client.logout()
    said = ": logged out. Its sessions may now fail until you log in."
    _show(Doc(_masker(host)).para("Agent ", Code(spec.name), said))


async def _delete(host: Host, args: argparse.Namespace) -> None:
    session_id = _need(args, "a session id (see %agent sessions)")
    spec, client = await _client(host, args)
    await client.delete_session(session_id)
    doc = Doc(_masker(host))
    _show(doc.para("Deleted session ", Code(session_id), " of agent ", Code(spec.name), "."))


async def _revert(host: Host, args: argparse.Namespace) -> None:
    """The files a turn wrote and the cells it inserted or edited (`notebook_undo`): the turn
    named, else the last that did either."""
    entry = _session(host, args)
    session = entry.session
    turn = args.value or notebook_undo.last_turn(session, session.checkpoints.last_turn())
    if not notebook_undo.changed(session, turn or ""):
        result = await session.revert(turn, force=args.force)
        _show(revert_doc(result, entry.name, _masker(host)))
        host.user_ns["_agent_revert"] = result  # what happened to each file, as data
        return
    assert turn is not None  # changed() holds for a turn only
    try:
        files = await session.revert(turn, force=args.force)
    except InvalidArgumentError:  # the turn wrote no file: its cells only
        files = None
    cells = await notebook_undo.revert(session, turn, args.force)
    if files is not None:
        _show(revert_doc(files, entry.name, _masker(host)))
    _show(cells_revert_doc(cells, turn, entry.name, _masker(host)))
    host.user_ns["_agent_revert"] = files if files is not None else cells
    host.user_ns["_agent_revert_cells"] = cells


async def _ledger(host: Host, args: argparse.Namespace) -> None:
    ledger = host.runtime.ledger
    _show(ledger_doc(ledger, host.max_cost_total, _masker(host)))
    host.user_ns["_agent_ledger"] = publish.REDACTOR.obj([e.to_json() for e in ledger.rows])


def _agent_of_last(host: Host) -> str | None:
    name = host.runtime.last_session
    entry = host.runtime.find(name) if name else None
    return entry.agent if entry else None


_COMMANDS = {
    "list": _list,
    "agents": _list,
    "registry": _registry,
    "status": _status,
    "sessions": _sessions,
    "resume": _resume,
    "load": _load,
    "mode": _mode,
    "config": _config,
    "stop": _stop,
    "start": _start,
    "restart": _restart,
    "close": _close,
    "chat": _chat,
    "log": _log,
    "auth": _auth,
    "logout": _logout,
    "delete": _delete,
    "revert": _revert,
    "ledger": _ledger,
}
