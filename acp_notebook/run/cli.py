"""The `acp-notebook` command: `acp-notebook run NOTEBOOK…` and its options.

Exit status: 0 when every notebook ran, 1 when a cell or a turn failed (or a notebook could not
be run), 2 for a usage error (a bad option, a missing notebook, outputs that would collide).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TextIO

from ..client.serving.permissions import TOOL_KINDS
from . import params, registry
from .console import Console, shown
from .execute import Outcome, Settings, run_all
from .printer import Line, Totals

USAGE_ERROR = 2
OUTPUT_SUFFIX = ".out.ipynb"

_EPILOG = """\
The executed notebook is saved next to each input as NAME.out.ipynb, or where --output says.
Exit status: 0 every notebook ran, 1 a cell or an agent turn failed, 2 usage error."""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="acp-notebook", description="Jupyter notebooks that talk to ACP coding agents."
    )
    commands = top.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="execute notebooks, printing each agent turn as it streams",
        description="Execute notebooks on their kernel (nbclient), printing each agent turn "
        "as it streams, and save them with their outputs.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("notebooks", nargs="+", metavar="NOTEBOOK", type=Path)
    run.add_argument(
        "-o",
        "--output",
        metavar="PATH|DIR",
        help="where to save: a file for one notebook; a directory (made if needed) for several, "
        "or for one when it exists or ends with /",
    )
    run.add_argument("--agent", metavar="NAME", help='agent for cells that name none, or "CMD"')
    run.add_argument("--allow", metavar="KINDS", action="append", default=[], help="e.g. read,edit")
    run.add_argument("--deny", metavar="KINDS", action="append", default=[], help="e.g. execute")
    run.add_argument(
        "-p",
        "--parameter",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="set a variable in a cell after the one tagged 'parameters' (as papermill does)",
    )
    run.add_argument("--timeout", metavar="S", type=float, help="bound each %%%%agent cell")
    run.add_argument(
        "--replay",
        action="store_const",
        const="record",
        help="--replay[=fill]: serve %%%%agent cells from the notebook's recorded turns; "
        "with =fill, run the agent for cells that changed",
    )
    run.add_argument("--replay-fill", dest="replay", action="store_const", const="fill",
                     help=argparse.SUPPRESS)  # fmt: skip
    run.add_argument("-q", "--quiet", action="store_true", help="failures and totals only")
    run.add_argument("-j", "--jobs", metavar="N", type=int, default=1, help="notebooks at once")
    agents = commands.add_parser(
        "agents",
        help="the agents of the ACP registry, and how each runs here",
        description="List the agents of the ACP registry (fetched, or the copy cached when it "
        "last was), with the command each runs as here or what to install.",
    )
    agents.add_argument("--offline", action="store_true", help="the cached copy only, no network")
    return top


def main(argv: list[str] | None = None, stdout: TextIO | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    # `--replay=fill` is one spelling of two meanings; argparse would take a following
    # notebook as the value of an optional one, so the explicit form is mapped before parsing.
    args_in = ["--replay-fill" if a == "--replay=fill" else a for a in args_in]
    top = parser()
    args = top.parse_args(args_in)
    if args.command == "agents":
        return registry.main(Console(stdout or sys.stdout), online=not args.offline)
    if args.command != "run":
        top.print_help()
        return USAGE_ERROR
    try:
        settings = _settings(args)
        jobs = _jobs(args.notebooks, args.output)
    except ValueError as exc:
        # shown(): a glob of the workspace can name a dangling link the agent called anything
        top.exit(USAGE_ERROR, f"acp-notebook run: error: {shown(str(exc))}\n")
    console = Console(stdout or sys.stdout)
    parallel = max(1, args.jobs)
    prefixed = parallel > 1 and len(jobs) > 1
    outs = [console.tagged(f"[{nb.name}] " if prefixed else "") for nb, _ in jobs]
    outcomes = asyncio.run(run_all(jobs, settings, outs, parallel))
    _summary(console, outcomes)
    return 0 if all(o.ok for o in outcomes) else 1


def _settings(args: argparse.Namespace) -> Settings:
    if args.timeout is not None and not args.timeout > 0:
        raise ValueError("--timeout must be a number of seconds above 0")
    if args.jobs < 1:
        raise ValueError("-j must be at least 1")
    return Settings(
        agent=args.agent,
        allow=_kinds("--allow", args.allow),
        deny=_kinds("--deny", args.deny),
        timeout=args.timeout,
        parameters=params.parse(args.parameter),
        replay=args.replay,
        quiet=args.quiet,
    )


def _kinds(flag: str, values: list[str]) -> tuple[str, ...]:
    kinds = [k.strip() for v in values for k in v.split(",") if k.strip()]
    unknown = sorted(set(kinds) - TOOL_KINDS - {"*"})
    if unknown:
        known = ", ".join(sorted(TOOL_KINDS))
        raise ValueError(f"{flag}: unknown kind {', '.join(unknown)} (known: {known}, or *)")
    return tuple(dict.fromkeys(kinds))


def _jobs(notebooks: list[Path], where: str | None) -> list[tuple[Path, Path]]:
    """(input, output) pairs; ValueError when an input is missing or outputs would collide."""
    for nb in notebooks:
        if not nb.is_file():
            raise ValueError(f"no such notebook: {nb}")
    output = Path(where) if where is not None else None
    as_dir = where is not None and (
        len(notebooks) > 1 or Path(where).is_dir() or where.endswith(("/", os.sep))
    )
    jobs = []
    for nb in notebooks:
        if output is None:
            target = nb.with_name(nb.name.removesuffix(".ipynb") + OUTPUT_SUFFIX)
        else:
            target = output / nb.name if as_dir else output
        jobs.append((nb, target))
    targets = [t.resolve() for _, t in jobs]
    if len(set(targets)) < len(targets):
        raise ValueError("two notebooks would be saved to the same file; pass --output DIR")
    if set(targets) & {nb.resolve() for nb in notebooks}:
        raise ValueError("the output would overwrite an input notebook; pick another --output")
    return jobs


def _summary(console: Console, outcomes: list[Outcome]) -> None:
    total = Totals()
    for o in outcomes:
        total.merge(o.totals)
    lines = [Line(""), *(o.line() for o in outcomes)]
    if len(outcomes) > 1:
        failed = sum(not o.ok for o in outcomes)
        lines.append(Line(f"{len(outcomes)} notebooks, {failed} failed · {total.line()}", "bold"))
    console.write(lines)
