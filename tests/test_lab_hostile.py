"""A hostile agent cannot run script in JupyterLab: what a browser actually runs.

The notebook of tests/test_hostile.py, for every payload class at once, in JupyterLab in headless
Chromium: full turns, a light turn per payload (session title, mode, config options, currency)
with `%agent status` after each, `%agent sessions`, turns with a hostile stop reason and error,
a chat widget, and a permission request per class. Every payload, if it ran, sets
`window.__acp_pwned` (an init script records each set, in every frame, in `__acp_hits`), and any
alert/confirm/prompt is recorded by `page.on("dialog")`. Checked after the run, after displaying
each saved output's `text/markdown` alone and its `text/html` alone, and after reopening both
saved notebooks (JupyterLab trusts them: their outputs render unsanitised again). A permission
request stays pending until the test clicks Reject: the agent logs what it was answered.
Screenshots: test-artifacts/lab-hostile-*.png.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.hostile_payloads import CLASSES, by_class
from tests.nb_util import new_nb
from tests.test_lab import ARTIFACTS, POLL, READY, command, output

AGENT = Path(__file__).parent / "agents" / "hostile_agent.py"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

TRAP = """
(() => {
  if (window !== window.top) return;  // frames set top.__acp_pwned: one trap, in the page
  window.__acp_hits = [];
  let value;
  Object.defineProperty(window, '__acp_pwned', {configurable: false,
    get() { return value; },
    set(v) { value = v; window.__acp_hits.push(String(v)); }});
})();
"""

# Rendering done: every image loaded or failed (an onerror has been queued), then one task and
# one frame later every handler queued by that rendering has run.
SETTLED = "() => Array.from(document.images).every(i => i.complete)"
TICK = "() => new Promise(r => setTimeout(() => requestAnimationFrame(() => r(true)), 0))"


def agent_argv(cls: str, log: Path) -> list[str]:
    return [sys.executable, str(AGENT), "--payloads", cls, "--log", str(log)]


def agent_line(cls: str, log: Path) -> str:
    return shlex.quote(shlex.join(agent_argv(cls, log)))


def guarded(magic: str, line: str, body: str) -> str:
    """A turn that fails, run so that Run All goes on: the traceback is still shown."""
    return (
        f"try:\n    await get_ipython().run_cell_magic({magic!r}, {line!r}, {body!r})\n"
        "except Exception:\n    get_ipython().showtraceback()"
    )


def hostile_cells(log: Path) -> list[str]:
    cells = ["%config AcpNotebook.terminal = True"]
    for cls in CLASSES:
        agent = agent_line(cls, log)
        line = f"--agent {agent} --session {cls}"
        cells += [
            f"%%agent {line}\nturn 0",
            "from IPython.display import display\n"
            f"for k in range({len(by_class(cls))}):\n"
            f"    display(await get_ipython().run_cell_magic('agent', {line + ' -q'!r}, "
            "f'title {k}'))\n"
            f"    await get_ipython().run_line_magic('agent', 'status -s {cls}')",
            f"%agent sessions -a {agent}",
            guarded("agent", line, "stop 1"),
            guarded("agent", line, "fail 2"),
            "import acp_notebook\n"
            "from acp_notebook.chat.widget import ChatWidget\n"
            f"async with acp_notebook.connect({agent_argv(cls, log)!r}) as c:\n"
            "    chat = ChatWidget(await c.new_session())\n"
            "    display(chat.box)\n"
            "    for prompt in ('turn 0', 'title 4', 'fail 5'):\n"
            "        await chat.send(prompt)",
        ]
    for cls in CLASSES:  # last: each waits for the test to click
        cells += [
            f"%%agent --agent {agent_line(cls, log)} --session {cls}\npermission 3",
            f"%agent status -s {cls}",
        ]
    return [*cells, "print('HOSTILE-DONE')"]


class Watch:
    """Scripts that ran (the trap's hits) and dialogs that opened, per page load."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        page.add_init_script(TRAP)
        page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def ran(self, step: str) -> list[str]:
        self.page.wait_for_function(polling=POLL, expression=SETTLED)
        self.page.evaluate(TICK)
        # Each payload once, with how often it ran (live redraws render the same text again).
        hits = [
            f"{pid} x{n}"
            for pid, n in sorted(
                Counter(self.page.evaluate("() => window.__acp_hits || []")).items()
            )
        ]
        shoot(self.page, step)
        dialogs, self.dialogs = self.dialogs, []
        print(f"[lab-hostile] {step}: scripts ran {hits}, dialogs {dialogs}")
        return [f"{step}: {h}" for h in hits] + [f"{step}: dialog {d}" for d in dialogs]


def shoot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"lab-hostile-{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def hostile_lab(lab: Any) -> Any:
    # Every cell in the DOM (no windowing) and every output shown (JupyterLab hides those past
    # 50 in a cell; 0 hid them all here), so each output renders, on screen or not.
    root = lab[2]
    settings = root / ".s/@jupyterlab/notebook-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "tracker.jupyterlab-settings").write_text(
        '{"windowingMode": "none", "maxNumberOutputs": 100000}'
    )
    return lab


