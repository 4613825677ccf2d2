"""Loading the extension is light: it runs at the start of every kernel of an environment where
the package is installed (jupyter-config enables it), so the client, the renderers, ipywidgets
and pydantic wait for the first `%%agent`. Each check runs in a fresh interpreter: the test
process has long imported all of them."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from acp_notebook.display import reprs
from tests.nb_util import execute, transcripts

HEAVY = ("acp_notebook.client.client", "pydantic", "markdown_it", "ipywidgets")

LOAD = f"""
import contextlib, io, json, sys
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "acp_notebook")
ip.run_line_magic("config", "AcpNotebook.timeout = 7")
shown = io.StringIO()
with contextlib.redirect_stdout(shown):
    ip.run_line_magic("config", "AcpNotebook")
from acp_notebook.magics import instance
print(json.dumps({{
    "heavy": [m for m in {HEAVY!r} if m in sys.modules],
    "timeout": instance(ip).timeout,
    "config_help": shown.getvalue(),
    "cell": sorted(ip.magics_manager.magics["cell"]),
    "line": sorted(ip.magics_manager.magics["line"]),
    "post_run_cell": [f.__name__ for f in ip.events.callbacks["post_run_cell"]],
}}))
"""


def run_python(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    found: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_loading_imports_no_client_renderer_widgets_or_pydantic() -> None:
    found = run_python(LOAD)
    assert found["heavy"] == [], found["heavy"]
    # The magics, the configurable (set and described at once) and the hooks are there.
    assert "agent" in found["cell"] and "agent" in found["line"]  # type: ignore[operator]
    assert found["timeout"] == 7.0
    assert "AcpNotebook.request_timeout" in str(found["config_help"])
    assert "Seconds the agent has to answer" in str(found["config_help"])
    assert "note_cell" in found["post_run_cell"]  # type: ignore[operator]


WIDGET_FRONT_END = """
import json
import comm
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "acp_notebook")

class FakeComm:
    def on_msg(self, callback):
        self.callback = callback

manager = comm.get_comm_manager()
fake = FakeComm()
manager.targets["jupyter.widget.control"](fake, {"metadata": {"version": "1.0.0"}})
from ipywidgets import Widget
print(json.dumps({
    "seen": Widget._control_comm is fake,
    "ipywidgets_targets": manager.targets["jupyter.widget.control"]
    == Widget.handle_control_comm_opened,
}))
"""


def test_a_widget_front_end_opening_the_control_comm_is_seen() -> None:
    """JupyterLab opens ipywidgets' control comm when it connects, before any `%%agent`: the
    stand-in target hands the open to ipywidgets, which then takes over its targets."""
    found = run_python(WIDGET_FRONT_END)
    assert found == {"seen": True, "ipywidgets_targets": True}


@pytest.mark.parametrize(("module", "name"), [reprs.HANDLE, *reprs.MASKED_REPRS])
def test_the_client_classes_shown_by_name_exist(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert (cls.__module__, cls.__name__) == (module, name)


def test_a_kernel_starts_light_and_its_first_agent_cell_works(tmp_path: Path) -> None:
    """A kernel loads the extension at start (the venv's ipython_kernel_config.json): nothing
    heavy until the first `%%agent` cell, which then runs the demo agent as always."""
    check = f"import json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    nb = execute(
        [
            check,
            "%%agent\nWhat does this project do?",
            "type(_).__name__, 'acp_notebook.client.client' in __import__('sys').modules",
        ],
        tmp_path,
    )
    before = nb.cells[0].outputs[0]["text"].strip()
    assert json.loads(before) == []
    (record,) = transcripts(nb.cells[1])
    assert record["success"] is True and "demo agent" in record["agent"]
    assert nb.cells[2].outputs[0]["data"]["text/plain"] == "('TurnResult', True)"
