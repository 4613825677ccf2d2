"""One kernel for the tests of a test process (an xdist worker) that take the `kernel` fixture
(tests/conftest.py).

Starting a kernel, then its first agent (the SDK's schema models), costs ~1.3 s of CPU, most of
what a short notebook test costs. Before each test the shared kernel is reset to what a fresh one
is to the test: its agents killed as a kernel's exit kills them, the extension unloaded and loaded
again (a new runtime: its ledger and budget spend, its agents' wire logs, the sessions it stored
or resumed; notices shown once per kernel are shown again), the `%config` of `AcpNotebook` the
kernel started with, the namespace, `In`/`Out`, the execution count, the package's per-kernel
state outside the runtime (the replay, the secrets masked, the last cell error, the turn record
shown in place), the widgets closed, the working directory and the
environment the test's. Tests whose subject is the kernel itself (its start, shutdown,
interrupt, restart) start their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync

# Run silently (no history, the execution count unchanged); the kernel runs top-level await.
_RESET = """
async def _reset_for_a_test():  # locals: ip.reset() below empties the namespace
    import copy, json, os, sys, types
    from acp_notebook.magics import instance
    from acp_notebook.display import masking, reprs
    from acp_notebook.kernel_tools import cell_errors
    from acp_notebook.notebook import replay
    ip = get_ipython()
    # The extension's configuration the kernel started with, kept at the first reset (in a
    # module of its own: ip.reset() empties the namespace), restored before each test: a test
    # that writes the shell's config does not configure the next test's extension.
    fresh = sys.modules.get("_acpnb_fresh")
    if fresh is None:
        fresh = sys.modules["_acpnb_fresh"] = types.ModuleType("_acpnb_fresh")
        started = ip.config.get("AcpNotebook") if "AcpNotebook" in ip.config else None
        fresh.config = copy.deepcopy(started)
    old = instance(ip)
    if old is not None:  # its agents end as a kernel's exit ends them: SIGKILL, no goodbye
        old.runtime.kill_all_now()
    ip.extension_manager.unload_extension("acp_notebook")
    if old is not None:
        await old.close()  # the unload's task, done: nothing of the old runtime left running
        if old in ip.configurables:
            ip.configurables.remove(old)
    if "ipywidgets" in sys.modules:  # the widgets a test drew, and their comms, closed
        sys.modules["ipywidgets"].Widget.close_all()
    os.chdir({cwd!r})
    os.environ.clear()
    os.environ.update(json.loads({env!r}))
    ip.reset(new_session=True)  # the namespace, In/Out, the execution count back to 1
    ip.config.pop("AcpNotebook", None)
    if fresh.config is not None:
        ip.config["AcpNotebook"] = copy.deepcopy(fresh.config)
    replay.reset()  # the kernel's replay: its recording and count of %%agent cells
    masking.REDACTOR.clear()  # secrets of the test's agents and environment, not the last's
    cell_errors.REMEMBERED.clear()
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):  # a new kernel has none
        if hasattr(sys, name):
            delattr(sys, name)
    reprs.forget_in_place()
    ip.extension_manager.load_extension("acp_notebook")
await _reset_for_a_test()
"""

RESET_TIMEOUT = 60  # closing a test's agents, on a loaded machine


class ResetFailed(Exception):
    """The reset ran and raised: its code, or state it cannot undo, is wrong."""


class SharedKernel:
    def __init__(self) -> None:
        self.km = AsyncKernelManager(kernel_name="python3")

    def reset(self, cwd: Path, env: dict[str, str]) -> None:
        """Make the kernel what a fresh one in `cwd` with `env` is to a test; a kernel that does
        not come back from the previous test (dead, or busy past the timeout) is restarted."""
        run_sync(self._reset)(cwd, env)

    async def _reset(self, cwd: Path, env: dict[str, str]) -> None:
        started = not self.km.has_kernel
        if started:
            await self.km.start_kernel(env=env, cwd=str(cwd))
        code = _RESET.format(cwd=str(cwd), env=json.dumps(env))
        try:
            if not (started or await self.km.is_alive()):
                raise RuntimeError("the shared kernel died")
            await self._run(code, ready=not started)
        except ResetFailed:
            raise  # the reset's own code failed: a defect to see, not to restart past
        except Exception:  # dead, or busy past the timeout with what a test left: a new process
            await self.km.restart_kernel(now=True)
            await self._run(code, ready=False)

    async def _run(self, code: str, *, ready: bool) -> None:
        """Runs `code`; a kernel not known `ready` (just started) is waited for first. A ready
        one is sent the code at once: jupyter_client's wait for it ends with 0.2 s of silence
        on its iopub channel, twice a test (its reset before and after) for every test."""
        kc = self.km.client()
        kc.start_channels()
        try:
            if not ready:
                await kc.wait_for_ready(timeout=RESET_TIMEOUT)
            msg_id = kc.execute(code, silent=True, store_history=False)
            while True:
                reply: dict[str, Any] = await kc.get_shell_msg(timeout=RESET_TIMEOUT)
                if reply["parent_header"].get("msg_id") == msg_id:
                    break
            content = reply["content"]
            if content["status"] != "ok":
                trace = "\n".join(content.get("traceback", []))
                raise ResetFailed(f"resetting the shared kernel failed:\n{trace}")
        finally:
            kc.stop_channels()

    def shutdown(self) -> None:
        if self.km.has_kernel:
            run_sync(self.km.shutdown_kernel)()
