"""What an `%%agent` cell is (protocol/agent_cell.py): the one check the kernel tools, the
runner and the replay share, against the edge cases where they used to differ."""

from __future__ import annotations

import pytest

from acp_notebook.protocol.agent_cell import is_agent_source, split_agent_source


@pytest.mark.parametrize(
    ("source", "line", "body"),
    [
        ("%%agent", "", ""),
        ("%%agent\nfix it", "", "fix it"),
        ("%%agent --agent demo\nfix it\nnow", "--agent demo", "fix it\nnow"),
        ("%%agent\t--quiet\nhi", "--quiet", "hi"),
        ("\n\n  \n%%agent\nhi", "", "hi"),  # leading blank lines: IPython drops them
        ("    %%agent -q\nhi", "-q", "hi"),  # indented: IPython removes the indentation
        ("%%agent\r\nhi\r\n", "", "hi\r\n"),  # Windows line ends
        ("%%agent --agent demo\r\nhi", "--agent demo", "hi"),
    ],
)
def test_agent_cells(source: str, line: str, body: str) -> None:
    assert is_agent_source(source)
    assert split_agent_source(source) == (line, body)


@pytest.mark.parametrize(
    "source",
    [
        "",
        "\n  \n",
        "%%agentx\nhi",  # another magic
        "%%agents",
        "%%agent?",  # IPython's help of the magic
        "%%agent-x hi",
        "# a comment first\n%%agent\nhi",  # plain Python: the magic is not on the first line
        "x = 1\n%%agent",
        "%agent status",  # the line magic
        "%%Agent\nhi",
        "print('%%agent')",
    ],
)
def test_not_agent_cells(source: str) -> None:
    assert not is_agent_source(source)
    assert split_agent_source(source) is None
