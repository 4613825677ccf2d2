"""The scripted agent's command line, and its two ways to run: a process, or on streams.

`main()` is the subprocess entry point (`tests/agents/scripted_agent.py`, `python -m
tests.agents.scripted`): stdio, `os._exit` at the end. `serve_streams(argv, streams)` runs the
same agent in the client's process, on the streams of its in-process transport
(`acp_notebook.client.transport.AgentStreams`), and returns the exit code.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from .agent import Agent
from .host import AgentGone, Host, Streams, StreamsHost
from .wire import CAPABILITY_NAMES


def capability_list(text: str) -> frozenset[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CAPABILITY_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown prompt capabilities: {', '.join(unknown)}")
    return frozenset(CAPABILITY_NAMES[name] for name in names)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A scripted ACP v1 agent for tests.")
    parser.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="append every received message to FILE, one JSON per line",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="persist sessions in DIR so another process can load them",
    )
    parser.add_argument("--protocol-version", type=int, default=1, metavar="N")
    parser.add_argument("--exit-during-initialize", type=int, metavar="CODE")
    parser.add_argument("--load-session", action="store_true")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--list-page-size", type=int, default=50, metavar="N")
    parser.add_argument(
        "--list-endless",
        choices=["empty", "repeat", "fresh"],
        help="session/list never ends: empty pages with new cursors, the same "
        "cursor again, or one made-up session per page with a new cursor",
    )
    parser.add_argument("--close", action="store_true")
    parser.add_argument("--delete", action="store_true")
    parser.add_argument("--additional-directories", action="store_true")
    parser.add_argument(
        "--fork",
        action="store_true",
        help="serve session/fork (sessionCapabilities.fork): a copy of the conversation",
    )
    parser.add_argument(
        "--fork-id-json",
        metavar="JSON",
        help="the sessionId session/fork answers with, as given (a hostile one)",
    )
    parser.add_argument(
        "--new-id-json",
        metavar="JSON",
        help="the sessionId session/new answers with, as given (a hostile one)",
    )
    parser.add_argument("--auth-required", action="store_true")
    parser.add_argument(
        "--auth-terminal",
        type=Path,
        metavar="FILE",
        help="offer a terminal auth method; session/new needs FILE, which that login "
        "(this agent run with --login-to FILE and SCRIPTED_LOGIN=yes) writes",
    )
    parser.add_argument("--login-to", type=Path, metavar="FILE", help="log in (write FILE), exit")
    parser.add_argument("--logout", action="store_true", help="offer logout (auth.logout)")
    parser.add_argument("--modes", action="store_true")
    parser.add_argument("--config-options", action="store_true")
    parser.add_argument(
        "--prompt-capabilities",
        type=capability_list,
        default=frozenset(),
        metavar="LIST",
        help="comma list of image, audio, embedded",
    )
    parser.add_argument("--commands", action="store_true")
    parser.add_argument(
        "--mcp-transports",
        type=lambda text: frozenset(t.strip() for t in text.split(",") if t.strip()),
        default=frozenset(),
        metavar="LIST",
        help="comma list of http, sse: the MCP transports advertised in mcpCapabilities",
    )
    parser.add_argument(
        "--config-options-json",
        metavar="JSON",
        help="the configOptions of session/new, load and resume, as given",
    )
    parser.add_argument("--stderr-at-start", type=int, default=0, metavar="N")
    parser.add_argument("--agent-name", default="scripted-agent")
    parser.add_argument(
        "--hang-method",
        action="append",
        metavar="METHOD",
        help="never answer this request (repeatable)",
    )
    parser.add_argument(
        "--hang-once-marker",
        type=Path,
        metavar="FILE",
        help="hang only if FILE does not exist yet; create it with our pid",
    )
    parser.add_argument(
        "--system-prompt",
        choices=["append", "override"],
        help="take a client's systemPrompt (sessionCapabilities.systemPrompt): append mode, "
        "or both modes; the echo_system_prompt step says what it got",
    )
    parser.add_argument(
        "--ignore-sigterm",
        action="store_true",
        help="ignore SIGTERM, so only SIGKILL stops the process",
    )
    return parser.parse_args(None if argv is None else list(argv))


def login(path: Path) -> int:
    """What a terminal auth method runs: says what it does, needs the env the method gave."""
    print("Logging in to the scripted agent...", flush=True)
    if os.environ.get("SCRIPTED_LOGIN") != "yes":
        print("login failed: SCRIPTED_LOGIN is not set", file=sys.stderr, flush=True)
        return 3
    path.write_text("logged in\n")
    print("Logged in.", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = parse_args(argv)
    if args.login_to is not None:
        sys.exit(login(args.login_to))
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    host = Host()
    if args.stderr_at_start:
        host.stderr_filler(args.stderr_at_start)
    agent = Agent(args, host)
    try:
        agent.serve(sys.stdin.buffer)
    except KeyboardInterrupt:  # SIGINT, e.g. a kernel interrupt sent to our process group
        os._exit(130)
    # os._exit: interpreter shutdown could block on stdout held by a turn thread.
    os._exit(0)


def serve_streams(argv: Sequence[str], streams: Streams) -> int:
    """The agent with these flags on in-process streams, until they end; its exit code.

    Process-only flags mean nothing here: --ignore-sigterm (no signal reaches a thread).
    """
    host = StreamsHost(streams)
    args = parse_args(argv)
    agent = None
    try:
        if args.stderr_at_start:
            host.stderr_filler(args.stderr_at_start)
        agent = Agent(args, host)
        agent.serve(streams.stdin)
    except AgentGone:
        pass  # exit, kill_self or the client ended us: the code is already the streams'
    finally:
        if agent is not None:
            agent.close()
    return 0
