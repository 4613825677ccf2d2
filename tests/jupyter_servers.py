"""A Jupyter server of the browser tests' own, JupyterLab or Notebook 7, in a directory of its own.

Its configuration, runtime, settings and workspaces are in `root`; its news and update checks
are off, and so is JupyterLab's build check (each page load asked the server whether the app
needs a rebuild: it hashed the installed extensions and ran node, ~0.4 s of CPU a load, and the
browser tests load JupyterLab ~30 times). It dies with the test process even when that is
SIGKILLed (tests/orphans.py), and its kernels with it.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.orphans import dies_with_parent

# What `jupyter lab` and `jupyter notebook` run (their scripts), without importing
# rfc3987_syntax, which builds ~38 Lark parsers at import (4 s of CPU; see tests/conftest.py).
JUPYTER_LAB = (
    "import sys; sys.modules['rfc3987_syntax'] = None; sys.argv[0] = 'jupyter-lab'; "
    "from jupyterlab.labapp import main; sys.exit(main())"
)
JUPYTER_NOTEBOOK = (
    "import sys; sys.modules['rfc3987_syntax'] = None; sys.argv[0] = 'jupyter-notebook'; "
    "from notebook.app import main; sys.exit(main())"
)
_PAGE_CONFIG = {"buildCheck": False, "buildAvailable": False}


@contextmanager
def jupyter_server(root: Path, program: str, *options: str) -> Iterator[tuple[str, str]]:
    """Runs `program` (`JUPYTER_LAB` or `JUPYTER_NOTEBOOK`) with `options` in `root` until the
    block ends; yields its URL and token once it answers. Fails the test, with its log, if it
    does not start within 60 s."""
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
    for key in ("ACP_NOTEBOOK_AGENT", "ACP_NOTEBOOK_AGENTS_FILE"):
        env.pop(key, None)
    settings = root / ".s/@jupyterlab/apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}'
    )
    labconfig = root / ".c/labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(json.dumps(_PAGE_CONFIG))
    log_path = root / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            dies_with_parent(  # a killed worker runs no teardown; the server must not outlive it
                [
                    sys.executable,
                    "-c",
                    program,
                    "--no-browser",
                    "--allow-root",
                    "--ip=127.0.0.1",
                    f"--port={port}",
                    "--ServerApp.port_retries=0",
                    f"--IdentityProvider.token={token}",
                    f"--ServerApp.root_dir={root}",
                    *options,
                ]
            ),
            env=env,
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_for(proc, base, token, log_path)
            yield base, token
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


def _wait_for(proc: subprocess.Popen[bytes], base: str, token: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:  # an external process: poll its status endpoint until it answers
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1)
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Jupyter server did not start:\n{log.read_text()}")
            time.sleep(0.1)
