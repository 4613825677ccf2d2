"""The kernel's MCP tools, served on one relay connection with the `mcp` SDK's low-level `Server`.

Tools: `list_variables`, `inspect_variable` (`variables.py`), `notebook_cells`, `last_error`
(`cells.py`), all read only, `run_code` (`card.py`: the card and permission the person sees,
then `run.py` runs it), and `insert_cell`, `edit_cell`, `run_cell` with a live `notebook_cells`
(`notebook_edit.py`, through the JupyterLab extension's comm, `notebook_link.py`). A new tool:
its schema in `TOOLS`, its dispatch in `_call` (or `_reader` for a read, run stoppable like the
others), its code in a module of its own beside this one.

Every frame the agent sends is bounded (`MAX_MESSAGE` per line); answers are bounded by the
tools (`MAX_TEXT`) and every answer's text is masked by the kernel's redactor (the values of
secret-looking environment variables and of the agents' secrets, `protocol.redact`), whichever
tool gave it: the one rule for what the agent reads from the kernel, as for `%%agent --with`,
`--error` and `--cells`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types as types
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from .._version import __version__
from ..protocol.limits import clip_text
from . import notebook_edit, variables
from .card import arg, cancel_soon, run_asked, time_left
from .run import stoppable
from .variables import MAX_TEXT, ToolOutput

if TYPE_CHECKING:
    import weakref

    from ..client.session import Session
    from ..notebook.runtime import Runtime
    from .run import CellGate


class ToolHost(Protocol):
    """What the tools need of the kernel's server (`server.KernelServer`); a grant is
    that server's token record, passed back to it."""

    shell: Any
    runtime: Runtime
    gate: CellGate
    refused: weakref.WeakSet[object]

    def alive(self, grant: Any) -> bool: ...
    def session_of(self, grant: Any) -> Session | None: ...


MAX_MESSAGE = 4 * 1024 * 1024  # bytes of one JSON-RPC line from the agent


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


TOOLS = [
    types.Tool(
        name="list_variables",
        description="The variables of the user's notebook kernel: name, type, shape or length, "
        "a short repr. Modules, functions, classes and _-names are left out unless "
        "include_hidden is true.",
        input_schema=_schema({"include_hidden": {"type": "boolean", "default": False}}),
    ),
    types.Tool(
        name="inspect_variable",
        description="One variable in detail: a DataFrame's schema, head and describe(); an "
        "array's shape, dtype and a sample; a matplotlib figure as an image; else its repr.",
        input_schema=_schema({"name": {"type": "string"}}, ("name",)),
    ),
    types.Tool(
        name="notebook_cells",
        description="The notebook's most recent cells: their source and a short summary of "
        "their output. Live from the notebook open in JupyterLab (ids, unsaved edits "
        "included) when its front-end can tell, else from the notebook file when the kernel "
        "knows it, else the kernel's input history.",
        input_schema=_schema({"count": {"type": "integer", "minimum": 1, "default": 10}}),
    ),
    types.Tool(
        name="last_error",
        description="The last exception raised in the notebook: type, message, traceback, and "
        "the source of the cell that raised it.",
        input_schema=_schema({}),
    ),
    types.Tool(
        name="run_code",
        description="Run Python code in the user's kernel, in its namespace (variables you set "
        "stay). The user is asked first. Synchronous code only (no top-level await). Returns "
        "stdout, stderr, the repr of the last expression's value, and any error.",
        input_schema=_schema({"code": {"type": "string"}}, ("code",)),
    ),
    types.Tool(
        name="insert_cell",
        description="Insert a new cell into the user's notebook, below `after` (a cell id or "
        "1-based index as notebook_cells lists them), by default below your %%agent cell or "
        "the last cell you inserted this turn. The user is asked first. run=true also runs it "
        "as a normal cell (asked too). Says what happened: inserted (its id), run, or not.",
        input_schema=_schema(
            {
                "source": {"type": "string"},
                "cell_type": {"type": "string", "enum": ["code", "markdown"], "default": "code"},
                "after": {"type": ["string", "integer", "null"], "default": None},
                "run": {"type": "boolean", "default": False},
            },
            ("source",),
        ),
    ),
    types.Tool(
        name="edit_cell",
        description="Replace the source of a cell of the user's notebook (by id or 1-based "
        "index, as notebook_cells lists them). The user is asked first, shown the diff. A "
        "running cell is not edited; the edit does not run it.",
        input_schema=_schema(
            {"cell": {"type": ["string", "integer"]}, "source": {"type": "string"}},
            ("cell", "source"),
        ),
    ),
    types.Tool(
        name="run_cell",
        description="Run a code cell of the user's notebook as the user would (by id or "
        "1-based index). The user is asked first. Says its output, or that it is queued "
        "behind the running cell.",
        input_schema=_schema({"cell": {"type": ["string", "integer"]}}, ("cell",)),
    ),
]


