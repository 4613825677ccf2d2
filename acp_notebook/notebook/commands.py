"""`%agent` subcommands: list agents, show status, manage sessions, modes and config."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ..config import ConfigError
from ..errors import AcpError
from ..render.mdsafe import inline
from . import publish
from .cell import start_error_message
from .runtime import NamedSession

if TYPE_CHECKING:
    from ..magics import AcpNotebook

USAGE = """\
%agent list                          agents you can use (built-in, TOML file, config)
%agent status [-s NAME]              agent, session, mode, config options, usage
%agent sessions [-a AGENT]           sessions the agent keeps (session/list)
%agent resume ID [-a AGENT] [-s NAME]  continue a listed session (session/resume)
%agent load ID [-a AGENT] [-s NAME]    reopen a session with its history (session/load)
%agent mode MODE [-s NAME]           set the session mode
%agent config KEY=VALUE [-s NAME]    set a session config option
%agent stop [-s NAME]                cancel the running turn
%agent restart [-a AGENT]            restart the agent process (sessions resume on it)
%agent close [-s NAME | -a AGENT | --all]  close sessions and stop agents
%agent chat [-s NAME] [-a AGENT]     a chat widget on the session
"""


def _parser() -> argparse.ArgumentParser:
    from ..magics import _Parser

    p = _Parser(prog="%agent", usage=USAGE, add_help=False)
    p.add_argument("command", nargs="?", default="list")
    p.add_argument("value", nargs="?")
    p.add_argument("--session", "-s")
    p.add_argument("--agent", "-a")
    p.add_argument("--all", action="store_true")
    p.add_argument("--help", "-h", action="store_true")
    return p


async def run(magics: AcpNotebook, line: str) -> Any:
    from ..magics import _parse

    args = _parse(_parser(), line)  # type: ignore[arg-type]
    if args.help or args.command == "help":
        _md(f"```\n{USAGE}```")
        return None
    handler = _COMMANDS.get(args.command)
    if handler is None:
        raise UsageError(f"unknown %agent command {args.command!r}\n\n{USAGE}")
    try:
        return await handler(magics, args)
    except (ValueError, ConfigError, AcpError) as exc:
        raise UsageError(str(exc)) from None


def _need(args: argparse.Namespace, what: str) -> str:
    if not args.value:
        raise UsageError(f"%agent {args.command} needs {what}\n\n{USAGE}")
    return str(args.value)


def _session(magics: AcpNotebook, args: argparse.Namespace) -> NamedSession:
    runtime = magics.runtime
    name = args.session or runtime.last_session
    entry = runtime.find(name) if name else None
    if entry is None:
        known = ", ".join(sorted(runtime.sessions)) or "none yet: run an %%agent cell first"
        raise UsageError(f"no session {name!r}; open sessions: {known}" if name
                         else f"no session is open ({known})")
    return entry


def _s(value: Any) -> str:
    """Agent text in Markdown prose: defused (no HTML, no links, one line)."""
    return inline(str(value))


def _code(value: Any) -> str:
    """An id as a code span, fenced with more backticks than it holds: nothing inside renders."""
    text = " ".join(str(value).split())
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md(text: str) -> None:
    # The Markdown is also the plain text: it reads well in a terminal or a diff of the notebook.
    publish.show({"text/markdown": text, "text/plain": text})  # masked: agent text in it


async def _list(magics: AcpNotebook, args: argparse.Namespace) -> None:
    registry = magics.registry()
    default = registry.default
    rows = ["| agent | command | found | from |", "|---|---|---|---|"]
    for name, spec in sorted(registry.agents.items()):
        mark = " (default)" if name == default else ""
        rows.append(f"| `{name}`{mark} | `{spec.command_line}` | "
                    f"{'yes' if spec.available else 'no'} | {spec.source} |")
    if not default:
        rows.append("\nNo default agent: cells without `--agent` use the embedded demo agent.")
    _md("\n".join(rows))


async def _status(magics: AcpNotebook, args: argparse.Namespace) -> None:
    entry = _session(magics, args)
    session = entry.session
    client = session.client
    usage = session.usage
    status = {
        "session": entry.name, "agent": entry.agent, "agent_info": client.agent_info,
        "session_id": session.id, "title": session.title, "mode": session.mode,
        "modes": [m.get("id") for m in session.modes],
        "config": {o.get("id"): o.get("currentValue") for o in session.config_options},
        "commands": [c.get("name") for c in session.commands],
        "usage": usage.to_json() if usage else None, "pid": client.pid,
        "turns": len(session.history), "running": session.running is not None,
    }
    # Everything the agent sent (ids, titles, names) is untrusted Markdown: defuse it.
    lines = [f"**{_s(entry.name)}** — agent {_code(entry.agent)} ({_s(client.agent_name)}), "
             f"pid {client.pid}",
             f"- session {_code(session.id)}"
             + (f": {_s(session.title)}" if session.title else ""),
             f"- mode: {_code(session.mode)}"
             + (f" (of {', '.join(_s(m.get('id')) for m in session.modes)})"
                if session.modes else "")]
    for option in session.config_options:
        lines.append(f"- {_s(option.get('name') or option.get('id'))} "
                     f"({_code(option.get('id'))}): {_code(option.get('currentValue'))}")
    if usage:
        pct = f" ({usage.fraction:.0%})" if usage.fraction is not None else ""
        cost = (f", cost {usage.cost_amount:.4f} {_s(usage.cost_currency)}"
                if usage.cost_amount is not None else "")
        lines.append(f"- context: {usage.used:,} / {usage.size:,} tokens{pct}{cost}")
    if session.commands:
        lines.append("- commands: " + ", ".join(_code(f"/{c.get('name')}")
                                                 for c in session.commands))
    lines.append(f"- turns: {len(session.history)}"
                 + (" (one running)" if session.running else ""))
    _md("\n".join(lines))
    magics.user_ns["_agent_status"] = publish.REDACTOR.obj(status)  # the same facts as data


async def _client(magics: AcpNotebook, args: argparse.Namespace) -> Any:
    spec, _ = magics.registry().resolve(args.agent)
    try:
        return spec, await magics.runtime.client(spec, magics.client_options())
    except AcpError as exc:
        raise UsageError(start_error_message(exc, spec)) from None


async def _sessions(magics: AcpNotebook, args: argparse.Namespace) -> None:
    spec, client = await _client(magics, args)
    try:
        sessions: list[dict[str, Any]] = await client.list_sessions()
    except AcpError as exc:
        raise UsageError(str(exc)) from None
    rows = [f"Sessions of `{spec.name}`:", "", "| id | title | updated | cwd |",
            "|---|---|---|---|"]
    for s in sessions:
        cells = (s.get("sessionId"), s.get("title") or "", s.get("updatedAt") or "", s.get("cwd"))
        rows.append("| " + " | ".join(_s(c).replace("|", "\\|") for c in cells) + " |")
    _md("\n".join(rows) if sessions else f"`{spec.name}` has no stored sessions.")
    magics.user_ns["_agent_sessions"] = publish.REDACTOR.obj(sessions)  # the same, as data


async def _open(magics: AcpNotebook, args: argparse.Namespace, how: str) -> None:
    session_id = _need(args, "a session id (see %agent sessions)")
    spec, client = await _client(magics, args)
    name = args.session or spec.name
    if magics.runtime.find(name) is not None:
        await magics.runtime.close_session(name)
    opener = client.resume_session if how == "resume" else client.load_session
    try:
        session = await opener(session_id)
    except AcpError as exc:
        raise UsageError(str(exc)) from None
    magics.runtime.add(name, spec.name, session)
    _md(f"Session `{session_id}` is now `--session {name}` ({how.rstrip('e')}ed"
        + (f", {len(session.history)} earlier turns" if how == "load" else "") + ").")
    if how == "load" and session.history:
        from ..client.transcript import record_transcript
        from ..render import render_bundle

        redact = magics.runtime.redactor.obj  # replayed history may echo the agent's keys too
        for record in session.history:
            transcript = {**record_transcript(record, session), "success": True,
                          "stopReason": "end_turn", "note": "replayed history"}
            transcript.pop("duration")  # the replay's timing says nothing about the turn
            publish.show(render_bundle(redact(transcript)))


async def _resume(magics: AcpNotebook, args: argparse.Namespace) -> None:
    await _open(magics, args, "resume")


async def _load(magics: AcpNotebook, args: argparse.Namespace) -> None:
    await _open(magics, args, "load")


async def _mode(magics: AcpNotebook, args: argparse.Namespace) -> None:
    mode = _need(args, "a mode id")
    entry = _session(magics, args)
    await entry.session.set_mode(mode)
    _md(f"Mode of `{entry.name}`: `{mode}`")


async def _config(magics: AcpNotebook, args: argparse.Namespace) -> None:
    pair = _need(args, "KEY=VALUE")
    key, sep, value = pair.partition("=")
    if not sep:
        raise UsageError("%agent config needs KEY=VALUE")
    entry = _session(magics, args)
    from .cell import CellOptions, apply_settings

    await apply_settings(entry.session, CellOptions(config=[(key, value)]))
    _md(f"`{key}` of `{entry.name}` is now `{value}`")


async def _stop(magics: AcpNotebook, args: argparse.Namespace) -> None:
    entry = _session(magics, args)
    result = await entry.session.stop()
    _md("No turn was running." if result is None else
        f"Stopped turn `{result.turn_id}` ({result.stop_reason}).")


async def _restart(magics: AcpNotebook, args: argparse.Namespace) -> None:
    spec, _ = magics.registry().resolve(args.agent or _agent_of_last(magics))
    await magics.runtime.restart_agent(spec.name)
    _md(f"Agent `{spec.name}` restarted: its sessions continue on a fresh process at the next "
        "prompt.")


async def _close(magics: AcpNotebook, args: argparse.Namespace) -> None:
    runtime = magics.runtime
    if args.all:
        await runtime.close_all()
        _md("Closed every session and stopped every agent.")
    elif args.agent:
        spec, _ = magics.registry().resolve(args.agent)
        await runtime.close_agent(spec.name)
        _md(f"Stopped agent `{spec.name}` and closed its sessions.")
    else:
        entry = _session(magics, args)
        await runtime.close_session(entry.name)
        _md(f"Closed session `{entry.name}`.")


async def _chat(magics: AcpNotebook, args: argparse.Namespace) -> Any:
    from ..widgets.chat import ChatWidget
    from .cell import open_session

    spec, _ = magics.registry().resolve(args.agent or _agent_of_last(magics))
    name = args.session or spec.name
    try:
        session = await open_session(magics.runtime, spec, name, False, magics.client_options())
    except AcpError as exc:
        raise UsageError(start_error_message(exc, spec)) from None
    chat = ChatWidget(session, redactor=magics.runtime.redactor)
    display(chat.box)
    return None


def _agent_of_last(magics: AcpNotebook) -> str | None:
    name = magics.runtime.last_session
    entry = magics.runtime.find(name) if name else None
    return entry.agent if entry else None


_COMMANDS = {
    "list": _list, "agents": _list, "status": _status, "sessions": _sessions,
    "resume": _resume, "load": _load, "mode": _mode, "config": _config, "stop": _stop,
    "restart": _restart, "close": _close, "chat": _chat,
}
