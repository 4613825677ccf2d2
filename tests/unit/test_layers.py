"""The rules that keep the package's design true, checked by reading its source with `ast`.

The checks import nothing of `acp_notebook`: each parses the files, so a module that fails to
import still gets its imports checked, and they run in a fraction of a second.

The rules (CONTRIBUTING.md explains them to a newcomer):

1. No import cycles among `acp_notebook` modules. Every import counts, including the ones under
   `if TYPE_CHECKING:` and inside functions: a cycle that only type checkers see still ties
   the two modules together for whoever has to change one of them. `from . import x`, where
   `x` is a submodule, is an edge to that submodule; `from . import name` where `name` is not
   a submodule is an edge to the package's `__init__`. Importing a submodule is not counted
   as an edge to its parent packages (Python runs their `__init__` first, but that is the
   package's business, and a package `__init__` importing its own submodules would
   otherwise always look like a cycle).
2. Imports point down the layers of `LAYERS` below (every import counts, as in rule 1), and
   the pure layers import none of the third-party packages in `FORBIDDEN_THIRD_PARTY`.
3. No module over `MAX_MODULE_LINES` lines. No function over `MAX_FUNCTION_LINES` lines
   (from its `def` line to its last line) unless its docstring has a line starting with
   `Long because`, followed by the reason, e.g. "Long because it is one flat table of
   handlers; splitting it would hide which message goes where."
4. No module reads or writes another object's private attribute, or imports another
   module's private name (`from .magics import _parse`; a private submodule such as
   `_version` is fine). `x._name` is allowed only when `x` is `self`, `cls`, `super()`,
   `type(self)`, or a class defined in the same module (`SessionFold._plan` in the module's
   table of `SessionFold` methods). Not `self._a._b` either: that reads the private attribute
   of whatever `self._a` is; nor `other._key` in `__eq__`, whose `other` may be anything
   (compare a public key, or let a dataclass do it). `getattr`, `setattr`, `hasattr` and
   `delattr` with a literal `"_name"` count the same. Privacy in Python is a convention
   between the authors of one class; what another module needs must become public and
   documented. A few names in `PUBLIC_UNDERSCORE` begin with an underscore but are
   documented public API (`namedtuple._replace`, `os._exit`).

5. No ACP method name written as a string: the client uses `protocol/methods.py`'s constants,
   taken from the SDK's tables; the stdlib-only demo agent uses `demo_agent/methods.py`'s,
   which a test keeps equal to them. A namespaced name (`"session/prompt"`,
   `"$/cancel_request"`) is an offender anywhere; a one-word one (`"initialize"`, `"logout"`)
   only where it is the method of a call (`x.request("logout", ...)`) or compared with a
   `method`, since the same words are also capability keys and subcommands.

Each rule is one test over the real package, and each has a unit test that runs its checker
on a small synthetic package in `tmp_path`, to show that it can fail.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "acp_notebook"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
LONG_REASON = "Long because"

# Layer of each module, by the longest prefix of its dotted name (relative to the package;
# "" is the package root `__init__`) found here. A module matching none fails the layer test.
LAYER_OF: dict[str, str] = {
    "": "root",
    "errors": "base",
    "_version": "base",
    "protocol": "protocol",
    "client": "client",
    "config": "client",
    "render": "render",
    "display": "display",
    "widgets": "widgets",
    "chat": "widgets",  # the chat widget, a subsystem of the widgets tier
    "notebook": "notebook",
    "magics": "magics",
    "demo_agent": "demo_agent",
    "run": "run",
    # The kernel's tools are a folder of the notebook tier; their relay is a separate program.
    "kernel_tools": "notebook",
    "kernel_tools.relay": "kernel_relay",
    # Loaded by Jupyter Server, in its process: nothing of the package (stdlib only).
    "server_extension": "server",
}

# The layers each layer may import (itself always included). `base` (errors, the version)
# is importable from anywhere. `display` (publishing, masking, the live view) sits below both
# `widgets` and `notebook`, which never import each other: the `%%agent` flow gets the widget
# views from `magics` (the thin entry point above both, which only the root imports) as the
# `notebook.host.Widgets` protocol it owns. The root `__init__` re-exports from every layer,
# lazily for the client. The demo agent is a separate program: stdlib only, nothing of the package.
BELOW_THE_TOP = {"base", "protocol", "client", "render", "display"}
LAYERS: dict[str, set[str]] = {
    "base": {"base"},
    "protocol": {"base", "protocol"},
    "client": {"base", "protocol", "client"},
    "render": {"base", "protocol", "render"},
    "display": {"base", "protocol", "client", "render", "display"},
    "widgets": {*BELOW_THE_TOP, "widgets"},
    # The kernel server takes the handshake's constants from the relay (stdlib-only, so cheap).
    "notebook": {*BELOW_THE_TOP, "notebook", "kernel_relay"},
    "magics": {*BELOW_THE_TOP, "widgets", "notebook", "magics"},
    "root": {*BELOW_THE_TOP, "widgets", "notebook", "magics", "root"},
    "demo_agent": {"demo_agent"},
    "run": {"base", "protocol", "client", "render", "run"},
    "kernel_relay": {"kernel_relay"},
    "server": {"server"},
}

# Third-party packages a pure layer must not import (checked on the top-level name).
UI = {"IPython", "ipywidgets", "ipykernel", "traitlets", "nbformat", "nbclient"}
WIDGET_TOOLKITS = {"ipywidgets", "anywidget"}
FORBIDDEN_THIRD_PARTY: dict[str, set[str]] = {
    "protocol": {"anyio", *UI},
    "render": {"anyio", *UI},
    "client": UI,
    "base": {"anyio", *UI},
    # The widget toolkits are the widget layer's: the others ask it (`widgets/targets.py`).
    "display": WIDGET_TOOLKITS,
    "notebook": WIDGET_TOOLKITS,
    "magics": WIDGET_TOOLKITS,
}
# The demo agent must start in tens of milliseconds: the standard library only.
# So must the kernel relay, and the packages `python -m` runs before it (their `__init__`).
STDLIB_ONLY = {"demo_agent", "kernel_relay", "server"}

PUBLIC_UNDERSCORE = {"_replace", "_asdict", "_fields", "_field_defaults", "_make", "_exit"}


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. "acp_notebook.client.session"
    path: Path
    is_package: bool
    tree: ast.Module

    def where(self, line: int) -> str:
        depth = self.name.count(".") + self.is_package  # how far up the root of the tree is
        return f"{self.path.relative_to(self.path.parents[depth]).as_posix()}:{line}"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str  # a module of the package, or a top-level third-party/stdlib name
    line: int
    internal: bool


def load_package(root: Path, package: str) -> dict[str, Module]:
    """Every module of `package`, which lives in `root / package`, parsed."""
    modules: dict[str, Module] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        stat = path.stat()
        tree = _parsed(path, stat.st_mtime_ns, stat.st_size)
        modules[".".join(parts)] = Module(".".join(parts), path, is_package, tree)
    return modules


@functools.cache
def _parsed(path: Path, _mtime_ns: int, _size: int) -> ast.Module:
    """A module's tree, parsed once a test process while the file is unchanged (nine checks
    here and in test_errors.py read the whole package: 0.8 s of CPU a reading). Read only."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _resolve(module: Module, level: int, name: str | None) -> str:
    """The absolute dotted name of a relative import's base."""
    if level == 0:
        return name or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports(module: Module, modules: dict[str, Module], package: str) -> Iterator[Edge]:
    """Every import of `module`, wherever it appears (TYPE_CHECKING and functions included)."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield _edge(module, alias.name, node.lineno, modules, package)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if sub in modules else base
                yield _edge(module, target, node.lineno, modules, package)


def _edge(module: Module, target: str, line: int, modules: dict[str, Module], package: str) -> Edge:
    if target == package or target.startswith(package + "."):
        # `import pkg.a.b` where b is a name, not a module: fall back to the longest module.
        while target not in modules and "." in target:
            target = target.rsplit(".", 1)[0]
        return Edge(module.name, target, line, True)
    return Edge(module.name, target.split(".")[0], line, False)


def import_graph(modules: dict[str, Module], package: str) -> dict[str, list[Edge]]:
    """Each module's imports of other modules of the package, one edge per line and target."""
    return {
        name: sorted(
            {e for e in imports(m, modules, package) if e.internal and e.target != name},
            key=lambda e: (e.line, e.target),
        )
        for name, m in modules.items()
    }