def build(kernel: ToolHost, grant: Any) -> Server[Any]:
    """A low-level MCP server whose tools act for the session of `grant`."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if not kernel.alive(grant):
            return _result(ToolOutput("the session these tools belonged to has ended", error=True))
        session = kernel.session_of(grant)
        if session is not None and session.running in kernel.refused:
            return _result(ToolOutput("the kernel tools are off for this turn", error=True))
        try:
            output = await _call(kernel, grant, params.name, params.arguments or {})
        except (TypeError, ValueError) as exc:
            output = ToolOutput(
                f"bad arguments for {params.name}: {clip_text(str(exc), 500)}", error=True
            )
        # One rule for every answer: masked by the kernel's redactor, as every output is. A
        # variable holding a key (`key = os.environ["OPENAI_API_KEY"]`) was handed over as it
        # is by inspect_variable and list_variables, while run_code's print(key) was masked.
        mask = kernel.runtime.redactor.text
        return _result(ToolOutput(mask(output.text), output.images, output.error))

    return Server(
        "acp_notebook kernel",
        version=__version__,
        instructions="Tools that read and run code in the user's Jupyter kernel.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _call(kernel: ToolHost, grant: Any, name: str, args: dict[str, Any]) -> ToolOutput:
    if name == "run_code":
        code = arg(args, "code", str)  # checked before the session: a TypeError names it
        session = kernel.session_of(grant)
        if session is None:
            return ToolOutput("the session is not open: code cannot run", error=True)
        return await run_asked(
            session, kernel.gate, kernel.shell.user_ns, kernel.runtime.redactor.text, code
        )
    if name in notebook_edit.NAMES:  # the live notebook's, when its front-end can tell
        answered = await notebook_edit.call(kernel, grant, name, args)
        if answered is not None:
            return answered
    read = _reader(kernel, name, args)
    if read is None:
        return ToolOutput(f"no tool {clip_text(name, 100)!r}", error=True)
    # A read runs the user's objects' code (a __repr__, describe()) on the kernel's loop, which
    # no interrupt reached either (a repr that hangs on the network): stoppable as run_code is.
    session = kernel.session_of(grant)
    turn = session.running if session is not None else None
    output, stopped = stoppable(read, time_left(turn))
    if output is not None:
        return output
    if stopped == "interrupted" and session is not None and turn is not None:
        cancel_soon(session, turn)
    why = (
        "the user interrupted the kernel" if stopped == "interrupted" else "the turn's time ran out"
    )
    return ToolOutput(f"{name} was stopped: {why} while it ran", error=True)


def _reader(kernel: ToolHost, name: str, args: dict[str, Any]) -> Callable[[], ToolOutput] | None:
    """The read tool `name` with its arguments checked (TypeError for a bad one), to call."""
    ns = kernel.shell.user_ns
    if name == "list_variables":
        hidden = getattr(kernel.shell, "user_ns_hidden", {})
        include = arg(args, "include_hidden", bool, False)
        return lambda: variables.list_variables(ns, hidden, include)
    if name == "inspect_variable":
        variable = arg(args, "name", str)
        return lambda: variables.inspect_variable(ns, variable)
    if name == "notebook_cells":
        count = max(1, min(arg(args, "count", int, 10), 100))
        return lambda: _cells(kernel, count)
    if name == "last_error":
        return lambda: _last_error(kernel)
    return None


def _cells(kernel: ToolHost, count: int) -> ToolOutput:
    from .cells import cells_text, recent_cells

    text = cells_text(recent_cells(kernel.shell, count)) or "(no cells above this one yet)"
    return ToolOutput(
        clip_text(text, MAX_TEXT)
    )  # masked field by field (snapshots.safe), then as a whole


def _last_error(kernel: ToolHost) -> ToolOutput:
    from .cells import last_error

    error = last_error(kernel.shell)
    if error is None:
        return ToolOutput("no exception has been raised in this kernel yet")
    return ToolOutput(
        clip_text(error.to_text(), MAX_TEXT)
    )  # masked field by field, then as a whole


def _result(output: ToolOutput) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=output.text)]
    for png in output.images:
        content.append(
            types.ImageContent(
                type="image", data=base64.b64encode(png).decode(), mime_type="image/png"
            )
        )
    return types.CallToolResult(content=content, is_error=output.error)


async def serve(
    kernel: ToolHost, grant: Any, stream: SocketStream, buffered: BufferedByteReceiveStream
) -> None:
    """MCP over one connection (newline-delimited JSON-RPC, as on stdio) until it closes."""
    server = build(kernel, grant)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        async with read_send:
            while True:
                try:
                    line = await buffered.receive_until(b"\n", MAX_MESSAGE)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound):
                    return  # closed, or a line over the limit: the connection ends
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:  # not JSON-RPC: the server answers a parse error
                    await read_send.send(exc)
                    continue
                await read_send.send(SessionMessage(message))

    async def writer() -> None:
        async with write_recv:
            async for item in write_recv:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stream.send(data.encode() + b"\n")

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        await server.run(read_recv, write_send, server.create_initialization_options())
        group.cancel_scope.cancel()
