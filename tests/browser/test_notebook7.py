"""The agent inserts a cell in Notebook 7 (issue 22): the same extension, another front-end.

Notebook 7 is built on JupyterLab's components and loads the same prebuilt extensions; its
notebook page has one notebook, whose cells the extension changes as in JupyterLab. Skipped
where the `notebook` package (7 or later) is not installed.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.agents.script import script
from tests.browser.test_lab import POLL
from tests.browser.test_lab_view import AGENT
from tests.orphans import dies_with_parent

pytestmark = pytest.mark.browser

#: The notebook page's notebook (Notebook 7 exposes its app as JupyterLab's does).
NB = "window.jupyterapp.shell.currentWidget.content"


def _notebook7() -> bool:
    try:
        from notebook import __version__
    except ImportError:
        return False
    return int(__version__.split(".")[0]) >= 7


@pytest.fixture(scope="module")
def notebook7(browser_ok: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Notebook 7 server of this module's own (the session's is JupyterLab)."""
    if not _notebook7():
        pytest.skip("Notebook 7 is not installed (pip install 'notebook>=7')")
    root = tmp_path_factory.mktemp("nb7")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=f"{root}/.c",
        JUPYTER_RUNTIME_DIR=f"{root}/.r",
        JUPYTERLAB_SETTINGS_DIR=f"{root}/.s",
        JUPYTERLAB_WORKSPACES_DIR=f"{root}/.w",
        XDG_CONFIG_HOME=f"{root}/.xdg",
        ACP_NOTEBOOK_DEMO_SPEED="1",
    )
    env.pop("ACP_NOTEBOOK_AGENT", None)
    log = open(root / "nb7.log", "w")  # closed in the teardown
    code = "import sys; sys.argv[0] = 'jupyter-notebook'; from notebook.app import main; main()"
    proc = subprocess.Popen(
        dies_with_parent(
            [
                sys.executable,
                "-c",
                code,
                "--no-browser",
                "--allow-root",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}",
                "--JupyterNotebookApp.expose_app_in_browser=True",
            ]
        ),
        env=env,
        start_new_session=True,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:  # an external process: poll its status endpoint until it answers
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.close()
                pytest.fail("Notebook 7 did not start:\n" + (root / "nb7.log").read_text())
            time.sleep(0.1)
    yield base, token, root
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    log.close()


def test_an_agent_inserts_a_cell_in_notebook_7(page: Any, notebook7: Any) -> None:
    base, token, root = notebook7
    call = {"name": "insert_cell", "arguments": {"source": "from_nb7 = 7"}}
    agent = f"%%agent --agent {AGENT} --session n7\n{script({'mcp': 'kernel', 'calls': [call]})}"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(agent)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, Path(root) / "seven.ipynb")
    page.goto(f"{base}/notebooks/seven.ipynb?token={token}")
    page.wait_for_function(
        """() => {
          const panel = window.jupyterapp?.shell.currentWidget;
          const kernel = panel?.sessionContext?.session?.kernel;
          return panel?.content?.model?.cells.length === 1 && kernel?.status === 'idle'
            && kernel.connectionStatus === 'connected';
        }""",
        polling=POLL,
        timeout=90_000,
    )
    page.evaluate(
        f"() => {{ {NB}.activeCellIndex = 0;"
        " window.jupyterapp.commands.execute('notebook:run-cell'); }"
    )
    allow = page.locator(".acpnb-perm button.acpnb-permission-option", has_text="Allow")
    allow.first.click(timeout=90_000)
    page.wait_for_function(f"() => {NB}.model.cells.length === 2", polling=POLL, timeout=60_000)
    inserted = page.evaluate(f"() => {NB}.model.cells.get(1).sharedModel.getSource()")
    assert inserted == "from_nb7 = 7"
    text = page.locator(".jp-Cell").first.locator(".jp-OutputArea-output").first
    text.get_by_text("inserted as cell 2").first.wait_for(timeout=60_000)
