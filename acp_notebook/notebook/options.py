"""The `%%agent` options, each declared once: the parser, `CellOptions` and `--help` come from here.

To add an option, add one field to `CellOptions`: its type, its default, and as metadata
`option(...)`: its flags, its help, how argparse reads it (`action`, `type`, `metavar`).
`cell_parser()` builds the parser from the fields, in their order (the order of `--help`), and
`parse_cell_line()` turns a magic line into a `CellOptions`: argparse fills only what the line
gives, the dataclass the rest.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError

from ..errors import HelpShown


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error instead of exiting the kernel's process."""

    def error(self, message: str) -> Any:
        raise UsageError(f"{message}\n\n{self.format_usage().strip()}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if status == 0 and message is None:  # `--help`, which argparse has just printed
            raise HelpShown("help shown")
        raise UsageError(message or self.format_help())


def parse(parser: argparse.ArgumentParser, line: str) -> argparse.Namespace:
    """A magic's line, split as a shell would, parsed; bad quoting is a usage error."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot parse options: {exc}") from None
    return parser.parse_args(argv)


def _config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _kinds(text: str) -> list[str]:
    return [k for k in re.split(r"[,\s]+", text) if k]


def option(*flags: str, help: str, **argparse_kwargs: Any) -> dict[str, Any]:
    """The metadata that makes a `CellOptions` field a command-line option: `flags` and the
    keywords go to argparse's `add_argument`."""
    return {"flags": flags, "argparse": {"help": help, **argparse_kwargs}}


@dataclass
class CellOptions:
    """What a `%%agent` line asks for; each field is one option (see the module docstring)."""

    agent: str | None = field(
        default=None,
        metadata=option(
            "--agent", "-a", help="agent name (see %%agent list) or a full command line"
        ),
    )
    session: str | None = field(
        default=None,
        metadata=option("--session", "-s", help="session name (default: one per agent)"),
    )
    new: bool = field(
        default=False,
        metadata=option("--new", action="store_true", help="start a new session for this name"),
    )
    system_prompt: str | None = field(
        default=None,
        metadata=option(
            "--system-prompt",
            metavar="TEXT",
            help="instructions added to the agent's own (append) when this cell opens the "
            'session, in place of c.AcpNotebook.system_prompt; "" sends none',
        ),
    )
    mode: str | None = field(
        default=None, metadata=option("--mode", help="set the session mode first")
    )
    config: list[tuple[str, str | bool]] = field(
        default_factory=list,
        metadata=option(
            "--config",
            action="append",
            type=_config_pair,
            metavar="KEY=VALUE",
            help="set a session config option first (repeatable)",
        ),
    )
    out: str | None = field(
        default=None,
        metadata=option("--out", metavar="NAME", help="also bind the turn result to NAME"),
    )
    background: bool = field(
        default=False,
        metadata=option(
            "--background",
            "--bg",
            action="store_true",
            help="return the turn handle at once; the output keeps streaming",
        ),
    )
    timeout: float | None = field(
        default=None,
        metadata=option(
            "--timeout",
            type=float,
            metavar="SECONDS",
            help="cancel the turn after SECONDS and fail the cell",
        ),
    )
    # "extend": `--allow read,search --allow edit` is one flat list of kinds.
    allow: list[str] = field(
        default_factory=list,
        metadata=option(
            "--allow",
            action="extend",
            type=_kinds,
            metavar="KINDS",
            help="tool kinds to allow without asking, e.g. read,search",
        ),
    )
    deny: list[str] = field(
        default_factory=list,
        metadata=option(
            "--deny",
            action="extend",
            type=_kinds,
            metavar="KINDS",
            help="tool kinds to reject without asking, e.g. execute,delete",
        ),
    )
    variables: list[str] = field(
        default_factory=list,
        metadata=option(
            "--with",
            "-w",
            action="append",
            metavar="NAME",
            help="give the agent a kernel variable as context: a DataFrame's shape, dtypes and "
            "head, a figure as PNG, an exception's traceback, else its repr (repeatable)",
        ),
    )
    files: list[str] = field(
        default_factory=list,
        metadata=option(
            "--file", "-f", action="append", metavar="PATH", help="attach a file (repeatable)"
        ),
    )
    error: bool = field(
        default=False,
        metadata=option(
            "--error",
            action="store_true",
            help="give the agent the last exception: type, message, traceback, the cell that "
            "raised it",
        ),
    )
    cells: int | None = field(
        default=None,
        metadata=option(
            "--cells",
            type=int,
            metavar="N",
            help="give the agent the N cells above (sources, short outputs) and the notebook's "
            "path when known",
        ),
    )
    mcp: list[str] = field(
        default_factory=list,
        metadata=option(
            "--mcp",
            action="append",
            metavar="NAME",
            help="give the session the MCP server NAME (c.AcpNotebook.mcp_servers or [mcp.NAME] "
            "in the agents file; repeatable)",
        ),
    )
    quiet: bool = field(
        default=False,
        metadata=option(
            "--quiet", "-q", action="store_true", help="no live output; only the final record"
        ),
    )
    schema: str | None = field(
        default=None,
        metadata=option(
            "--schema",
            metavar="NAME",
            help="answer as JSON matching NAME (a pydantic model or a JSON-schema dict); the "
            "result's .output holds it",
        ),
    )
    max_cost: float | None = field(
        default=None,
        metadata=option(
            "--max-cost",
            type=float,
            metavar="USD",
            help="cancel the turn once the cost the agent reports passes USD; the cell fails",
        ),
    )
    no_kernel_tools: bool = field(
        default=False,
        metadata=option(
            "--no-kernel-tools",
            action="store_true",
            help="a session this cell opens gets no kernel tools (variables, cells, run code); "
            "in a session that has them, they refuse every call of this turn",
        ),
    )

    def check(self) -> None:
        """What argparse cannot say about single values: a usage error, before anything runs."""
        if self.out is not None and not self.out.isidentifier():
            raise UsageError(f"--out needs a Python name, not {self.out!r}")
        if self.schema is not None and not self.schema.isidentifier():
            raise UsageError(f"--schema needs a Python name, not {self.schema!r}")
        if self.max_cost is not None and not (0 <= self.max_cost < float("inf")):
            raise UsageError(f"--max-cost must be a number of USD, not {self.max_cost:g}")
        if self.timeout is not None and self.timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        if self.cells is not None and self.cells < 1:
            raise UsageError(f"--cells needs a number of cells, 1 or more, not {self.cells}")


def cell_parser() -> Parser:
    """The `%%agent` parser, built from `CellOptions`' fields (also what `--help` shows)."""
    parser = Parser(
        prog="%%agent",
        add_help=True,
        description="Send the cell's body as a prompt to an ACP agent.",
    )
    for each in dataclasses.fields(CellOptions):
        # SUPPRESS: an option the line does not give is left to the dataclass's default.
        parser.add_argument(
            *each.metadata["flags"],
            dest=each.name,
            default=argparse.SUPPRESS,
            **each.metadata["argparse"],
        )
    return parser


@functools.cache
def _shared_parser() -> Parser:
    # Built once: building it took longer than parsing a line with it (0.7 ms a cell). Parsing
    # changes nothing in it, and its help and usage are formatted anew at each call.
    return cell_parser()


def parse_cell_line(line: str) -> CellOptions:
    """The options of a `%%agent` line; a usage error (with the usage) for a bad one."""
    return CellOptions(**vars(parse(_shared_parser(), line)))
