"""The `%%agent` options: one declaration (notebook/options.py) gives the parser, the options
object and `--help`."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from acp_notebook.errors import HelpShown
from acp_notebook.notebook.options import CellOptions, cell_parser, parse_cell_line

# `%%agent --help` before the options were declared once, at 100 columns: kept word for word
# (plus --schema, --max-cost and --system-prompt, added since).
HELP = """\
usage: %%agent [-h] [--agent AGENT] [--session SESSION] [--new] [--system-prompt TEXT]
               [--mode MODE] [--config KEY=VALUE] [--out NAME] [--background] [--timeout SECONDS]
               [--allow KINDS] [--deny KINDS] [--with NAME] [--file PATH] [--error] [--cells N]
               [--mcp NAME] [--quiet] [--schema NAME] [--max-cost USD] [--no-kernel-tools]

Send the cell's body as a prompt to an ACP agent.

options:
  -h, --help            show this help message and exit
  --agent AGENT, -a AGENT
                        agent name (see %agent list) or a full command line
  --session SESSION, -s SESSION
                        session name (default: one per agent)
  --new                 start a new session for this name
  --system-prompt TEXT  instructions added to the agent's own (append) when this cell opens the
                        session, in place of c.AcpNotebook.system_prompt; "" sends none
  --mode MODE           set the session mode first
  --config KEY=VALUE    set a session config option first (repeatable)
  --out NAME            also bind the turn result to NAME
  --background, --bg    return the turn handle at once; the output keeps streaming
  --timeout SECONDS     cancel the turn after SECONDS and fail the cell
  --allow KINDS         tool kinds to allow without asking, e.g. read,search
  --deny KINDS          tool kinds to reject without asking, e.g. execute,delete
  --with NAME, -w NAME  give the agent a kernel variable as context: a DataFrame's shape, dtypes
                        and head, a figure as PNG, an exception's traceback, else its repr
                        (repeatable)
  --file PATH, -f PATH  attach a file (repeatable)
  --error               give the agent the last exception: type, message, traceback, the cell that
                        raised it
  --cells N             give the agent the N cells above (sources, short outputs) and the
                        notebook's path when known
  --mcp NAME            give the session the MCP server NAME (c.AcpNotebook.mcp_servers or
                        [mcp.NAME] in the agents file; repeatable)
  --quiet, -q           no live output; only the final record
  --schema NAME         answer as JSON matching NAME (a pydantic model or a JSON-schema dict); the
                        result's .output holds it
  --max-cost USD        cancel the turn once the cost the agent reports passes USD; the cell fails
  --no-kernel-tools     a session this cell opens gets no kernel tools (variables, cells, run
                        code); in a session that has them, they refuse every call of this turn
"""


def test_help_keeps_its_content(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert cell_parser().format_help() == HELP
    with pytest.raises(HelpShown):
        parse_cell_line("--help")
    assert capsys.readouterr().out == HELP  # printed once, not printed and then raised


def test_every_field_is_an_option_and_every_option_a_field() -> None:
    flags = {flag for f in dataclasses.fields(CellOptions) for flag in f.metadata["flags"]}
    shown = set(re.findall(r"(?<![\w-])--?[a-z][\w-]*", cell_parser().format_help()))
    assert shown - {"-h", "--help"} == flags


def test_an_empty_line_gives_the_defaults_and_fresh_lists() -> None:
    first, second = parse_cell_line(""), parse_cell_line("")
    assert first == CellOptions()
    first.files.append("x")
    assert second.files == [] and CellOptions().files == []


def test_a_full_line() -> None:
    opts = parse_cell_line(
        "-a 'my agent --acp' -s work --new --mode plan --config model=fast --config x=1 "
        "--out r --bg --timeout 2.5 --allow read,search --allow edit --deny execute "
        "-w df --with fig -f a.txt --file b.txt -q"
    )
    assert opts == CellOptions(
        agent="my agent --acp",
        session="work",
        new=True,
        mode="plan",
        config=[("model", "fast"), ("x", "1")],
        out="r",
        background=True,
        timeout=2.5,
        allow=["read", "search", "edit"],
        deny=["execute"],
        variables=["df", "fig"],
        files=["a.txt", "b.txt"],
        quiet=True,
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--nope", "unrecognized arguments: --nope"),
        ("--timeout soon", "invalid float value"),
        ("--config model", "expected KEY=VALUE"),
        ("--agent 'unclosed", "cannot parse options"),
    ],
)
def test_bad_lines_are_usage_errors(line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_cell_line(line)


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (CellOptions(out="1x"), "--out needs a Python name"),
        (CellOptions(timeout=-1), "--timeout must be a positive"),
        (CellOptions(timeout=0), "--timeout must be a positive"),
    ],
)
def test_check_refuses_what_argparse_cannot(opts: CellOptions, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        opts.check()


def test_the_docs_synopsis_names_every_option_in_order() -> None:
    # CONTRIBUTING.md's recipe "Add a %%agent option" ends with the synopsis that opens
    # docs/cells.md: an option declared here but missing there is a recipe half done.
    page = (Path(__file__).resolve().parents[2] / "docs" / "cells.md").read_text(encoding="utf-8")
    block = re.search(r"\A# `%%agent` cells\n\n```\n(%%agent .*?)```", page, re.S)
    assert block, "docs/cells.md does not open with the %%agent synopsis block"
    shown = re.findall(r"\[(--[a-z-]+)", block[1])
    declared = [f.metadata["flags"][0] for f in dataclasses.fields(CellOptions)]
    assert shown == declared, "docs/cells.md's %%agent synopsis differs from notebook/options.py"
    # And the table under it: a row per option, its first cell every flag of the option.
    rows = re.findall(r"^\| (`--.*?) \|", page, re.M)
    tabled = [re.findall(r"`(-[-\w]+)", row) for row in rows]
    flags = [list(f.metadata["flags"]) for f in dataclasses.fields(CellOptions)]
    assert tabled == flags, "docs/cells.md's table of options differs from notebook/options.py"
