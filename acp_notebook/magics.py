"""`%%agent` and `%agent`: argument parsing, configuration, wiring. The work is elsewhere.

Cells run on the kernel's event loop, and a magic is a plain call: a coroutine it returns is not
run. So an input transformer rewrites `%%agent` cells (and top-level `%agent` lines) into
`await get_ipython().run_cell_magic(...)`: the cell then awaits the turn, every streamed display
update lands in that cell, Run All waits for it, its value becomes `Out[n]`, and widget clicks
(Stop, permissions) are handled meanwhile (ipykernel >= 7.4).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shlex
from collections.abc import Coroutine
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, Unicode

from .config import Registry
from .errors import ConfigError

_CELL_RE = re.compile(r"%%agent(?:\s|$)")
_LINE_RE = re.compile(r"%agent(?:\s|$)")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error instead of exiting the kernel's process."""

    def error(self, message: str) -> Any:
        raise UsageError(f"{message}\n\n{self.format_usage().strip()}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise UsageError(message or self.format_help())


def _config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _kinds(text: str) -> list[str]:
    return [k for k in re.split(r"[,\s]+", text) if k]


def cell_parser() -> _Parser:
    p = _Parser(prog="%%agent", add_help=True,
                description="Send the cell's body as a prompt to an ACP agent.")
    p.add_argument("--agent", "-a", help="agent name (see %%agent list) or a full command line")
    p.add_argument("--session", "-s", help="session name (default: one per agent)")
    p.add_argument("--new", action="store_true", help="start a new session for this name")
    p.add_argument("--mode", help="set the session mode first")
    p.add_argument("--config", action="append", type=_config_pair, default=[],
                   metavar="KEY=VALUE", help="set a session config option first (repeatable)")
    p.add_argument("--out", metavar="NAME", help="also bind the turn result to NAME")
    p.add_argument("--background", "--bg", action="store_true",
                   help="return the turn handle at once; the output keeps streaming")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="cancel the turn after SECONDS and fail the cell")
    p.add_argument("--allow", action="append", type=_kinds, default=[], metavar="KINDS",
                   help="tool kinds to allow without asking, e.g. read,search")
    p.add_argument("--deny", action="append", type=_kinds, default=[], metavar="KINDS",
                   help="tool kinds to reject without asking, e.g. execute,delete")
    p.add_argument("--with", "-w", dest="variables", action="append", default=[],
                   metavar="NAME", help="give the agent a kernel variable as context: a "
                   "DataFrame's shape, dtypes and head, a figure as PNG, else its repr "
                   "(repeatable)")
    p.add_argument("--file", "-f", action="append", default=[], metavar="PATH",
                   help="attach a file (repeatable)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no live output; only the final record")
    return p