def strongly_connected(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """Tarjan's algorithm; the components with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for edge in graph.get(node, []):
            if edge.target not in index:
                visit(edge.target)
                low[node] = min(low[node], low[edge.target])
            elif edge.target in on_stack:
                low[node] = min(low[node], index[edge.target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def cycle_offenders(root: Path, package: str) -> list[str]:
    modules = load_package(root, package)
    graph = import_graph(modules, package)
    offenders = []
    for component in strongly_connected(graph):
        members = set(component)
        lines = [
            f"{modules[e.source].where(e.line)}: {e.source} -> {e.target}"
            for name in component
            for e in graph[name]
            if e.target in members
        ]
        lines = by_place(lines)
        offenders.append(
            f"import cycle among {len(component)} modules: {', '.join(component)}\n"
            + "\n".join("    " + line for line in lines)
        )
    return offenders  # in the order of strongly_connected(), which sorts them


def layer_of(name: str, package: str, table: dict[str, str]) -> str | None:
    relative = name[len(package) + 1 :] if name != package else ""
    for prefix in sorted(table, key=len, reverse=True):
        if relative == prefix or (prefix and relative.startswith(prefix + ".")):
            return table[prefix]
    return None


def layer_offenders(
    root: Path,
    package: str,
    table: dict[str, str] = LAYER_OF,
    allowed: dict[str, set[str]] = LAYERS,
    forbidden: dict[str, set[str]] = FORBIDDEN_THIRD_PARTY,
    stdlib_only: set[str] = STDLIB_ONLY,
) -> list[str]:
    modules = load_package(root, package)
    offenders = []
    for name, module in modules.items():
        layer = layer_of(name, package, table)
        if layer is None:
            offenders.append(
                f"{module.where(1)}: {name} belongs to no layer: add its prefix to LAYER_OF "
                "in tests/unit/test_layers.py and to the table in CONTRIBUTING.md"
            )
            continue
        for edge in imports(module, modules, package):
            if edge.internal:
                target_layer = layer_of(edge.target, package, table)
                if target_layer not in allowed[layer] | {layer}:
                    offenders.append(
                        f"{module.where(edge.line)}: {name} ({layer}) imports {edge.target} "
                        f"({target_layer}); {layer} may import only "
                        f"{', '.join(sorted(allowed[layer]))}: move the shared code down a "
                        "layer, or pass it in from above"
                    )
            elif edge.target in forbidden.get(layer, set()):
                offenders.append(
                    f"{module.where(edge.line)}: {name} ({layer}) imports {edge.target}, "
                    f"which the {layer} layer must not: keep the I/O or UI in a layer above"
                )
            elif layer in stdlib_only and edge.target not in sys.stdlib_module_names:
                offenders.append(
                    f"{module.where(edge.line)}: {name} ({layer}) imports {edge.target}, "
                    "not in the standard library: the demo agent must start in tens of ms"
                )
    offenders += _parents_of_programs(modules, package, table, stdlib_only)
    return by_place(offenders)


def _parents_of_programs(
    modules: dict[str, Module], package: str, table: dict[str, str], stdlib_only: set[str]
) -> list[str]:
    """A stdlib-only program's parent packages below the root import nothing (`python -m` runs
    their `__init__` first: one import there would load it into the program)."""
    offenders = []
    for name in modules:
        if layer_of(name, package, table) not in stdlib_only:
            continue
        parts = name.split(".")
        for depth in range(2, len(parts)):
            parent = modules.get(".".join(parts[:depth]))
            if parent is None or layer_of(parent.name, package, table) in stdlib_only:
                continue
            for edge in imports(parent, modules, package):
                if edge.target != "__future__":
                    offenders.append(
                        f"{parent.where(edge.line)}: {parent.name} imports {edge.target}, and "
                        f"`python -m {name}` runs it first: keep this __init__ import-free"
                    )
    return offenders


def _docstring_gives_reason(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    doc = ast.get_docstring(node) or ""
    return any(line.strip().startswith(LONG_REASON) for line in doc.splitlines())


def size_offenders(
    root: Path,
    package: str,
    max_module: int = MAX_MODULE_LINES,
    max_function: int = MAX_FUNCTION_LINES,
) -> list[str]:
    offenders = []
    for module in load_package(root, package).values():
        count = len(module.path.read_text(encoding="utf-8").splitlines())
        if count > max_module:
            offenders.append(
                f"{module.where(1)}: {count} lines (max {max_module}): split it into "
                "modules that each have one job"
            )
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            if length > max_function and not _docstring_gives_reason(node):
                offenders.append(
                    f"{module.where(node.lineno)}: {node.name}() is {length} lines "
                    f"(max {max_function}): split it, or give the reason in its docstring "
                    f"on a line starting '{LONG_REASON}'"
                )
    return by_place(offenders)


def _is_own(value: ast.expr) -> bool:
    """`self`, `cls`, `super()`, `type(self)`: the object whose class is being written."""
    if isinstance(value, ast.Name):
        return value.id in {"self", "cls"}
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        if value.func.id == "super":
            return True
        if value.func.id == "type" and len(value.args) == 1:
            return _is_own(value.args[0])
    return False


def _module_classes(tree: ast.Module) -> set[str]:
    """The names of the classes a module defines at its top level."""
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef)}


_REFLECTION = {"getattr", "setattr", "hasattr", "delattr"}


def _private_uses(
    tree: ast.Module,
) -> Iterator[tuple[ast.Attribute | ast.Call, ast.expr, str, str]]:
    """Every `x._name` and `getattr(x, "_name")`: (node, x, _name, how it is used)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            verb = "writes" if isinstance(node.ctx, ast.Store | ast.Del) else "reads"
            yield node, node.value, node.attr, verb
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _REFLECTION
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            verb = "writes" if node.func.id in {"setattr", "delattr"} else "reads"
            yield node, node.args[0], node.args[1].value, verb


