"""`import acp_notebook.protocol` (and every module in it) stays free of anyio and IPython.

Run in a fresh interpreter: this test process has long imported both.
"""

from __future__ import annotations

import json
import subprocess
import sys

CHECK = """
import json, pkgutil, sys
import acp_notebook.protocol
import acp_notebook.protocol as pkg
modules = [m.name for m in pkgutil.iter_modules(pkg.__path__)]
for name in modules:
    __import__("acp_notebook.protocol." + name)
heavy = sorted(m for m in sys.modules
               if m.split(".")[0] in ("anyio", "IPython", "ipykernel", "ipywidgets"))
print(json.dumps({"modules": modules, "heavy": heavy}))
"""


def test_protocol_does_not_import_anyio_or_ipython() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=50, check=True
    )
    report = json.loads(out.stdout)
    assert {"content", "fold", "jsonrpc", "mutations", "turn", "state"} <= set(report["modules"])
    assert report["heavy"] == []


def test_the_guard_can_fail() -> None:
    # The same check notices anyio once something imports it.
    out = subprocess.run(
        [sys.executable, "-c", "import anyio\n" + CHECK],
        capture_output=True,
        text=True,
        timeout=50,
        check=True,
    )
    assert "anyio" in json.loads(out.stdout)["heavy"]
