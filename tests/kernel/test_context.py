"""Kernel variables as prompt context (`%%agent --with NAME`)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.kernel_tools.context import MAX_CHARS, variable_parts
from acp_notebook.protocol.redact import MASK
from tests.nb_util import execute, scripted, text
from tests.nb_util import script as nb_script
from tests.shared_kernel import SharedKernel


class FakeFrame:
    """Duck-typed like a pandas DataFrame, so the test needs no pandas."""

    shape = (3, 2)

    class _Dtypes:
        def to_string(self) -> str:
            return "a    int64\nb    object"

    dtypes = _Dtypes()

    def head(self, n: int) -> FakeFrame:
        self.asked = n
        return self

    def to_string(self) -> str:
        return "   a  b\n0  1  x\n1  2  y\n2  3  z"


class FakeFigure:
    def savefig(self, buffer: Any, format: str, **options: Any) -> None:
        # Drawn as `inspect_variable` draws a figure (`variables.figure_png`): one rule.
        assert format == "png" and options == {"dpi": 80, "bbox_inches": "tight"}
        buffer.write(b"\x89PNG fake")


def test_frame_is_described_by_shape_dtypes_and_head() -> None:
    [part] = variable_parts("df", FakeFrame())
    assert part["type"] == "context" and part["tag"] == "variable"
    body = part["context"]
    assert "name: df" in body and "shape: (3, 2)" in body
    assert "a    int64" in body and "2  3  z" in body
    assert "schema (column: dtype):" in body  # as `inspect_variable` says it (one description)


def test_figure_becomes_a_png_attachment() -> None:
    context, attachment = variable_parts("fig", FakeFigure())
    assert "fig.png" in context["context"]
    assert attachment["type"] == "file" and attachment["media_type"] == "image/png"
    assert base64.b64decode(attachment["url"].split(",", 1)[1]) == b"\x89PNG fake"


def test_a_savefig_that_writes_no_png_is_not_a_figure() -> None:
    """Any value with a `savefig` is tried as a figure (a seaborn grid is one): one that writes
    no PNG (a stub, a mock) is described as a value, not attached as an empty picture."""

    class Stub:
        def savefig(self, buffer: Any, **options: Any) -> None:
            buffer.write(b"not a picture")

    [part] = variable_parts("m", Stub())
    assert "value:" in part["context"] and ".png" not in part["context"]


def test_other_values_use_a_bounded_repr() -> None:
    [small] = variable_parts("x", {"k": [1, 2]})
    assert "type: builtins.dict" in small["context"] and "{'k': [1, 2]}" in small["context"]
    [big] = variable_parts("s", "y" * (MAX_CHARS * 3))
    # Cut before its repr is made, and said as `inspect_variable` says it (one bounded repr).
    assert len(big["context"]) < MAX_CHARS + 200 and f"({MAX_CHARS * 3:,} in all)" in big["context"]


def test_with_sends_variables_before_the_prompt(tmp_path: Path, kernel: SharedKernel) -> None:
    nb = execute(
        [
            "data = {'rows': 3, 'note': '<b>&'}",
            f"%%agent --agent {scripted()} --with data --out r\n"
            + nb_script({"echo_prompt": True}),
            "import json\nprint(json.dumps([r.prompt, r.text]))",
            f"%%agent --agent {scripted()} --with missing\nhi",
        ],
        tmp_path,
        allow_errors=True,
        kernel=kernel,
    )
    # The record keeps the context part as itself (tag and body); the agent got it as
    # XML-escaped tagged text, before the cell's own text.
    blocks, answer = json.loads(text(nb.cells[2]).strip().splitlines()[-1])
    assert blocks[0]["type"] == "context" and blocks[0]["tag"] == "variable"
    assert "name: data" in blocks[0]["context"] and "'<b>&'" in blocks[0]["context"]
    assert blocks[1]["text"].startswith("#script")
    # (The scripted agent echoes a prompt whose first block is not a script: what it got.)
    assert answer.startswith("echo: <variable>name: data") and "&lt;b&gt;&amp;" in answer
    shown = text(nb.cells[3])  # a usage error: one line, no traceback
    assert "UsageError" in shown and "no variable 'missing'" in shown, shown


def test_a_big_containers_repr_is_bounded_before_it_is_made() -> None:
    """`--with xs` of a list of 10^8 items formatted all of it (gigabytes, minutes) before
    cutting it to MAX_CHARS; a repr that raised failed the cell with a traceback."""
    made = 0

    class Item:
        def __repr__(self) -> str:
            nonlocal made
            made += 1
            return "item"

    [part] = variable_parts("xs", [Item() for _ in range(100_000)])
    assert made <= 1_000, f"{made} items formatted for a context of {MAX_CHARS} characters"
    assert "item" in part["context"] and len(part["context"]) < MAX_CHARS + 200

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr today")

    [broken] = variable_parts("b", Broken())
    assert "Broken" in broken["context"]


def test_a_wide_frame_is_described_without_formatting_every_column() -> None:
    """A DataFrame of 100,000 columns: `head(10).to_string()` formatted them all (7.7 MB, 33 s
    of a blocked kernel) and the dtypes listed them all, before both were cut."""
    import time

    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(np.zeros((12, 100_000))).add_prefix("c")
    started = time.monotonic()
    [part] = variable_parts("wide", frame)
    took = time.monotonic() - started
    body = part["context"]
    assert "shape: (12, 100000)" in body and "c0" in body and "..." in body
    assert len(body) < 3 * MAX_CHARS
    assert took < 15, f"{took:.1f} s to describe a wide frame"


def test_a_variable_holding_a_key_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--with config` handed the agent the key a variable held, as the kernel tools'
    `inspect_variable` did: both are masked by the kernel's redactor now, one rule."""
    key = "sk-test-" + "q7Zr2Lx9" * 4
    monkeypatch.setenv("ACPNB_TEST_API_KEY", key)
    [part] = variable_parts("config", {"key": key, "model": "m-1"})
    assert key not in part["context"] and key[:16] not in part["context"]
    assert MASK in part["context"] and "'model': 'm-1'" in part["context"]
