"""What a person sees in JupyterLab: headless Chromium driven by Playwright.

A private JupyterLab server (own config, settings, runtime and workspace dirs, a token) runs the
project's kernel; the demo agent streams at its normal speed. Screenshots go to
test-artifacts/lab-*.png (gitignored). See shared/reference/jupyter-test-recipe.md.

Without /usr/bin/chromium (or the playwright package) the tests skip, except in CI (env CI set),
where a missing browser is a failure.
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
from pathlib import Path

import nbformat
import pytest

from tests.nb_util import new_nb

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent.parent / "test-artifacts"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def _browser_problem() -> str | None:
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e .[test])"
    return None


@pytest.fixture(scope="module")
def browser_ok() -> None:
    problem = _browser_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests: {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="module")
def lab(browser_ok, tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=f"{root}/.c", JUPYTER_RUNTIME_DIR=f"{root}/.r",
               JUPYTERLAB_SETTINGS_DIR=f"{root}/.s", JUPYTERLAB_WORKSPACES_DIR=f"{root}/.w",
               XDG_CONFIG_HOME=f"{root}/.xdg", ACP_NOTEBOOK_DEMO_SPEED="1")
    for key in ("ACP_NOTEBOOK_AGENT", "ACP_NOTEBOOK_AGENTS_FILE"):
        env.pop(key, None)
    settings = root / ".s/@jupyterlab/apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    log = open(root / "lab.log", "w")  # closed in the teardown
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
         "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--LabApp.news_url=None", "--LabApp.expose_app_in_browser=True"],
        env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:  # an external process: poll its status endpoint until it answers
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.close()
                pytest.fail("JupyterLab did not start:\n" + (root / "lab.log").read_text())
            time.sleep(0.1)
    yield base, token, root
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    log.close()


@pytest.fixture
def page(browser_ok):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.set_default_timeout(30_000)
        yield page
        browser.close()


READY = """() => { const w = window.jupyterapp?.shell.currentWidget;
  const k = w?.sessionContext?.session?.kernel;
  return !!(w?.sessionContext?.isReady && k?.connectionStatus === 'connected'
            && k.status === 'idle'); }"""

# Records every distinct state of the first cell's output while it changes: a partial answer is
# then observed from the page's own events, not by racing the stream with polls.
OBSERVE = """() => {
  window.__snaps = [];
  const take = () => {
    const out = document.querySelector('.jp-Notebook .jp-Cell .jp-OutputArea');
    if (!out) return;
    const answers = out.querySelectorAll('.acpnb-answer');
    const snap = {answer: answers.length ? answers[answers.length - 1].innerText : '',
                  running: !!out.querySelector('.acpnb-running')};
    const last = window.__snaps[window.__snaps.length - 1];
    if (!last || last.answer !== snap.answer || last.running !== snap.running)
      window.__snaps.push(snap);
  };
  new MutationObserver(take).observe(document.body,
    {subtree: true, childList: true, characterData: true});
}"""


def open_and_run(page, lab, name: str, *cells: str) -> None:
    base, token, root = lab
    nbformat.write(new_nb(*cells), root / name)
    page.goto(f"{base}/doc/tree/{name}?token={token}&reset")
    page.wait_for_function(READY, timeout=60_000)
    page.evaluate(OBSERVE)
    # Not awaited: a command that waits for a kernel dialog would hang page.evaluate.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def output(page, index: int = 0):
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output")


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"lab-{name}.png"), full_page=True)


def test_turn_streams_asks_permission_and_edits(page, lab) -> None:
    root = lab[2]
    notes = root / "demo_notes.md"
    if notes.exists():
        notes.unlink()
    open_and_run(page, lab, "turn.ipynb",
                 "%%agent\nPlease add a line about JupyterLab to the notes.")
    out = output(page)

    # The edit waits for a person: its options are buttons, and the turn is still running.
    allow = out.locator("button.acpnb-permission-option", has_text="Allow").filter(
        has_not_text="Always")
    allow.wait_for()
    assert out.locator(".acpnb-running").count() == 1
    assert out.locator("button.acpnb-permission-option").count() == 4
    out.locator("details.acpnb-tool", has_text="Edit demo_notes.md").first.wait_for()
    assert page.get_by_text("Loading widget").count() == 0
    shoot(page, "permission")
    allow.click()

    # The turn ends: the record replaces the live view, the controls are gone.
    done = out.locator(".acpnb-answer", has_text="a walk through a coding-agent turn")
    done.wait_for()
    page.wait_for_function("() => !document.querySelector('.jp-Notebook .acpnb-running')")
    edit = out.locator("details.acpnb-tool", has_text="Edit demo_notes.md")
    assert "completed" in edit.first.get_attribute("class")
    assert out.locator(".acpnb-chosen", has_text="Allow").count() >= 1
    assert out.locator("button").count() == 0  # Stop and permission buttons were closed
    assert "JupyterLab" in notes.read_text()  # written through the client, as allowed

    snaps = page.evaluate("() => window.__snaps")
    final = snaps[-1]["answer"]
    assert not snaps[-1]["running"] and "coding-agent turn" in final
    partial = {s["answer"] for s in snaps if s["running"] and 0 < len(s["answer"]) < len(final)}
    assert len(partial) >= 2, f"no partial answer was shown while streaming: {snaps}"
    assert page.get_by_text("Loading widget").count() == 0
    out.locator(".acpnb-answer").last.scroll_into_view_if_needed()
    shoot(page, "turn")


def test_stop_button_cancels_a_slow_turn(page, lab) -> None:
    open_and_run(page, lab, "stop.ipynb",
                 "%%agent --session slow\n/slow tell me a long story",
                 "print('next cell ran after', _.stop_reason)")
    out = output(page)
    stop = out.locator(".acpnb-controls button", has_text="Stop")
    stop.wait_for()
    out.locator(".acpnb-running").wait_for()
    out.locator(".acpnb-thought, .acpnb-plan").first.wait_for()  # something streamed
    started = time.monotonic()
    stop.click()

    out.locator(".acpnb-alert", has_text="Cancelled").wait_for()
    page.wait_for_function("() => !document.querySelector('.jp-Notebook .acpnb-running')")
    assert time.monotonic() - started < 15  # not the ~20 s the slow turn takes
    assert out.locator("button").count() == 0
    # Run All went on: the next cell waited for the turn, which ended as cancelled, not failed.
    output(page, 1).filter(has_text="next cell ran after cancelled").wait_for()
    assert page.locator(".jp-Notebook [data-mime-type='application/vnd.jupyter.stderr']",
                        has_text="TurnFailed").count() == 0
    shoot(page, "stop")
