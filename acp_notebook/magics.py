"""`%%agent` and `%agent`: configuration (traitlets) and wiring; the work is in `notebook/`.

`AcpNotebook` is the magics object IPython holds: its settings and the kernel's `Runtime`. The
`%%agent` options and their parser are in `notebook/options.py`, the rewrite that makes the cells
awaited in `notebook/rewrite.py`, the `%%agent` flow in `notebook/cell.py` and the
`%agent` subcommands in `notebook/commands.py`; those take this object as a `notebook.host.Host`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, Unicode

from .config import Registry
from .errors import ConfigError, HelpShown
from .notebook.options import CellOptions, parse_cell_line

if TYPE_CHECKING:
    from .notebook.runtime import Runtime
    from .widgets.kit import WidgetKit


@magics_class
class AcpNotebook(Magics):
    """ACP agents in notebooks. Configure with `c.AcpNotebook.<option>` (ipython_kernel_config)."""

    agents = Dict(help="Agent entries by name: {command, args, env, cwd}.").tag(config=True)
    default_agent = Unicode(
        "",
        help="Agent used when a cell names none "
        "(the ACP_NOTEBOOK_AGENT environment variable wins).",
    ).tag(config=True)
    agents_file = Unicode(
        "",
        help="TOML file of [agents.NAME] entries (default: "
        "$XDG_CONFIG_HOME/acp_notebook/agents.toml).",
    ).tag(config=True)
    mcp_servers = Dict(
        help="MCP servers by name, for --mcp NAME and an agent's mcp = [...]: "
        "{command, args, env} (stdio) or {type: 'http' | 'sse', url, headers}."
    ).tag(config=True)
    allow = List(Unicode(), help="Tool kinds allowed without asking.").tag(config=True)
    deny = List(Unicode(), help="Tool kinds always rejected.").tag(config=True)
    permission_default = CaselessStrEnum(
        ["ask", "allow", "reject"],
        "ask",
        help="Other tool kinds: ask (buttons; rejected when nobody can be asked), "
        "allow, or reject.",
    ).tag(config=True)
    interactive = CaselessStrEnum(
        ["auto", "yes", "no"],
        "auto",
        help="Whether someone can click buttons: auto detects a widget front-end "
        "(headless runs such as nbclient have none).",
    ).tag(config=True)
    permission_timeout = Float(
        600.0,
        help="Seconds a permission request waits for a click before it is rejected (0: no limit).",
    ).tag(config=True)
    cancel_grace = Float(
        5.0, help="Seconds an agent gets to answer session/cancel before it is killed."
    ).tag(config=True)
    timeout = Float(0.0, help="Default --timeout in seconds (0: none).").tag(config=True)
    request_timeout = Float(
        120.0,
        help="Seconds the agent has to answer any request but a "
        "prompt (session/new, session/load, set_mode...) before it is "
        "cancelled and the cell fails (0: no limit).",
    ).tag(config=True)
    terminal = Bool(False, help="Offer client terminals (terminal/*) to agents.").tag(config=True)
    fs = Bool(True, help="Offer workspace-confined fs/read_text_file and fs/write_text_file.").tag(
        config=True
    )
    protect_notebooks = Bool(
        True,
        help="Refuse agents' fs/write_text_file to any *.ipynb (the "
        "notebook being run cannot always be told apart).",
    ).tag(config=True)
    remember_sessions = Bool(
        True,
        help="Keep named sessions' ids in .acp_notebook/sessions.json in the workspace, and "
        "resume them after a kernel restart.",
    ).tag(config=True)
    fork_cells = Bool(
        True,
        help="Run a %%agent cell run again on a fork of the conversation as it stood before its "
        "previous run, where the agent can fork sessions (one fork per turn); False adds every "
        "turn at the end.",
    ).tag(config=True)
    max_retries = Int(5, help="Retries of a turn that fails before any output.").tag(config=True)
    log_file = Unicode(
        "",
        help="Append every JSON-RPC message with an agent to this file as a JSON line, secrets "
        "masked (the ACP_NOTEBOOK_LOG environment variable, when set, wins).",
    ).tag(config=True)
    trace = Bool(
        False, help="Send a W3C traceparent in the _meta of every request to an agent."
    ).tag(config=True)
    replay = Unicode(
        "",
        help="A recorded notebook to serve %%agent cells from, without agents "
        "(the ACP_NOTEBOOK_REPLAY environment variable wins).",
    ).tag(config=True)
    replay_mode = CaselessStrEnum(
        ["strict", "fill"],
        "strict",
        help="With replay: a cell that changed since the recording fails (strict) or runs its "
        "agent (fill). The ACP_NOTEBOOK_REPLAY_MODE environment variable wins.",
    ).tag(config=True)
    max_update_rate = Float(25.0, help="Display updates per second while a turn streams.").tag(
        config=True
    )
    view_update_rate = Float(
        60.0,
        help="Messages per second to a turn's live view in a widget front-end while a turn "
        "streams: each carries only what changed, so it can be drawn more often than a display.",
    ).tag(config=True)
    max_cost_total = Float(
        0.0,
        help="USD this kernel's turns may cost in all, as the agents report it (0: no limit); "
        "once spent, new turns are refused (see %agent ledger).",
    ).tag(config=True)
    system_prompt = Unicode(
        "You work from a cell of a Jupyter notebook (acp_notebook's %%agent): the user reads "
        "your answer in the cell's output, rendered as Markdown. The acp-notebook-kernel MCP "
        "tools reach the notebook's live kernel: list_variables and inspect_variable (its "
        "data), notebook_cells (the cells and their outputs), last_error (the last "
        "traceback), run_code (run Python in the kernel; the user is asked first).",
        help="Added to the agent's own instructions on every new, loaded or resumed session, "
        "where the agent takes them (sessionCapabilities.systemPrompt); empty sends none.",
    ).tag(config=True)
    prestart = Bool(
        False,
        help="Start the default agent and its session in the background when the extension "
        "loads, so the first %%agent cell does not wait for them (a failure is said by that "
        "cell, or by %agent status).",
    ).tag(config=True)
    kernel_tools = Bool(
        True,
        help="Offer every new session the kernel's MCP tools: list and inspect variables, the "
        "notebook's cells, the last error, and run code (asked as an execute permission).",
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self._runtime: Runtime | None = None
        #: The task closing every agent, once `close()` started it (see unload).
        self.closing: asyncio.Task[None] | None = None

    @property
    def runtime(self) -> Runtime:
        """The kernel's agents and sessions, made at first use: the client layer it needs
        (pydantic, the protocol's schema) costs a kernel that never runs `%%agent` nothing."""
        if self._runtime is None:
            from .notebook.runtime import Runtime

            self._runtime = Runtime()
        return self._runtime

    def close(self) -> asyncio.Task[None]:
        """Close every session and stop every agent, in a task on the kernel's loop (an unload
        is a plain call); the task is kept here until it is done."""
        if self.closing is None:
            loop = asyncio.get_event_loop()
            runtime = self._runtime  # none made: no agent to stop, nothing to import
            self.closing = loop.create_task(runtime.close_all() if runtime else _nothing())
        return self.closing

    @property
    def execution_count(self) -> int | None:
        # IPython stores a cell's input in `In` before running it (`In[n]` is cell n), in every
        # version; when `shell.execution_count` is incremented (before or after) has changed.
        inputs = self.user_ns.get("In")
        return len(inputs) - 1 if isinstance(inputs, list) and len(inputs) > 1 else None

    @property
    def user_ns(self) -> dict[str, Any]:
        assert self.shell is not None, "the magics are registered with a shell"
        ns: dict[str, Any] = self.shell.user_ns
        return ns

    # -- configuration ---------------------------------------------------------------------------

    def registry(self) -> Registry:
        try:
            registry = Registry.build(
                self.agents, self.default_agent or None, self.agents_file or None, self.mcp_servers
            )
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        for spec in registry.agents.values():  # keys in agents' env or options: never shown
            self.runtime.remember(spec)
        return registry

    def client_options(self) -> dict[str, Any]:
        from .client.serving.permissions import PermissionPolicy

        return {
            "fs": self.fs,
            "terminal": self.terminal,
            "cancel_grace": self.cancel_grace,
            "max_retries": self.max_retries,
            "request_timeout": self.request_timeout if self.request_timeout > 0 else None,
            "permission_policy": PermissionPolicy(self.allow, self.deny, self.permission_default),
            "protected_paths": _notebook_paths(self.user_ns),
            "protect_notebooks": self.protect_notebooks,
            "log_file": os.environ.get("ACP_NOTEBOOK_LOG") or self.log_file or None,
            "trace": self.trace,
            "system_prompt": self.system_prompt,
        }

    def is_interactive(self) -> bool:
        if self.interactive != "auto":
            return bool(self.interactive == "yes")
        from .widgets.targets import front_end_connected

        return front_end_connected()

    @property
    def widgets(self) -> WidgetKit:
        """The widget views the `%%agent` flow and `%agent chat` show (notebook/host.py's
        `Widgets`): handed in from here, so the notebook layer never imports the widgets."""
        from .widgets.kit import WidgetKit

        return WidgetKit()

    # -- %%agent ---------------------------------------------------------------------------------

    @cell_magic
    def agent(self, line: str, cell: str) -> Coroutine[Any, Any, Any]:
        """Send the cell body as a prompt. Options: %%agent --help."""
        try:
            opts = parse_cell_line(line)
        except HelpShown:  # printed once, whatever the body; the cell does not fail
            return _nothing()
        if not cell.strip():
            raise UsageError(
                "%%agent sends the lines below it as the prompt, and this cell has none. "
                "Write the prompt under the %%agent line; for a command, use the line magic "
                "(%agent help)."
            )
        return self._run_cell(opts, cell, line)

    async def _run_cell(self, opts: CellOptions, body: str, line: str) -> Any:
        from .display.publish import guarded
        from .notebook import cell

        # Errors quote the agent (its error message, its stderr): they leave masked.
        return await guarded(cell.run(self, opts, body, line))

    # -- %agent ----------------------------------------------------------------------------------

    @line_magic("agent")  # type: ignore[arg-type]  # IPython's stubs reject a renamed method
    def agent_line(self, line: str) -> Coroutine[Any, Any, Any]:
        """%agent [list|status|sessions|resume|load|mode|config|stop|restart|close|help] ..."""
        from .display.publish import guarded
        from .notebook import commands

        return guarded(commands.run(self, line))


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
    found = [
        os.environ.get("JPY_SESSION_NAME"),
        ns.get("__session__"),
        ns.get("__vsc_ipynb_file__"),
        ns.get("PAPERMILL_INPUT_PATH"),
        ns.get("PAPERMILL_OUTPUT_PATH"),
        os.environ.get("PAPERMILL_INPUT_PATH"),
        os.environ.get("PAPERMILL_OUTPUT_PATH"),
    ]
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


def load_ipython_extension(ipython: Any) -> None:
    """Light, since it runs at every start of every kernel of an environment where the package
    is installed (jupyter-config enables it): the client, the renderers, ipywidgets and
    pydantic are imported at the first `%%agent`, `%agent` or `connect`
    (tests/kernel/test_light_load.py).
    """
    # JupyterLab opens ipywidgets' control comm once, when it connects: its target must exist
    # from the start, or is_interactive() never sees a widget front-end and Lab gets no Stop or
    # permission buttons. Stand-ins import ipywidgets only when a front-end opens it.
    from .display.masking import install_log_mask
    from .kernel_tools import notebook_link
    from .notebook import interrupts, kernel_status, rewrite
    from .widgets.targets import register_lazily

    register_lazily()
    notebook_link.register()  # the JupyterLab extension opens its comm as it connects
    install_log_mask()  # as the Runtime does: records masked whoever logs first
    magics = AcpNotebook(shell=ipython, parent=ipython)
    ipython.register_magics(magics)
    rewrite.install(ipython)
    interrupts.install(ipython)  # the kernel's interrupt reaches a cell awaiting a quiet agent
    kernel_status.install(ipython)  # busy while a cell awaits; each widget message its idle
    _register_formatters(ipython)
    if _reset_last_traceback not in ipython.events.callbacks["pre_run_cell"]:
        ipython.events.register("pre_run_cell", _reset_last_traceback)
    from .kernel_tools.cell_errors import note_cell

    if note_cell not in ipython.events.callbacks["post_run_cell"]:  # what --error gives
        ipython.events.register("post_run_cell", note_cell)
    if magics.prestart:
        _prestart(magics)


def _prestart(magics: AcpNotebook) -> None:
    """c.AcpNotebook.prestart: the default agent started in the background. Never breaks the
    kernel's start: a failure to even begin (a bad configuration) is logged, and the first cell,
    which reads the same configuration, says it."""
    import logging

    try:
        from .notebook import prestart

        spec, _note = magics.registry().resolve(None)
        prestart.begin(magics, spec)
    except Exception as exc:
        logging.getLogger("acp_notebook").warning(
            "acp_notebook: c.AcpNotebook.prestart could not start the default agent: %s", exc
        )


def instance(ipython: Any) -> AcpNotebook | None:
    """The `AcpNotebook` registered with this shell, if the extension is loaded."""
    magics = ipython.magics_manager.registry.get(AcpNotebook.__name__)
    return magics if isinstance(magics, AcpNotebook) else None


def _reset_last_traceback(info: Any = None) -> None:
    # ipykernel's shell sets `_last_traceback` in its run_cell(), which a cell with top-level
    # await (every %%agent cell, see notebook/rewrite.py) bypasses; its execute handler then
    # reads the attribute for the reply. So a UsageError (which shows no traceback) in the first
    # failing %%agent cell of a kernel crashed the handler with AttributeError and sent no
    # reply: the cell hung forever. Later ones replied with an older cell's traceback. Reset
    # both attributes before every cell, as ipykernel's run_cell() does. They are ipykernel's
    # private attributes, written here because ipykernel offers no public way to reset them.
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell._last_traceback = None
        shell._last_traceback_during_displayhook = False


def unload_ipython_extension(ipython: Any) -> None:
    from .notebook import interrupts, kernel_status, rewrite

    rewrite.uninstall(ipython)
    interrupts.uninstall(ipython)
    kernel_status.uninstall(ipython)
    if _reset_last_traceback in ipython.events.callbacks["pre_run_cell"]:
        ipython.events.unregister("pre_run_cell", _reset_last_traceback)
    from .kernel_tools.cell_errors import note_cell

    if note_cell in ipython.events.callbacks["post_run_cell"]:
        ipython.events.unregister("post_run_cell", note_cell)
    from .display.reprs import unregister

    unregister(ipython)
    magics = instance(ipython)
    if magics is not None:
        magics.close()


def _register_formatters(ipython: Any) -> None:
    from .display.masking import REDACTOR  # the Runtime's redactor, which is made later
    from .display.reprs import register

    register(ipython, REDACTOR)


async def _nothing() -> None:
    """What an awaited magic that has nothing more to do returns (the rewrite awaits it)."""
