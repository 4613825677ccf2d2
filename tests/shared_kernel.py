"""One kernel for the tests of a module that take the `kernel` fixture (tests/conftest.py).

Starting a kernel, then its first agent (the SDK's schema models), costs ~1.3 s of CPU, most of
what a short notebook test costs. Before each test the shared kernel is reset to what a fresh one
is to the test: its agents killed as a kernel's exit kills them, the extension unloaded and loaded
again (a new runtime: notices shown once per kernel are shown again, no `%config` left), the
namespace, `In`/`Out`, the execution count and the replay (notebook/replay.py's per-kernel
state) reset, the working directory and the environment the test's. Tests whose subject is the
kernel itself (its start, shutdown, interrupt, restart) start their own.
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
    import json, os
    from acp_notebook.magics import instance
    from acp_notebook.notebook import replay
    ip = get_ipython()
    old = instance(ip)
    if old is not None:  # its agents end as a kernel's exit ends them: SIGKILL, no goodbye
        old.runtime.kill_all_now()
    ip.extension_manager.unload_extension("acp_notebook")
    if old is not None:
        await old.close()  # the unload's task, done: nothing of the old runtime left running
        if old in ip.configurables:
            ip.configurables.remove(old)
    os.chdir({cwd!r})
    os.environ.clear()
    os.environ.update(json.loads({env!r}))
    ip.reset(new_session=True)  # the namespace, In/Out, the execution count back to 1
    replay.reset()  # the kernel's replay: its recording and count of %%agent cells
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
        if not self.km.has_kernel:
            await self.km.start_kernel(env=env, cwd=str(cwd))
        code = _RESET.format(cwd=str(cwd), env=json.dumps(env))
        try:
            await self._run(code)
        except ResetFailed:
            raise  # the reset's own code failed: a defect to see, not to restart past
        except Exception:  # dead, or busy past the timeout with what a test left: a new process
            await self.km.restart_kernel(now=True)
            await self._run(code)

    async def _run(self, code: str) -> None:
        kc = self.km.client()
        kc.start_channels()
        try:
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