def _private_imports(module: Module, modules: dict[str, Module], package: str) -> Iterator[str]:
    """`from .x import _name` of a name (not a submodule) of another module of the package."""
    for node in ast.walk(module.tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = _resolve(module, node.level, node.module)
        if base != package and not base.startswith(package + "."):
            continue
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and f"{base}.{alias.name}" not in modules:
                yield (
                    f"{module.where(node.lineno)}: {module.name} imports {base}.{alias.name}, "
                    "another module's private name: make it public (and documented) there"
                )


def private_offenders(root: Path, package: str) -> list[str]:
    offenders = []
    modules = load_package(root, package)
    for name, module in modules.items():
        offenders.extend(_private_imports(module, modules, package))
        classes = _module_classes(module.tree)
        for node, value, attr, verb in _private_uses(module.tree):
            if not attr.startswith("_") or (attr.startswith("__") and attr.endswith("__")):
                continue
            if _is_own(value) or attr in PUBLIC_UNDERSCORE:
                continue
            if isinstance(value, ast.Name) and value.id in classes:
                continue  # a class of this module, e.g. its table of its own methods
            shown = f"{ast.unparse(value)}.{attr}"
            if isinstance(node, ast.Call):
                assert isinstance(node.func, ast.Name)
                shown += f", through {node.func.id}()"
            offenders.append(
                f"{module.where(node.lineno)}: {name} {verb} {shown}, another "
                "object's private attribute: make what it needs public (and documented) "
                "on that object's class"
            )
    return by_place(offenders)


#: Calls whose first argument is a wire method name.
SENDERS = {"request", "notify", "ask", "encode_request", "encode_notification"}
#: The two modules that spell the names out.
METHOD_TABLES = {"protocol.methods", "demo_agent.methods"}


def _wire_name_sites(tree: ast.Module) -> Iterator[ast.Constant]:
    """Constants in the places where a one-word name can only mean a method."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in SENDERS:
                yield node.args[0]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any("method" in ast.unparse(side).lower() for side in sides):
                yield from (side for side in sides if isinstance(side, ast.Constant))


def wire_name_offenders(root: Path, package: str, names: set[str]) -> list[str]:
    offenders = []
    for name, module in load_package(root, package).items():
        if name.removeprefix(package + ".") in METHOD_TABLES:
            continue
        namespaced = {
            node
            for node in ast.walk(module.tree)
            if isinstance(node, ast.Constant) and node.value in names and "/" in node.value
        }
        placed = {n for n in _wire_name_sites(module.tree) if n.value in names}
        for node in namespaced | placed:
            offenders.append(
                f"{module.where(node.lineno)}: {name} writes the method name {node.value!r}: "
                "use its constant from protocol/methods.py (demo_agent/methods.py in the "
                "demo agent)"
            )
    return by_place(offenders)


def by_place(offenders: list[str]) -> list[str]:
    """Sorted by file, then line number (not as text: line 9 comes before line 10)."""

    def key(offender: str) -> tuple[str, int]:
        path, line, _ = offender.split(":", 2)
        return path, int(line) if line.isdigit() else 0

    return sorted(dict.fromkeys(offenders), key=key)


def _report(offenders: list[str], rule: str) -> str:
    return f"{len(offenders)} {rule}:\n" + "\n".join(offenders)


# -- the rules, on the real package -------------------------------------------------------------


# What is allowed, permanently: another library's private attribute that it offers no public
# way around. Keyed by "file: expression"; the value says why.
FOREIGN_PRIVATE: dict[str, str] = {
    "acp_notebook/magics.py: shell._last_traceback": (
        "ipykernel reads it for the reply of a cell and resets it only in run_cell(); a "
        "UsageError in a magic otherwise sends an older cell's traceback or none"
    ),
    "acp_notebook/magics.py: shell._last_traceback_during_displayhook": "the same, its twin",
    "acp_notebook/widgets/targets.py: Widget._control_comm": (
        "ipywidgets opens it when a widget front-end connects and offers no public way to "
        "ask whether one did; read only, never written"
    ),
}

# Debt: offenders that the redesign of issue 8 has not removed yet, by a key without line
# numbers or sizes. The list may only shrink: a new offender fails its test, and so does an
# entry here that no longer offends (delete it, so it cannot come back unnoticed).
KNOWN_DEBT: dict[str, set[str]] = {
    "cycles": set(),
    "sizes": set(),
    "layers": set(),
    "private": set(),
}


def debt_key(rule: str, offender: str) -> str:
    """The offender without its line numbers and sizes, so a debt entry survives edits."""
    first = offender.splitlines()[0]
    if rule == "cycles":
        return first.split(": ", 1)[1]
    if rule == "sizes":
        m = re.match(r"(\S+?):\d+: (?:(\w+)\(\) is|\d+ lines)", first)
        assert m, first
        return m[1] if m[2] is None else f"{m[1]}: {m[2]}"
    m = re.match(r"(\S+?):\d+: \S+ (?:reads|writes|imports) (\S+?)[,:]", first)
    return f"{m[1]}: {m[2]}" if m else first


def check_against_debt(rule: str, offenders: list[str], what: str) -> None:
    keys = {debt_key(rule, o): o for o in offenders}
    allowed = KNOWN_DEBT[rule] | (set(FOREIGN_PRIVATE) if rule == "private" else set())
    new = [o for k, o in keys.items() if k not in allowed]
    assert not new, _report(new, what)
    paid = sorted(KNOWN_DEBT[rule] - set(keys))
    assert not paid, (
        f"fixed, so delete from KNOWN_DEBT[{rule!r}] in tests/unit/test_layers.py: "
        + "; ".join(paid)
    )


def test_no_import_cycles() -> None:
    check_against_debt(
        "cycles",
        cycle_offenders(REPO, PACKAGE),
        "import cycle(s), TYPE_CHECKING imports included; break each by moving what both "
        "sides need into a lower module, or by passing it in",
    )


def test_imports_point_down_the_layers() -> None:
    check_against_debt(
        "layers", layer_offenders(REPO, PACKAGE), "import(s) against the layers (see LAYERS)"
    )


def test_modules_and_functions_are_short() -> None:
    check_against_debt("sizes", size_offenders(REPO, PACKAGE), "module(s) or function(s) too long")


def test_no_private_attribute_of_another_object() -> None:
    check_against_debt(
        "private",
        private_offenders(REPO, PACKAGE),
        "access(es) to another object's private attribute",
    )


def test_debt_keys_are_read_from_each_kind_of_offender() -> None:
    assert debt_key("sizes", "a/b.py:1: 651 lines (max 600): split") == "a/b.py"
    assert debt_key("sizes", "a/b.py:9: run() is 63 lines (max 60): x") == "a/b.py: run"
    assert debt_key("private", "a/m.py:3: a.m writes s._t, another object's") == "a/m.py: s._t"
    assert debt_key("cycles", "import cycle among 2 modules: a, b\n  x") == "a, b"


def test_demo_agent_method_names_match_the_sdk() -> None:
    # The demo agent spells out its method names to stay stdlib-only (rule 2); this keeps
    # them equal to the SDK-derived constants, so a renamed method is caught here.
    from acp_notebook.demo_agent import methods as demo
    from acp_notebook.protocol import methods as sdk

    names = [n for n in vars(demo) if n.isupper()]
    assert names
    wrong = {n: (getattr(demo, n), getattr(sdk, n, None)) for n in names}
    wrong = {n: pair for n, pair in wrong.items() if pair[0] != pair[1]}
    assert not wrong, (
        f"acp_notebook/demo_agent/methods.py differs from protocol/methods.py: {wrong}"
    )


def test_wire_method_names_come_from_the_sdk_tables() -> None:
    from acp_notebook.protocol import methods

    names = {*methods.AGENT_METHODS.values(), *methods.CLIENT_METHODS.values()}
    names.add(methods.CANCEL_REQUEST)
    assert {"session/prompt", "initialize", "$/cancel_request"} <= names
    offenders = wire_name_offenders(REPO, PACKAGE, names)
    assert not offenders, _report(offenders, "method name(s) written as strings")


def test_py_typed_is_shipped() -> None:
    # PEP 561: without this marker, mypy ignores the package's annotations in a user's code.
    assert (REPO / PACKAGE / "py.typed").is_file(), "add an empty acp_notebook/py.typed"


# -- each checker can fail ----------------------------------------------------------------------


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_cycle_checker_finds_type_checking_and_submodule_cycles(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from . import a\n",  # a package importing its own submodule
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from .sub import b\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "from .. import a\n",  # an edge to the submodule a
            "pkg/c.py": "from . import version\n",  # a name of the package __init__
            "pkg/d.py": "def f():\n    from .c import version\n",
        },
    )
    found = cycle_offenders(tmp_path, "pkg")
    assert len(found) == 1, found
    assert "pkg.a, pkg.sub.b" in found[0]
    assert "pkg/a.py:3: pkg.a -> pkg.sub.b" in found[0]
    assert "pkg/sub/b.py:1: pkg.sub.b -> pkg.a" in found[0]
    # `from . import version` in a submodule is an edge to pkg/__init__: with the root's
    # import of c, that closes a second cycle.
    (tmp_path / "pkg/__init__.py").write_text("from . import a, c\n", encoding="utf-8")
    found = cycle_offenders(tmp_path, "pkg")
    assert len(found) == 2, found
    assert "pkg, pkg.c" in found[0]


def test_cycle_checker_passes_a_clean_tree(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import x\nfrom . import b\n",
            "pkg/a.py": "x = 1\n",
            "pkg/b.py": "import pkg.a\nfrom .a import x\n",
        },
    )
    assert cycle_offenders(tmp_path, "pkg") == []


def test_layer_checker_finds_upward_and_third_party_imports(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/errors.py": "",
            "pkg/protocol/__init__.py": "import anyio\n",
            "pkg/protocol/p.py": "from ..errors import E\nfrom ..client import c\n",
            "pkg/client/__init__.py": "",
            "pkg/client/c.py": "import anyio\nfrom ..protocol import p\n",
            "pkg/render/r.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from ..client.c import C\n",
            "pkg/demo_agent/__init__.py": "import json\nimport pydantic\n",
            "pkg/stray.py": "",
        },
    )
    found = layer_offenders(tmp_path, "pkg")
    text = "\n".join(found)
    assert len(found) == 5, text
    assert "pkg/protocol/__init__.py:1: pkg.protocol (protocol) imports anyio" in text
    assert "pkg/protocol/p.py:2: pkg.protocol.p (protocol) imports pkg.client.c (client)" in text
    assert "pkg/render/r.py:3: pkg.render.r (render) imports pkg.client.c (client)" in text
    assert "pkg/demo_agent/__init__.py:2: pkg.demo_agent (demo_agent) imports pydantic" in text
    assert "pkg.stray belongs to no layer" in text


def test_layer_checker_keeps_widgets_and_notebook_apart(tmp_path: Path) -> None:
    """A widget importing the notebook layer, or the notebook importing a widget (even inside a
    function, the way a lazy import would), fails; both importing the display layer does not."""
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/display/__init__.py": "",
            "pkg/display/publish.py": "from ..render import r\n",
            "pkg/render/r.py": "",
            "pkg/widgets/view.py": "from ..display import publish\nfrom ..notebook import cell\n",
            "pkg/notebook/cell.py": "from ..display.publish import x\n"
            "def f():\n    from ..widgets.view import View\n",
            "pkg/magics.py": "from .notebook import cell\nfrom .widgets import view\n"
            "import ipywidgets\n",
        },
    )
    found = layer_offenders(tmp_path, "pkg")
    text = "\n".join(found)
    assert len(found) == 3, text
    assert "pkg/widgets/view.py:2: pkg.widgets.view (widgets) imports pkg.notebook.cell" in text
    assert "pkg/notebook/cell.py:3: pkg.notebook.cell (notebook) imports pkg.widgets.view" in text
    assert "pkg/magics.py:3: pkg.magics (magics) imports ipywidgets" in text


def test_layer_checker_finds_imports_in_the_packages_above_a_stdlib_program(
    tmp_path: Path,
) -> None:
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "import anyio\n",  # the root: not run by the check
            "pkg/kernel_tools/__init__.py": "from __future__ import annotations\nimport json\n",
            "pkg/kernel_tools/relay.py": "import socket\n",
            "pkg/kernel_tools/server.py": "import anyio\nfrom . import relay\n",
        },
    )
    table = {"": "root", "kernel_tools": "notebook", "kernel_tools.relay": "kernel_relay"}
    allowed = {"root": {"root", "notebook"}, "notebook": {"kernel_relay"}, "kernel_relay": set()}
    found = layer_offenders(tmp_path, "pkg", table, allowed, {}, {"kernel_relay"})
    assert found == [
        "pkg/kernel_tools/__init__.py:2: pkg.kernel_tools imports json, and "
        "`python -m pkg.kernel_tools.relay` runs it first: keep this __init__ import-free"
    ]


def test_size_checker_finds_long_modules_and_functions(tmp_path: Path) -> None:
    body = "    x = 1\n" * 60
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "x = 1\n" * 601,
            "pkg/a.py": f"def long():\n{body}\n"
            f'def excused():\n    """Does x.\n\n    Long because it is a table.\n    """\n{body}'
            f"class K:\n    async def method(self):\n{body.replace('    ', '        ')}",
            "pkg/b.py": f"def ok():\n{body[:-10]}",  # exactly 60 lines
        },
    )
    found = size_offenders(tmp_path, "pkg")
    text = "\n".join(found)
    assert len(found) == 3, text
    assert "pkg/__init__.py:1: 601 lines" in text
    assert "pkg/a.py:1: long() is 61 lines" in text
    assert "method() is 61 lines" in text


def test_private_checker_finds_reads_and_writes(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "import os\nfrom . import b\n"
            "class A:\n"
            "    def __init__(self, other):\n"
            "        self._mine = 1\n"
            "        other._theirs = 2\n"  # writes another object's private attribute
            "        self._helper = b.B()\n"
            "        print(self._helper._inner)\n"  # self._a._b: still another object's
            "        b._private()\n"  # a private function of another module
            "    def __eq__(self, other):\n"
            "        return self._mine == other._mine\n"  # `other` may be anything
            "    def f(self):\n"
            "        super()._g(); type(self)._h; self.__dict__\n"
            "        os._exit(0)\n"
            "        return self._replace(x=1)\n"
            "    def g(self, other):\n"
            "        _local = 1\n"
            "        return other._local\n"  # a local variable is not an attribute
            "    def h(self, other):\n"
            "        getattr(self, '_mine'); setattr(self, '_mine', 2); getattr(other, 'x')\n"
            "        return getattr(other, '_mine', None), hasattr(b.B, '_inner')\n"
            "TABLE = {'f': A._g}\n",  # a class of this module: its own table
            "pkg/b.py": "class B:\n    _inner = 1\ndef _private(): pass\n",
            "pkg/c.py": "from ._version import __version__\nfrom . import _version\n"
            "from .b import B, _private\nfrom os import _exit\n",
            "pkg/_version.py": "__version__ = '1'\n",
        },
    )
    found = private_offenders(tmp_path, "pkg")
    text = "\n".join(found)
    assert len(found) == 8, text
    assert "pkg/c.py:3: pkg.c imports pkg.b._private" in text
    assert "pkg/a.py:6: pkg.a writes other._theirs" in text
    assert "pkg/a.py:8: pkg.a reads self._helper._inner" in text
    assert "pkg/a.py:9: pkg.a reads b._private" in text
    assert "pkg/a.py:11: pkg.a reads other._mine" in text
    assert "pkg/a.py:18: pkg.a reads other._local" in text
    assert "pkg/a.py:21: pkg.a reads other._mine, through getattr()" in text
    assert "pkg/a.py:21: pkg.a reads b.B._inner, through hasattr()" in text
    hidden = next(o for o in found if "b.B._inner" in o)
    assert debt_key("private", hidden) == "pkg/a.py: b.B._inner"


def test_wire_name_checker_finds_names_written_out(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/protocol/methods.py": "PROMPT = 'session/prompt'\nLOGOUT = 'logout'\n",
            "pkg/client.py": "from .protocol import methods\n"
            "async def go(conn, caps, msg):\n"
            "    await conn.request(methods.PROMPT, {})\n"
            "    await conn.request('session/prompt', {})\n"  # 4
            "    await conn.request('logout', {})\n"  # 5
            "    if msg.get('method') == 'logout': pass\n"  # 6
            "    return caps.get('logout'), {'logout': 1}, 'session/prompt answered'\n"
            "HANDLERS = {'$/cancel_request': None}\n",  # 8
        },
    )
    names = {"session/prompt", "logout", "$/cancel_request"}
    found = wire_name_offenders(tmp_path, "pkg", names)
    text = "\n".join(found)
    assert [o.split(": ", 1)[0] for o in found] == [
        "pkg/client.py:4",
        "pkg/client.py:5",
        "pkg/client.py:6",
        "pkg/client.py:8",
    ], text
