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

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.agents.script import script
from tests.browser.test_lab import ARTIFACTS, POLL, READY
from tests.browser.test_lab_view import AGENT, cell
from tests.jupyter_servers import JUPYTER_NOTEBOOK, jupyter_server
from tests.nb_util import new_nb
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
    options = ("--JupyterNotebookApp.expose_app_in_browser=True",)
    with jupyter_server(root, JUPYTER_NOTEBOOK, *options) as (base, token):
        yield base, token, root


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
