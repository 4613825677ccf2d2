"""The README and the documentation site (docs/) say what the code does.

Each test reads a page and the code it describes, and fails when they part: a configuration
option, a public name or a line of the quickstart's output that the docs lack or misstate, a
link to a file that is gone. The site itself is built by `.ci/run` (`sphinx-build -W`), which
fails on a broken cross-reference or a docstring it cannot read.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from pathlib import Path

import pytest

import acp_notebook
from acp_notebook.magics import AcpNotebook
from acp_notebook.notebook.commands import USAGE
from acp_notebook.run import cli
from tests.kernel.test_run_cli import SNAPSHOT, normalise

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_the_readme_is_short_and_opens_with_what_to_run() -> None:
    readme = read(REPO / "README.md")
    lines = readme.splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move reference text to docs/"
    first_screen = "\n".join(lines[:60])
    for what in (
        "docs/turn-view.png",
        ".venv/bin/acp-notebook run notebooks/quickstart.ipynb",
        "bash .ci/run",
        "pip install jupyterlab",
        "jupyter lab notebooks/quickstart.ipynb",
    ):
        assert what in first_screen, f"README.md's first 60 lines lack {what!r}"


def test_the_readme_shows_the_quickstart_as_it_prints() -> None:
    # tests/kernel/test_run_cli.py holds the quickstart's whole output to SNAPSHOT; the README
    # shows an excerpt of it ("…" for lines left out), run from the checkout's root.
    readme = read(REPO / "README.md")
    block = re.search(r"```text\n(\[1/6\] .*?)```", readme, re.S)
    assert block, "README.md has no ```text block of the quickstart's output"
    printed = SNAPSHOT.read_text(encoding="utf-8").splitlines()
    at = 0
    for line in block[1].splitlines():
        if line.strip() == "…":
            continue
        wanted = normalise(line.replace("notebooks/quickstart.out", "quickstart.out"), REPO)
        assert wanted in printed[at:], f"not printed by the quickstart (in this order): {line}"
        at = printed.index(wanted, at) + 1


def test_the_configuration_page_names_every_option_in_order() -> None:
    page = read(DOCS / "configuration.md")
    table = page.split("## `c.AcpNotebook` options", 1)[1].split("\n## ", 1)[0]
    shown = re.findall(r"^\| `(\w+)` \|", table, re.M)
    options = AcpNotebook.class_traits(config=True)  # sorted by name: the class has the order
    declared = [name for name in vars(AcpNotebook) if name in options]
    assert shown == declared, "docs/configuration.md's table differs from AcpNotebook's options"
    for name, trait in options.items():
        default = trait.default()
        row = next(r for r in table.splitlines() if r.startswith(f"| `{name}` |"))
        assert _default_shown(default) in row, f"{name}: the default {default!r} is not shown"


def _default_shown(value: object) -> str:
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def test_the_api_reference_documents_every_public_name() -> None:
    page = read(DOCS / "api.md")
    documented = set(re.findall(r"^\.\. (?:auto\w+|py:data):: acp_notebook\.(\w+)$", page, re.M))
    public = set(acp_notebook.__all__) - {"__version__"}
    assert public - documented == set(), "docs/api.md lacks these public names"
    # Mutation, a union, has no docstring of its own: the page names its members by hand.
    members = typing.get_args(acp_notebook.Mutation)
    union = re.search(r"py:data:: acp_notebook\.Mutation\n\n(.*?)\n```", page, re.S)
    assert union, "docs/api.md does not describe acp_notebook.Mutation"
    named = re.findall(r"\b([A-Z]\w+)\b", union[1].split("``", 1)[1])
    assert named == [m.__name__ for m in members], "docs/api.md's Mutation is not the union"


def test_every_field_of_a_public_dataclass_has_a_doc_comment() -> None:
    # autodoc lists a field only with a `#:` comment above it (or a docstring below): one
    # without is left out of the API reference, silently.
    undocumented = []
    for name in acp_notebook.__all__:
        cls = getattr(acp_notebook, name)
        if not dataclasses.is_dataclass(cls):
            continue
        lines, _ = inspect.getsourcelines(cls)
        for at, line in enumerate(lines):
            field = re.match(r"    (\w+): ", line)
            if field and field[1] in {f.name for f in dataclasses.fields(cls)}:
                above = lines[at - 1].strip()
                if not above.startswith("#:"):
                    undocumented.append(f"{name}.{field[1]}")
    assert undocumented == [], "give these fields a #: comment (docs/api.md shows none)"


def test_every_relative_link_leads_to_a_file() -> None:
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "bench" / "README.md"]
    pages += sorted(DOCS.glob("*.md"))
    broken = []
    for page in pages:
        prose = re.sub(r"```.*?```|`[^`\n]*`", "", read(page), flags=re.S)  # not code
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            path = target.split("#", 1)[0]
            if not path or re.match(r"[a-z]+:", path):
                continue
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []


def test_the_command_line_page_names_every_option_in_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    usage = capsys.readouterr().out.split("\n\n", 1)[0]
    declared = [flag for flag in re.findall(r"\[(-[-\w]+)", usage) if flag != "-h"]
    page = read(DOCS / "command-line.md")
    block = re.search(r"```\n(acp-notebook run .*?)```", page, re.S)
    assert block, "docs/command-line.md has no synopsis of acp-notebook run"
    shown = re.findall(r"\[(-[-\w]+)", block[1])
    assert shown == declared, "docs/command-line.md's synopsis differs from run/cli.py"


def test_the_line_magic_page_shows_its_help() -> None:
    page = read(DOCS / "line-magic.md")
    block = re.search(r"```\n(%agent list .*?)```", page, re.S)
    assert block, "docs/line-magic.md has no list of %agent commands"
    assert block[1] == USAGE, "docs/line-magic.md's list differs from `%agent --help`"


def test_the_python_api_page_names_every_connect_option_in_order() -> None:
    page = read(DOCS / "python-api.md")
    bullet = re.search(r"^- `connect\(\)` options(.*?)(?=^- |\Z)", page, re.S | re.M)
    assert bullet, "docs/python-api.md has no bullet of connect()'s options"
    fields = [f.name for f in dataclasses.fields(acp_notebook.ClientOptions)]
    shown = [name for name in re.findall(r"`(\w+)`", bullet[1]) if name != "ClientOptions"]
    assert shown == fields, "docs/python-api.md's connect() options differ from ClientOptions"
