"""Imports of the user-facing layer point down: no module of `notebook/`, `widgets/`, `magics.py`,
`errors.py`, `config.py` or the package root sits in an import cycle, counting imports inside
functions and under `TYPE_CHECKING`; nothing imports `magics.py` (it is the top)."""

from __future__ import annotations

import ast
from pathlib import Path

import acp_notebook

ROOT = Path(acp_notebook.__file__).parent
SURFACE = (
    "acp_notebook.notebook",
    "acp_notebook.widgets",
    "acp_notebook.magics",
    "acp_notebook.errors",
    "acp_notebook.config",
    "acp_notebook._version",
)


def _modules() -> dict[str, Path]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module of the package that `name` imports anywhere. `from X import y` needs the
    module X.y when there is one, else X itself (`from .. import __version__` needs the root);
    importing a.b.c also runs the packages a and a.b, unless they hold `name` (already run)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{up}.{node.module}" if node.module else up
            for alias in node.names:
                module = f"{base}.{alias.name}"
                targets.add(module if module in modules else base)
        elif isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
    found: set[str] = set()
    for target in targets & set(modules):
        pieces = target.split(".")
        found.add(target)
        found |= {
            p
            for p in (".".join(pieces[:i]) for i in range(1, len(pieces)))
            if not name.startswith(p + ".")
        }
    return found - {name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += graph[name]
    return seen


def test_no_module_of_the_surface_is_in_an_import_cycle() -> None:
    graph = _graph()
    assert {"acp_notebook.magics", "acp_notebook.notebook.options"} <= set(graph)
    cycles = sorted(
        name
        for name in graph
        if name.startswith(SURFACE) or name == "acp_notebook"
        if name in _reaches(graph, name)
    )
    assert cycles == []


def test_nothing_imports_magics() -> None:
    graph = _graph()
    users = sorted(
        n
        for n, targets in graph.items()
        if "acp_notebook.magics" in targets and n != "acp_notebook"
    )
    assert users == []  # the package root loads it lazily, for %load_ext


def test_errors_and_version_import_nothing_of_the_package() -> None:
    graph = _graph()
    assert graph["acp_notebook.errors"] == graph["acp_notebook._version"] == set()
