"""Make `%%agent` cells and top-level `%agent` lines awaited, with IPython's own input machinery.

Cells run on the kernel's event loop, and a magic is a plain call: a coroutine it returns is not
run. IPython turns `%%agent` and `%agent` into `get_ipython().run_cell_magic(...)` and
`run_line_magic(...)` calls; these rewrites put `await` in front, so the cell awaits the turn:
every streamed display update lands in that cell, Run All waits for it, its value becomes
`Out[n]`, and widget clicks (Stop, permissions) are handled meanwhile (ipykernel >= 7.4).

- A cell magic is the cell's first line, so `rewrite_agent_cell` is a cleanup transform that
  looks at that line only, as IPython's own `cell_magic` does (and runs just before it).
- A line magic is found in the cell's *tokens*, as IPython's `EscapedCommand` finds it: a
  logical line whose first token is `%`. So `%agent` inside a string, a comment or a bracket is
  left alone. `AwaitedAgentLine` is a token transformer that wins over IPython's own at the same
  place (a lower priority number) for `%agent` lines at column 0; an indented one (in a
  `def`, where `await` is invalid) is left to IPython, as it always was.
"""

from __future__ import annotations

import tokenize
from typing import Any

from IPython.core.inputtransformer2 import (
    TokenTransformBase,
    assemble_continued_line,
    find_end_of_continued_line,
)

from ..protocol.agent_cell import split_agent_source

MAGIC = "agent"


def _is_agent_line(text: str) -> bool:
    """`text` starts with "%agent", then whitespace or nothing (not `%agents`), as a cell's
    first line starts with "%%agent" (`protocol/agent_cell.py`)."""
    prefix = "%" + MAGIC
    return text.startswith(prefix) and text[len(prefix) : len(prefix) + 1] in (
        "",
        " ",
        "\t",
        "\n",
        "\r",
    )


def rewrite_agent_cell(lines: list[str]) -> list[str]:
    """A `%%agent` cell becomes one awaited `run_cell_magic` call (a cleanup transform)."""
    # IPython dropped the leading blank lines and indentation: the first line is the magic's.
    agent = split_agent_source(lines[0]) if lines else None
    if agent is None:
        return lines
    line = agent[0]
    # IPython refuses an empty body before the magic runs ("the cell body is empty"): pass a
    # newline so the magic answers itself (`--help` prints the help, no prompt is our error).
    body = "".join(lines[1:]) or "\n"
    return [f"await get_ipython().run_cell_magic({MAGIC!r}, {line!r}, {body!r})\n"]


class AwaitedAgentLine(TokenTransformBase):
    """A top-level `%agent ...` line becomes an awaited `run_line_magic` call."""

    # Below EscapedCommand's 10 and HelpEnd's 5: at the same place, this one is applied, so
    # `%agent status?` stays a subcommand's argument, as it always was. `%agent?` is not an
    # `%agent` line (no space after the name): it still shows the magic's help.
    priority = 4

    @classmethod
    def find(cls, tokens_by_line: list[list[tokenize.TokenInfo]]) -> AwaitedAgentLine | None:
        for line in tokens_by_line:
            tokens = [t for t in line if t.type not in (tokenize.INDENT, tokenize.DEDENT)]
            if len(tokens) < 2:
                continue
            escape, name = tokens[0], tokens[1]
            if (
                escape.string == "%"
                and escape.start[1] == 0
                and name.string == MAGIC
                and name.start == escape.end
                and _is_agent_line(escape.line)
            ):
                return cls(escape.start)
        return None

    def transform(self, lines: list[str]) -> list[str]:
        # Continued lines (a trailing backslash) are joined as IPython joins them.
        end = find_end_of_continued_line(lines, self.start_line)
        line: str = assemble_continued_line(lines, (self.start_line, 0), end)
        rest = line[len("%" + MAGIC) :].strip()
        call = f"await get_ipython().run_line_magic({MAGIC!r}, {rest!r})\n"
        return [*lines[: self.start_line], call, *lines[end + 1 :]]


def install(shell: Any) -> None:
    """Add both rewrites to the shell's input transformation (once)."""
    if rewrite_agent_cell not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(rewrite_agent_cell)
    tokens = shell.input_transformer_manager.token_transformers
    if AwaitedAgentLine not in tokens:
        tokens.append(AwaitedAgentLine)


def uninstall(shell: Any) -> None:
    if rewrite_agent_cell in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(rewrite_agent_cell)
    tokens = shell.input_transformer_manager.token_transformers
    if AwaitedAgentLine in tokens:
        tokens.remove(AwaitedAgentLine)
