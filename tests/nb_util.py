"""Build notebooks from cell sources, execute them with nbclient on real kernels, read outputs.

The kernel is `python3` of the interpreter running the tests (the project's venv), so it loads
acp_notebook through the venv's `etc/ipython/ipython_kernel_config.json`. Its environment is
private: the demo agent runs without delays, `XDG_CONFIG_HOME` points into the test's tmp dir (no
user agents file) and `ACP_NOTEBOOK_AGENT` is unset (no user default agent).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_notebook

from acp_notebook.protocol.turn import TurnResult
from tests.agents.script import agent_command, script
from tests.shared_kernel import SharedKernel

MIME_TURN = "application/vnd.acp-notebook.turn+json"
MIME_WIDGET = "application/vnd.jupyter.widget-view+json"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}

__all__ = [
    "MIME_TURN",
    "MIME_WIDGET",
    "RecordingClient",
    "agent_command",
    "answer",
    "data",
    "errors",
    "execute",
    "kernel_env",
    "make_client",
    "new_nb",
    "outputs",
    "process_gone",
    "script",
    "scripted",
    "text",
    "transcripts",
]


def new_nb(*sources: str) -> NotebookNode:
    """A notebook with one code cell per source, for the python3 kernel."""
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    return nb


def kernel_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("ACP_NOTEBOOK_AGENT", "ACP_NOTEBOOK_AGENTS_FILE", "ACP_NOTEBOOK_REGISTRY_URL"):
        env.pop(key, None)
    xdg = tmp_path / "xdg"
    xdg.mkdir(exist_ok=True)
    # The cache too (the ACP registry's copy, which `--agent NAME` reads): the test's own.
    env.update(
        {
            "ACP_NOTEBOOK_DEMO_SPEED": "0",
            "XDG_CONFIG_HOME": str(xdg),
            "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
            **extra,
        }
    )
    return env


class RecordingClient(NotebookClient):  # type: ignore[misc]
    """A NotebookClient that also keeps every iopub message it processed, in order."""

    def __init__(
        self,
        *args: Any,
        on_message: Callable[[int, dict[str, Any]], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.on_message = on_message  # called with each message as it is processed
        self.messages: list[tuple[int, dict[str, Any]]] = []  # (cell index, message)
        self.replies: dict[int, dict[str, Any]] = {}  # cell index -> execute_reply content
        if self.on_cell_executed is None:
            self.on_cell_executed = self._keep_reply

    def _keep_reply(
        self, cell: NotebookNode, cell_index: int, execute_reply: dict[str, Any] | None
    ) -> None:
        if execute_reply is not None:
            self.replies[cell_index] = execute_reply["content"]

    def process_message(self, msg: dict[str, Any], cell: NotebookNode, cell_index: int) -> Any:
        self.messages.append((cell_index, msg))
        if self.on_message is not None:
            self.on_message(cell_index, msg)
        return super().process_message(msg, cell, cell_index)

    def of_type(self, msg_type: str, cell_index: int | None = None) -> list[dict[str, Any]]:
        return [
            m
            for i, m in self.messages
            if m["msg_type"] == msg_type and (cell_index is None or i == cell_index)
        ]


def make_client(
    nb: NotebookNode, tmp_path: Path, *, timeout: int = 60, **kwargs: Any
) -> RecordingClient:
    return RecordingClient(
        nb,
        kernel_name="python3",
        timeout=timeout,
        startup_timeout=60,
        resources={"metadata": {"path": str(tmp_path)}},
        **kwargs,
    )


@contextmanager
def in_shared_kernel(
    kernel: SharedKernel, nb: NotebookNode, tmp_path: Path, env: dict[str, str], **kwargs: Any
) -> Iterator[RecordingClient]:
    """A client of the shared `kernel` for a test that drives the cells itself (its
    `async_setup_kernel` finds the kernel started): the kernel reset before, and after."""
    kernel.reset(tmp_path, env)
    client = make_client(nb, tmp_path, km=kernel.km, **kwargs)
    try:
        yield client
    finally:
        if client.kc is not None:
            client.kc.stop_channels()  # nbclient leaves the client of a kernel it does not own
        # Its agents stopped as a kernel's shutdown stops them, before the test goes on.
        kernel.reset(tmp_path, env)


def execute(
    cells: NotebookNode | Iterable[str],
    tmp_path: Path,
    *,
    timeout: int = 60,
    env: dict[str, str] | None = None,
    client_out: list[RecordingClient] | None = None,
    kernel: SharedKernel | None = None,
    **kwargs: Any,
) -> NotebookNode:
    """Execute the notebook (or cell sources) in tmp_path; return the notebook as saved to disk.

    In a fresh kernel, or in the test process's shared `kernel` (the fixture), reset before this run
    and after it.
    nbclient's `CellExecutionError` propagates unless `allow_errors=True` is passed. Pass a list
    as `client_out` to get the client (its iopub messages) back.
    """
    nb = cells if isinstance(cells, NotebookNode) else new_nb(*cells)
    env = env or kernel_env(tmp_path)
    if kernel is None:
        client = make_client(nb, tmp_path, timeout=timeout, **kwargs)
        if client_out is not None:
            client_out.append(client)
        client.execute(env=env)
    else:
        with in_shared_kernel(kernel, nb, tmp_path, env, timeout=timeout, **kwargs) as client:
            if client_out is not None:
                client_out.append(client)
            client.execute(env=env)
    path = tmp_path / "executed.ipynb"
    nbformat.write(nb, path)  # what a headless run saves; read back so the tests see that
    saved = nbformat.read(path, as_version=4)
    nbformat.validate(saved)
    return saved


def scripted(*flags: str) -> str:
    """The `--agent` value that runs the scripted test agent with these flags."""
    return shlex.quote(shlex.join(agent_command(*flags)))


# -- reading outputs ------------------------------------------------------------------------------


def outputs(cell: NotebookNode, mime: str | None = None) -> list[NotebookNode]:
    """The cell's outputs; with `mime`, only display/result outputs that carry that type."""
    outs = list(cell.get("outputs", []))
    if mime is None:
        return outs
    return [o for o in outs if mime in o.get("data", {})]


def data(cell: NotebookNode, mime: str) -> list[Any]:
    return [o["data"][mime] for o in outputs(cell, mime)]


def transcripts(cell: NotebookNode) -> list[dict[str, Any]]:
    return data(cell, MIME_TURN)


def answer(transcript: Any) -> str:
    """A saved transcript's answer as its readers rebuild it (`TurnResult.from_json`): the record
    keeps it in the parts only (`protocol.turn.compact`)."""
    return TurnResult.from_json(transcript).text


def text(cell: NotebookNode) -> str:
    """Everything a terminal would show: streams, text/plain and error tracebacks."""
    parts: list[str] = []
    stream = None  # the stream the last part is text of: the kernel cuts a stream anywhere (its
    # flush timer can send "B" and " echo: ..." of one print apart), the page shows it whole
    for out in outputs(cell):
        if out["output_type"] == "stream":
            if stream == out.get("name") and parts:
                parts[-1] += out["text"]
            else:
                parts.append(out["text"])
            stream = out.get("name")
            continue
        stream = None
        if out["output_type"] == "error":
            parts.append("\n".join(out["traceback"]))
        else:
            parts.append(str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def errors(nb: NotebookNode) -> list[tuple[int, NotebookNode]]:
    return [
        (i, o) for i, c in enumerate(nb.cells) for o in outputs(c) if o["output_type"] == "error"
    ]


# -- observing processes outside the test -----------------------------------------------------


def process_gone(pid: int) -> bool:
    """No such process, or only a zombie left (a container's init may not reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}
