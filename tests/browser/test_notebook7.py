"""Notebook 7: the same extension, another front-end. The agent inserts a cell (issue 22); the
turn view asks with its permission buttons and ends as its record, and the chat sends, asks and
answers (issue 23, item 10).

Notebook 7 is built on JupyterLab's components and loads the same prebuilt extensions; its
notebook page has one notebook, whose cells the extension changes as in JupyterLab. Each test
has a page of its own: the turn view's module is asked for anew, as in a page a person opens.
Skipped where the `notebook` package (7 or later) is not installed. Screenshots:
test-artifacts/nb7-*.png.
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
from tests.browser.test_lab import ARTIFACTS, POLL, READY
from tests.browser.test_lab_view import AGENT, cell
from tests.nb_util import new_nb
from tests.orphans import dies_with_parent
from tests.real_agents import in_ci

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
    if not _notebook7():  # in the test extras: CI installs it, so there a skip is a failure
        why = "Notebook 7 is not installed (pip install 'notebook>=7')"
        if in_ci():
            pytest.fail(f"{why} [CI is set]", pytrace=False)
        pytest.skip(why)
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


RUN_ALL = "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"


def open_in_notebook7(page: Any, notebook7: Any, name: str, *cells: str) -> None:
    """The notebook of `cells`, open in Notebook 7, its kernel idle."""
    base, token, root = notebook7
    nbformat.write(new_nb(*cells), Path(root) / name)
    page.goto(f"{base}/notebooks/{name}?token={token}")
    page.wait_for_function(polling=POLL, expression=READY, timeout=90_000)


def shoot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"nb7-{name}.png"), full_page=True)


def test_a_turn_asks_with_its_buttons_and_ends_as_its_record(page: Any, notebook7: Any) -> None:
    steps = [
        {"say": "I will **edit** the notes."},
        {"permission": {"toolCallId": "e1", "title": "Edit notes.md", "kind": "edit"}},
        {"say": " Edited."},
    ]
    open_in_notebook7(page, notebook7, "nb7-view.ipynb", cell(*steps, session="nb7"))
    page.evaluate(RUN_ALL)
    out = page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-OutputArea-output")
    card = out.locator(".acpnb-tv .acpnb-perm", has_text="Edit notes.md")
    allow = card.locator("button.acpnb-permission-option", has_text="Allow once")
    allow.wait_for(timeout=60_000)
    # The view's stylesheet reached this page too (the loader's, once): buttons coloured by kind.
    colour = allow.evaluate("b => getComputedStyle(b).backgroundColor")
    assert colour not in ("rgba(0, 0, 0, 0)", "transparent")
    assert out.locator(".acpnb-answer strong", has_text="edit").count() == 1
    assert out.locator(".acpnb-running", has_text="waiting for you").count() == 1
    shoot(page, "view-asking")
    allow.click()
    page.wait_for_function(
        polling=POLL,
        expression="""() => { const o = document.querySelector('.jp-Notebook .jp-OutputArea');
          return !!o?.querySelector('.acpnb-turn') && !o.querySelector('.acpnb-tv'); }""",
        timeout=60_000,
    )
    record = out.locator(".acpnb-turn").first
    assert "Edited." in record.inner_text()
    assert "Allow once" in record.locator(".acpnb-perm").inner_text()  # the choice, recorded
    assert page.get_by_text("Error displaying widget").count() == 0
    shoot(page, "view-done")


def test_the_chat_sends_asks_and_answers(page: Any, notebook7: Any) -> None:
    open_in_notebook7(page, notebook7, "nb7-chat.ipynb", "%agent chat -s nb7c")
    page.evaluate(RUN_ALL)
    chat = page.locator(".acpnb-chat")
    box = chat.locator("textarea.acpnb-chat-text")
    box.wait_for(timeout=60_000)
    turns = chat.locator(".acpnb-chat-log .acpnb-turn")
    # The demo agent: /plan answers at once; this one asks before it edits the notes.
    box.fill("/plan a short one")
    box.press("Enter")
    turns.nth(0).locator(".acpnb-answer", has_text="Demo turn 1").wait_for(timeout=60_000)
    box.fill("Please add a line about Notebook 7 to the notes.")
    box.press("Enter")
    allow = turns.nth(1).get_by_role("button", name="Allow", exact=True)
    allow.wait_for(timeout=60_000)
    shoot(page, "chat-asking")
    allow.click()
    page.wait_for_function(
        polling=POLL,
        expression="() => !document.querySelector('.acpnb-chat .acpnb-running')",
        timeout=60_000,
    )
    assert turns.count() == 2
    assert "Allow" in turns.nth(1).locator(".acpnb-perm").inner_text()
    assert box.input_value() == ""
    shoot(page, "chat-done")