@magics_class
class AcpNotebook(Magics):
    """ACP agents in notebooks. Configure with `c.AcpNotebook.<option>` (ipython_kernel_config)."""

    agents = Dict(help="Agent entries by name: {command, args, env, cwd}.").tag(config=True)
    default_agent = Unicode("", help="Agent used when a cell names none "
                            "(the ACP_NOTEBOOK_AGENT environment variable wins).").tag(config=True)
    agents_file = Unicode("", help="TOML file of [agents.NAME] entries (default: "
                          "$XDG_CONFIG_HOME/acp_notebook/agents.toml).").tag(config=True)
    allow = List(Unicode(), help="Tool kinds allowed without asking.").tag(config=True)
    deny = List(Unicode(), help="Tool kinds always rejected.").tag(config=True)
    permission_default = CaselessStrEnum(
        ["ask", "allow", "reject"], "ask",
        help="Other tool kinds: ask (buttons; rejected when nobody can be asked), "
             "allow, or reject.").tag(config=True)
    interactive = CaselessStrEnum(
        ["auto", "yes", "no"], "auto",
        help="Whether someone can click buttons: auto detects a widget front-end "
             "(headless runs such as nbclient have none).").tag(config=True)
    permission_timeout = Float(600.0, help="Seconds a permission request waits for a click "
                               "before it is rejected (0: no limit).").tag(config=True)
    cancel_grace = Float(5.0, help="Seconds an agent gets to answer session/cancel before it "
                         "is killed.").tag(config=True)
    timeout = Float(0.0, help="Default --timeout in seconds (0: none).").tag(config=True)
    request_timeout = Float(120.0, help="Seconds the agent has to answer any request but a "
                            "prompt (session/new, session/load, set_mode...) before it is "
                            "cancelled and the cell fails (0: no limit).").tag(config=True)
    terminal = Bool(False, help="Offer client terminals (terminal/*) to agents.").tag(config=True)
    fs = Bool(True, help="Offer workspace-confined fs/read_text_file and "
              "fs/write_text_file.").tag(config=True)
    protect_notebooks = Bool(True, help="Refuse agents' fs/write_text_file to any *.ipynb (the "
                             "notebook being run cannot always be told apart).").tag(config=True)
    max_retries = Int(5, help="Retries of a turn that fails before any output.").tag(config=True)
    max_update_rate = Float(25.0, help="Display updates per second while a turn "
                            "streams.").tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        from .notebook.runtime import Runtime

        self.runtime = Runtime()

    @property
    def user_ns(self) -> dict[str, Any]:
        assert self.shell is not None, "the magics are registered with a shell"
        ns: dict[str, Any] = self.shell.user_ns
        return ns

    # -- configuration ---------------------------------------------------------------------------

    def registry(self) -> Registry:
        try:
            registry = Registry.build(self.agents, self.default_agent or None,
                                      self.agents_file or None)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        for spec in registry.agents.values():  # keys in agents' env or options: never shown
            self.runtime.remember(spec)
        return registry

    def client_options(self) -> dict[str, Any]:
        from .client.permissions import PermissionPolicy

        return {
            "fs": self.fs, "terminal": self.terminal, "cancel_grace": self.cancel_grace,
            "max_retries": self.max_retries,
            "request_timeout": self.request_timeout if self.request_timeout > 0 else None,
            "permission_policy": PermissionPolicy(self.allow, self.deny,
                                                  self.permission_default),
            "protected_paths": _notebook_paths(self.user_ns),
            "protect_notebooks": self.protect_notebooks,
        }

    def is_interactive(self) -> bool:
        if self.interactive != "auto":
            return bool(self.interactive == "yes")
        from ipywidgets import Widget

        # A widget front-end (JupyterLab, Notebook 7, VS Code) opens the widget control comm
        # when it connects; nbclient, papermill and `jupyter execute` never do.
        return getattr(Widget, "_control_comm", None) is not None

    # -- %%agent ---------------------------------------------------------------------------------

    @cell_magic
    def agent(self, line: str, cell: str) -> Coroutine[Any, Any, Any]:
        """Send the cell body as a prompt. Options: %%agent --help."""
        args = _parse(cell_parser(), line)
        return self._run_cell(args, cell)

    async def _run_cell(self, args: argparse.Namespace, body: str) -> Any:
        from .notebook import session_cell
        from .notebook.publish import guarded

        # Errors quote the agent (its error message, its stderr): they leave masked.
        return await guarded(session_cell.run(self, args, body))

    # -- %agent ----------------------------------------------------------------------------------

    @line_magic("agent")  # type: ignore[arg-type]  # IPython's stubs reject a renamed method
    def agent_line(self, line: str) -> Coroutine[Any, Any, Any]:
        """%agent [list|status|sessions|resume|load|mode|config|stop|restart|close|help] ..."""
        from .notebook import commands
        from .notebook.publish import guarded

        return guarded(commands.run(self, line))


def _parse(parser: _Parser, line: str) -> argparse.Namespace:
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot parse options: {exc}") from None
    return parser.parse_args(argv)