def open_nb(page: Any, lab: Any, name: str, *, run: bool) -> None:
    base, token, _ = lab
    page.goto(f"{base}/doc/tree/{name}?token={token}&reset")
    page.wait_for_function(polling=POLL, expression=READY, timeout=60_000)
    if run:  # not awaited: a command that waits for a kernel dialog would hang page.evaluate
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def save(page: Any) -> None:
    command(page, "docmanager:save")
    page.wait_for_function(
        polling=POLL, expression="() => !window.jupyterapp.shell.currentWidget.context.model.dirty"
    )


def alone_bundles(nb: Any) -> list[dict[str, str]]:
    """Each saved Markdown and HTML output on its own, once."""
    seen: set[tuple[str, str]] = set()
    bundles = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            for mime in ("text/markdown", "text/html"):
                value = out.get("data", {}).get(mime)
                if isinstance(value, str) and (mime, value) not in seen:
                    seen.add((mime, value))
                    bundles.append({mime: value})
    return bundles


@pytest.fixture
def shot_on_failure(page: Any) -> Any:
    yield
    shoot(page, "last")


def test_hostile_agent_runs_no_script_in_lab(
    page: Any, hostile_lab: Any, shot_on_failure: None
) -> None:
    _, _, root = hostile_lab
    log = root / "permissions.jsonl"
    watch = Watch(page)
    cells = hostile_cells(log)
    nbformat.write(new_nb(*cells), root / "hostile.ipynb")
    open_nb(page, hostile_lab, "hostile.ipynb", run=True)

    ran: list[str] = []
    for n, cls in enumerate(CLASSES):
        # The request waits for a person: nothing clicked Allow (the buttons and the running
        # turn are still there, and the agent has no answer), then the test rejects it.
        index = next(
            i for i, c in enumerate(cells) if c.endswith("permission 3") and f"--session {cls}" in c
        )
        cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
        buttons = cell.locator("button.acpnb-permission-option")
        buttons.first.wait_for(timeout=300_000)
        ran += watch.ran(f"pending-{cls}")
        assert buttons.count() == 3
        assert cell.locator(".acpnb-running").count() == 1
        assert not log.exists() or len(log.read_text().splitlines()) == n
        buttons.filter(has_text="Reject").click()
    output(page, len(cells) - 1).filter(has_text="HOSTILE-DONE").wait_for(timeout=120_000)
    ran += watch.ran("run")
    decisions = [json.loads(line)["outcome"] for line in log.read_text().splitlines()]
    assert [d.get("optionId") for d in decisions] == ["reject"] * len(CLASSES), decisions
    save(page)

    # Each saved Markdown and HTML output alone: no surrounding record to lean on.
    saved = nbformat.read(root / "hostile.ipynb", as_version=4)
    bundles = alone_bundles(saved)
    assert len(bundles) > 100
    (root / "bundles.json").write_text(json.dumps(bundles))
    nbformat.write(
        new_nb(
            "import json\nfrom IPython.display import display\n"
            "for b in json.load(open('bundles.json')):\n"
            "    display(b, raw=True)\n"
            "print('ALONE-DONE')"
        ),
        root / "alone.ipynb",
    )
    open_nb(page, hostile_lab, "alone.ipynb", run=True)
    try:
        page.locator(".jp-OutputArea-output", has_text="ALONE-DONE").wait_for(timeout=300_000)
    finally:
        shoot(page, "alone-end")
        print("outputs shown:", page.locator(".jp-OutputArea-output").count(), "of", len(bundles))
    ran += watch.ran("alone")
    save(page)

    # Reopened: both notebooks are trusted now, their outputs render as they were.
    for name, marker in (("alone.ipynb", "ALONE-DONE"), ("hostile.ipynb", "HOSTILE-DONE")):
        open_nb(page, hostile_lab, name, run=False)
        page.locator(".jp-OutputArea-output", has_text=marker).wait_for()
        ran += watch.ran(f"reopened-{name.partition('.')[0]}")
    assert not ran, f"script ran in JupyterLab ({len(ran)}):\n" + "\n".join(ran)
