"""The rewrite that makes `%%agent` cells and top-level `%agent` lines awaited (rewrite.py),
through IPython's own input transformation, as the kernel runs it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from acp_notebook.notebook import rewrite


def ipython_alone() -> TransformerManager:
    """IPython's input transformation without the extension."""
    return TransformerManager()  # type: ignore[no-untyped-call]


def manager() -> TransformerManager:
    m = ipython_alone()
    shell = SimpleNamespace(
        input_transformer_manager=m, input_transformers_cleanup=m.cleanup_transforms
    )
    rewrite.install(shell)
    rewrite.install(shell)  # twice: still once
    assert m.cleanup_transforms.count(rewrite.rewrite_agent_cell) == 1
    assert m.token_transformers.count(rewrite.AwaitedAgentLine) == 1
    return m


def cell_call(line: str, body: str) -> str:
    return f"await get_ipython().run_cell_magic('agent', {line!r}, {body!r})\n"


def line_call(args: str) -> str:
    return f"await get_ipython().run_line_magic('agent', {args!r})\n"


CASES = {
    # What the regex rewriter did, unchanged.
    "%%agent\nhello\n": cell_call("", "hello\n"),
    "%%agent --agent demo -s a\nhello\n%agent list\n": cell_call(
        "--agent demo -s a", "hello\n%agent list\n"
    ),
    "%%agent": cell_call("", "\n"),  # IPython would refuse an empty body before the magic
    "\n\n%%agent -q\nhi": cell_call("-q", "hi\n"),  # IPython drops leading empty lines first
    "%agent list": line_call("list"),
    "%agent": line_call(""),
    "%agent   status -s work  \n": line_call("status -s work"),
    "x = 1\n%agent mode plan\nprint(x)\n": "x = 1\n" + line_call("mode plan") + "print(x)\n",
    "%agent close --all\n%agent list\n": line_call("close --all") + line_call("list"),
    "%agent status?\n": line_call("status?"),
    # Other magics are IPython's, whatever they start with.
    "%agents\n": "get_ipython().run_line_magic('agents', '')\n",
    "%%agents x\nbody\n": "get_ipython().run_cell_magic('agents', 'x', 'body\\n')\n",
    "%time x = 1\n%agent list\n": (
        "get_ipython().run_line_magic('time', 'x = 1')\n" + line_call("list")
    ),
    # A continued line is joined, as IPython joins it.
    "%agent config \\\nmodel=fast\n": line_call("config  model=fast"),
}

# Where the regex rewrote text that is not a magic line, the tokens leave it alone.
UNTOUCHED = [
    's = """\n%agent list\n"""\n',
    "s = '''\n%agent stop -s work\n'''\nprint(s)\n",
    "# %agent list\n",
    "f(1,\n%agent list\n)\n",
]


@pytest.mark.parametrize(("cell", "expected"), CASES.items(), ids=list(CASES))
def test_magic_lines_are_awaited(cell: str, expected: str) -> None:
    assert manager().transform_cell(cell) == expected


@pytest.mark.parametrize("cell", UNTOUCHED)
def test_agent_in_a_string_comment_or_bracket_is_untouched(cell: str) -> None:
    transformed = manager().transform_cell(cell)
    assert transformed == ipython_alone().transform_cell(cell)  # what IPython alone does
    assert "run_line_magic" not in transformed


def test_an_indented_agent_line_is_left_to_ipython_as_before() -> None:
    # `await` inside a def would be a SyntaxError; the rewriter never touched indented lines.
    cell = "def f():\n    %agent list\n"
    assert manager().transform_cell(cell) == ipython_alone().transform_cell(cell)


def test_help_on_the_magic_is_still_help() -> None:
    assert manager().transform_cell("%agent?\n") == ipython_alone().transform_cell("%agent?\n")


def test_uninstall_removes_both() -> None:
    m = manager()
    rewrite.uninstall(
        SimpleNamespace(
            input_transformer_manager=m, input_transformers_cleanup=m.cleanup_transforms
        )
    )
    assert rewrite.rewrite_agent_cell not in m.cleanup_transforms
    assert rewrite.AwaitedAgentLine not in m.token_transformers
    assert m.transform_cell("%agent list\n") == "get_ipython().run_line_magic('agent', 'list')\n"