def _notebook_paths(user_ns: dict[str, Any] | None = None) -> list[str]:
    """The notebook being executed, when something says which: agents may not read or write it.

    jupyter-server (JupyterLab, Notebook) sets JPY_SESSION_NAME in the kernel's environment
    (ipykernel copies it to `__session__`); VS Code sets `__vsc_ipynb_file__`; papermill's
    --inject-paths sets PAPERMILL_INPUT_PATH and PAPERMILL_OUTPUT_PATH as variables, not in the
    environment. nbclient and `jupyter execute` say nothing: that is why writes to every notebook
    are refused too (`protect_notebooks`).
    """
    import os

    ns = user_ns or {}
    found = [os.environ.get("JPY_SESSION_NAME"), ns.get("__session__"),
             ns.get("__vsc_ipynb_file__"), ns.get("PAPERMILL_INPUT_PATH"),
             ns.get("PAPERMILL_OUTPUT_PATH"), os.environ.get("PAPERMILL_INPUT_PATH"),
             os.environ.get("PAPERMILL_OUTPUT_PATH")]
    paths: list[str] = []
    for path in found:
        if not isinstance(path, str) or not path.endswith(".ipynb"):
            continue
        if os.path.isabs(path):
            paths.append(path)
        else:
            # jupyter-server without a session name gives the path relative to its root and
            # starts the kernel in the notebook's directory: protect both readings.
            paths += [os.path.abspath(path), os.path.abspath(os.path.basename(path))]
    return paths


# -- the input transformer ------------------------------------------------------------------------

def transform_agent_cells(lines: list[str]) -> list[str]:
    """Make `%%agent` cells and top-level `%agent` lines awaited (see the module docstring)."""
    if not lines:
        return lines
    if _CELL_RE.match(lines[0]):
        line = lines[0][len("%%agent"):].strip()
        body = "".join(lines[1:])
        return [f"await get_ipython().run_cell_magic('agent', {line!r}, {body!r})\n"]
    if not any(_LINE_RE.match(x) for x in lines):
        return lines
    out = []
    for x in lines:
        if _LINE_RE.match(x):
            rest = x[len("%agent"):].strip()
            x = f"await get_ipython().run_line_magic('agent', {rest!r})\n"
        out.append(x)
    return out


def load_ipython_extension(ipython: Any) -> None:
    # Not lazy, on purpose: importing ipywidgets registers the "jupyter.widget.control" comm
    # target, which JupyterLab opens once when it connects to the kernel. Imported later (at the
    # first %%agent), that open had already been refused, so is_interactive() never saw a
    # widget front-end and Lab got no Stop or permission buttons (permissions were rejected).
    import ipywidgets  # noqa: F401

    magics = AcpNotebook(shell=ipython, parent=ipython)
    ipython.register_magics(magics)
    if transform_agent_cells not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(transform_agent_cells)
    _register_formatters(ipython, magics)
    if _reset_last_traceback not in ipython.events.callbacks["pre_run_cell"]:
        ipython.events.register("pre_run_cell", _reset_last_traceback)
    ipython._acp_notebook = magics


def _reset_last_traceback(info: Any = None) -> None:
    # ipykernel's shell sets `_last_traceback` in its run_cell(), which a cell with top-level
    # await (every %%agent cell, see transform_agent_cells) bypasses; its execute handler then
    # reads the attribute for the reply. So a UsageError (which shows no traceback) in the first
    # failing %%agent cell of a kernel crashed the handler with AttributeError and sent no
    # reply: the cell hung forever. Later ones replied with an older cell's traceback. Reset
    # both attributes before every cell, as ipykernel's run_cell() does.
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell._last_traceback = None
        shell._last_traceback_during_displayhook = False


def unload_ipython_extension(ipython: Any) -> None:
    if transform_agent_cells in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(transform_agent_cells)
    if _reset_last_traceback in ipython.events.callbacks["pre_run_cell"]:
        ipython.events.unregister("pre_run_cell", _reset_last_traceback)
    magics = getattr(ipython, "_acp_notebook", None)
    if magics is not None:
        loop = asyncio.get_event_loop()
        task = loop.create_task(magics.runtime.close_all())
        magics._closing = task  # keep a reference until it is done


def _register_formatters(ipython: Any, magics: AcpNotebook) -> None:
    from .notebook.display import register

    register(ipython, magics.runtime.redactor)
