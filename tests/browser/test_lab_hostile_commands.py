"""A hostile agent's strings in `%agent status` and `%agent sessions`, rendered by JupyterLab.

The same payloads and cells as tests/hostile/test_hostile_commands.py (each calls `alert` if it
runs), in a real JupyterLab in headless Chromium. A last cell shows HTML whose handler calls
`alert('control')`: trusted output runs it, so the page's dialogs prove the detection works, and
it must be the only dialog. Skipped like tests/browser/test_lab.py without a browser.
"""

from __future__ import annotations

import json

import pytest

from tests.browser.test_lab import POLL, open_and_run, output, shoot
from tests.hostile.test_hostile_commands import config_options, session_files, titles_cell
from tests.hostile_payloads import ALERTS, encodable
from tests.nb_util import scripted

pytestmark = [pytest.mark.browser]

# A lone surrogate fails a whole display on main (it cannot be encoded): kept out of the cells
# that show the markup payloads together, so they are rendered and tried.
MARKUP = encodable(ALERTS)

CONTROL = (
    "from IPython.display import HTML\n"
    'HTML(\'<img src="x-control" onerror="alert(&quot;control&quot;)">\')'
)


def test_agent_strings_run_no_script_in_lab(page, lab) -> None:
    root = lab[2]
    # Every cell rendered, not only those in view: an output never drawn runs nothing either.
    tracker = root / ".s/@jupyterlab/notebook-extension"
    tracker.mkdir(parents=True, exist_ok=True)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    state = root / "hostile-state"
    session_files(state, MARKUP)
    lister = scripted("--list", "--state-dir", str(state))
    options = config_options(MARKUP)
    settings = [
        {"update": {"sessionUpdate": "config_option_update", "configOptions": options}},
        {
            "update": {
                "sessionUpdate": "usage_update",
                "used": 5,
                "size": 10,
                "cost": {"amount": 1, "currency": "\\`<img src=x onerror=alert(1)>`"},
            }
        },
    ]
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_and_run(
        page,
        lab,
        "hostile.ipynb",
        f"%%agent --quiet --new --agent {scripted('--modes')}\n#script {json.dumps(settings)}",
        "%agent status",
        f"%agent sessions --agent {lister} --all -n 1000",
        f"PAYLOADS = {ALERTS!r}",
        titles_cell(scripted()),
        CONTROL,
    )
    # The control cell runs last, unless Run All stopped at an error.
    page.wait_for_function(
        polling=POLL,
        expression="() => document.querySelectorAll('.jp-Notebook .jp-Cell')[5]"
        "?.querySelector('.jp-OutputArea img') || document.querySelector("
        "'.jp-Notebook [data-mime-type=\"application/vnd.jupyter.stderr\"]')",
        timeout=180_000,
    )
    page.wait_for_load_state("networkidle")
    shoot(page, "hostile")
    assert [d for d in dialogs if d != "control"] == [], dialogs  # no agent script ran
    failed = page.locator('.jp-Notebook [data-mime-type="application/vnd.jupyter.stderr"]')
    assert failed.count() == 0, failed.first.inner_text()
    assert dialogs == ["control"], dialogs  # and the detection works
    output(page, 2).locator("table").wait_for()
    assert "onerror=alert(1)" in output(page, 1).first.inner_text()  # shown, as text
    assert "onerror=alert(1)" in output(page, 4).nth(1).inner_text()
