#!/usr/bin/env python3
"""What loading the extension costs a kernel that never runs `%%agent`.

    .venv/bin/python bench/bench_load.py [--reps 9] [--kernels 5]

The extension is enabled in every Python kernel of an environment where it is installed
(jupyter-config/ipython/ipython_kernel_config.json), so its load is paid at every kernel start.

  load    --reps fresh interpreters each start IPython (`globalipapp.start_ipython()`), then
          time `import acp_notebook; acp_notebook.load_ipython_extension(ip)`: CPU
          (time.process_time) and wall (time.perf_counter). The heavy modules the load imported
          are listed (none is the point: see tests/kernel/test_light_load.py).
  kernel  --kernels kernels (this venv's `python3`, which loads the extension at start) are
          started with nbclient one after the other: wall time from the start until the kernel
          answers (nbclient's setup_kernel: started and kernel_info replied, idle), and the CPU
          the kernel process had used when its first cell ran (time.process_time in that cell).

Medians, with min..max. To compare with other code, run it with PYTHONPATH pointing at that
checkout (the kernels inherit it). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import nbformat
from nbclient import NotebookClient

HEAVY = ("acp_notebook.client.client", "pydantic", "markdown_it", "ipywidgets", "anyio")

LOAD = f"""
import json, sys, time
from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
cpu, wall = time.process_time(), time.perf_counter()
import acp_notebook
acp_notebook.load_ipython_extension(ip)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({{"cpu": cpu * 1000, "wall": wall * 1000,
                  "heavy": [m for m in {HEAVY!r} if m in sys.modules],
                  "from": acp_notebook.__file__}}))
"""


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms ({min(values):.0f}..{max(values):.0f})"


def bench_load(reps: int) -> None:
    cpu: list[float] = []
    wall: list[float] = []
    last: dict[str, object] = {}
    for _ in range(reps):
        # Run elsewhere than the current directory, which `python -c` puts before PYTHONPATH.
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run(
                [sys.executable, "-c", LOAD],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
                cwd=tmp,
            )
        last = json.loads(done.stdout.splitlines()[-1])
        cpu.append(float(last["cpu"]))  # type: ignore[arg-type]
        wall.append(float(last["wall"]))  # type: ignore[arg-type]
    print(f"acp_notebook from {last['from']}")
    print(f"load, {reps} interpreters: CPU {spread(cpu)}, wall {spread(wall)}")
    print(f"  heavy modules imported by the load: {last['heavy'] or 'none'}")


def bench_kernels(kernels: int) -> None:
    ready: list[float] = []
    cpu: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(kernels):
            nb = nbformat.v4.new_notebook(
                cells=[nbformat.v4.new_code_cell("import time; print(time.process_time())")]
            )
            client = NotebookClient(
                nb,
                kernel_name="python3",
                startup_timeout=120,
                resources={"metadata": {"path": tmp}},
            )
            start = time.perf_counter()
            with client.setup_kernel(env=dict(os.environ)):
                ready.append((time.perf_counter() - start) * 1000)
                client.execute_cell(nb.cells[0], 0)
            cpu.append(float(nb.cells[0].outputs[0]["text"]) * 1000)
    print(
        f"kernel, {kernels} starts: start to idle {spread(ready)}, CPU at first cell {spread(cpu)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9, help="interpreters for the load")
    parser.add_argument("--kernels", type=int, default=5, help="kernels started (0: none)")
    args = parser.parse_args()
    bench_load(args.reps)
    if args.kernels:
        bench_kernels(args.kernels)


if __name__ == "__main__":
    main()
