"""Shared fixtures: the client-core tests' agent, and the JupyterLab tests' server and browser.

Per test session (per xdist worker): one JupyterLab server (`lab_server`; `lab` leaves it clean
for the next module) and one Chromium (`browser`), in which each test's `page` gets a browser
context of its own, or the tests of the modules marked `shared_page` share one page. The server
dies with the worker even if it is SIGKILLed.

Without /usr/bin/chromium (or the playwright package) the browser tests skip, except in CI (env
CI set), where a missing browser is a failure.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.client.session import Session
from tests.client_helpers import Agent
from tests.jupyter_servers import JUPYTER_LAB, jupyter_server
from tests.shared_kernel import SharedKernel

# jsonschema (imported by nbformat) imports rfc3987_syntax when installed, which builds ~38 Lark
# parsers at import: 4 s of CPU in every test process (each xdist worker), for the "iri" format
# checker that neither nbformat's schema nor the project uses (upstream: jsonschema issue 1428).
# None in sys.modules makes that import fail, and jsonschema then goes without that checker.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]

CHROMIUM = "/usr/bin/chromium"
#: A JupyterLab server: its URL, token and root directory.
Lab = tuple[str, str, Path]


def pytest_configure(config: pytest.Config) -> None:
    """The kernels the tests start (and everything else below this process) keep their IPython
    profile in a directory of this process's, not in the developer's ~/.ipython, and the
    kernels their history in memory: every kernel of every worker stored each cell in that one
    SQLite file (it had grown to 67 MB), committed to disk, and each reset of a shared kernel
    ended and began a history session in it (0.37 s of wall time a reset, 0.28 s without)."""
    ipython_dir = Path(tempfile.mkdtemp(prefix="acpnb-ipython-"))
    profile = ipython_dir / "profile_default"
    profile.mkdir()
    kernel_config = {"HistoryManager": {"hist_file": ":memory:"}}
    (profile / "ipython_kernel_config.json").write_text(json.dumps(kernel_config))
    (profile / "ipython_config.json").write_text(json.dumps(kernel_config))
    os.environ["IPYTHONDIR"] = str(ipython_dir)
    # Removed at the process's exit, after IPython's own exit handler (registered later, run
    # first), which ends the history session of a shell made in this process (its file here).
    atexit.register(shutil.rmtree, ipython_dir, ignore_errors=True)


#: Each folder's bound on one test (pytest-timeout), under CI's load of four workers on two cores:
#: pure tests, the client on a scripted agent, real kernels (and attacks that need them), a
#: browser. A test that needs another bound says so with its own mark and the reason beside it.
TIMEOUT_OF_FOLDER = {"unit": 60, "client": 120, "hostile": 240, "kernel": 240, "browser": 240}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        folder = item.path.relative_to(tests).parts[0] if item.path.is_relative_to(tests) else ""
        if folder == "browser" and item.get_closest_marker("browser") is None:
            item.add_marker(pytest.mark.browser)  # what pytest_ignore_collect relies on
        if item.get_closest_marker("timeout") is not None:
            continue
        if folder in TIMEOUT_OF_FOLDER:
            item.add_marker(pytest.mark.timeout(TIMEOUT_OF_FOLDER[folder]))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/browser/ is not even imported when the marker expression (`-m`) leaves out every
    test marked `browser`, whatever its other marks, as the fast tier's "not browser and not
    real_agent" does: its modules import JupyterLab's server, nbconvert and the widgets, ~1.7 s
    of CPU in each worker, for tests deselected after. Every test there is marked `browser`
    (pytest_collection_modifyitems adds it to one that is not)."""
    if collection_path != Path(__file__).parent / "browser":
        return None
    return True if _no_browser_test(config) else None


def _no_browser_test(config: pytest.Config) -> bool:
    """The marker expression (`-m`) leaves out every test marked `browser`."""
    expression = config.getoption("markexpr")
    if not expression:
        return False
    from _pytest.mark.expression import Expression  # what `-m` evaluates with

    compiled = Expression.compile(expression)
    # False for a browser test with no other mark, and for one with every mark: false for all
    # the expressions that exclude `browser` (a negation or a conjunction with `not browser`).
    only_browser = compiled.evaluate(lambda name, **_: name == "browser")
    every_mark = compiled.evaluate(lambda name, **_: True)
    return not (only_browser or every_mark)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject.toml's addopts): six workers on two cores without the browser
    tests, four with them. The suite mostly waits (kernels, agents, timeouts), so more workers
    fill the cores better: the fast tier took 130 s with six, 144 to 160 s with four, for the
    same CPU. A browser worker runs JupyterLab and Chromium of its own: four is what two cores
    hold without starving them."""
    return 6 if _no_browser_test(config) else 4


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> Agent:
    """The scripted agent of one test: a subprocess, unless the test or its module is marked
    `pytest.mark.scripted_agent("in_process")` (the closest mark wins: a test of such a module
    that needs a real process says `scripted_agent("process")`)."""
    mark = request.node.get_closest_marker("scripted_agent")
    where = mark.args[0] if mark is not None else "process"
    if where not in ("process", "in_process"):
        raise ValueError(f"scripted_agent mark: 'process' or 'in_process', not {where!r}")
    return Agent(tmp_path, in_process=where == "in_process")


@pytest.fixture
async def session(agent: Agent) -> AsyncIterator[Session]:
    """A new session of the test's scripted agent, on a client of its own, closed after the test
    (bounded by the test's timeout). A test that passes the client options or flags, or asserts
    after the client closed, says `async with agent.session(...) as session:` instead."""
    async with agent.client() as client:
        yield await client.new_session()


@pytest.fixture(scope="session")
def kernel() -> Iterator[SharedKernel]:
    """One kernel for the tests of the test process (the xdist worker) that take it, to pass to
    tests/nb_util.py's `execute`: reset there before each run, and after it, to what a fresh
    kernel is to a test (tests/shared_kernel.py says what the reset undoes)."""
    shared = SharedKernel()
    yield shared
    shared.shutdown()


def _browser_problem() -> str | None:
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e .[test])"
    return None


@pytest.fixture(scope="session")
def browser_ok() -> None:
    problem = _browser_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests: {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="session")
def lab_server(browser_ok: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One JupyterLab server for the test session: starting one costs seconds of a loaded CPU."""
    root = tmp_path_factory.mktemp("lab")
    options = ("--LabApp.news_url=None", "--LabApp.expose_app_in_browser=True")
    with jupyter_server(root, JUPYTER_LAB, *options) as (base, token):
        yield base, token, root


@pytest.fixture(scope="module")
def lab(lab_server: Lab) -> Iterator[Lab]:
    """The shared server, left as a module found it: its kernels shut down, its notebook
    settings (windowing, output limits) removed, so the next module starts clean."""
    yield lab_server
    base, token, root = lab_server
    auth = {"Authorization": f"token {token}"}
    with urllib.request.urlopen(urllib.request.Request(f"{base}/api/kernels", headers=auth)) as r:
        kernels = json.load(r)
    for kernel in kernels:
        request = urllib.request.Request(
            f"{base}/api/kernels/{kernel['id']}", headers=auth, method="DELETE"
        )
        urllib.request.urlopen(request, timeout=30).close()
    shutil.rmtree(root / ".s/@jupyterlab/notebook-extension", ignore_errors=True)


#: The event loop Playwright's sync API runs in, while the session's browser is up.
_playwright_loop: list[Any] = []


def _mark_playwright_loop(item: pytest.Item) -> None:
    """Playwright's loop is this thread's running loop for a browser test, none for the others.

    Playwright's sync API (1.65) leaves its loop marked as the thread's running loop between its
    calls (it runs in a greenlet that never returns from `run_forever`), and its calls need it so.
    Left marked, every `asyncio.run` or `anyio.run` after a worker's first browser test failed
    ("cannot be called from a running event loop"), and so did a module-scoped async fixture's
    runner (set up before any function-scoped fixture could unmark the loop). So it is set for
    each phase of each test: setup and teardown include the module fixtures' own."""
    import asyncio

    uses_browser = "browser" in getattr(item, "fixturenames", ())
    asyncio._set_running_loop(_playwright_loop[0] if _playwright_loop and uses_browser else None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _mark_playwright_loop(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    _mark_playwright_loop(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    _mark_playwright_loop(item)


@pytest.fixture(scope="session")
def browser(browser_ok: None) -> Iterator[Any]:
    """One headless Chromium per test session (per xdist worker), not one per test."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        import asyncio

        _playwright_loop[:] = [asyncio._get_running_loop()]
        yield browser
        _mark_for_teardown()
        browser.close()
    _playwright_loop.clear()


def _mark_for_teardown() -> None:
    """A session fixture of the browser's is torn down after the session's last test, which may
    not have used the browser (its phases left Playwright's loop unmarked): mark it again."""
    import asyncio

    if _playwright_loop:
        asyncio._set_running_loop(_playwright_loop[0])


@pytest.fixture(scope="session")
def _session_lab_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    _mark_for_teardown()
    context.close()


@pytest.fixture(scope="module")
def lab_page(_session_lab_page: Any, lab: Lab) -> Iterator[Any]:
    """The page of the modules marked `pytest.mark.shared_page`, made as `page` makes one: one
    per test session, so that a module opens its first notebook in the JupyterLab a previous
    module loaded (~4 s of CPU less a module). Each module leaves it with no document open
    (their kernels shut down, before `lab` checks that none runs); a listener a test adds to it
    is removed by that test."""
    from tests.browser.test_lab import CLOSE_ALL

    yield _session_lab_page
    base = lab[0]
    if _session_lab_page.url.startswith(f"{base}/") and not _session_lab_page.evaluate(CLOSE_ALL):
        _session_lab_page.goto("about:blank")  # could not close: the next module loads afresh


@pytest.fixture
def page(request: pytest.FixtureRequest, browser: Any) -> Iterator[Any]:
    """A fresh page (1200x900, 30 s default timeout) in a browser context of its own: no
    cookies, storage or cache shared with another test.

    In a module marked `pytest.mark.shared_page`, the session's one page instead (`lab_page`):
    its tests open their notebooks with tests/browser/test_lab.py's `open_notebook`, which closes
    the previous one (its kernel shut down) and opens the next in the JupyterLab booted there, ~4 s
    of CPU less a test. For tests whose subject is the notebook, not a fresh browser."""
    if request.node.get_closest_marker("shared_page") is not None:
        yield request.getfixturevalue("lab_page")
        return
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()
