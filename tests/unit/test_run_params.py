"""`acp-notebook run -p NAME=VALUE`: what is injected is Python the kernel runs as written."""

from __future__ import annotations

import ast
import re

import nbformat
import pytest

from acp_notebook.run import params


@pytest.mark.parametrize("raw", ["1e999", "-1e999", "[1, 1e999]", "{'a': -1e999j}"])
def test_a_value_with_no_python_literal_is_a_clear_error(raw: str) -> None:
    """`-p x=1e999` was injected as `x = inf`: the notebook then failed on a NameError."""
    with pytest.raises(ValueError, match=re.escape(f"-p {'x=' + raw!r}: the value is not finite")):
        params.parse([f"x={raw}"])


@pytest.mark.parametrize("raw", ["3", "0.5", "True", "'x'", "[1, 'two']", "1e300", "Ada Lovelace"])
def test_values_are_injected_as_python_that_gives_them_back(raw: str) -> None:
    values = params.parse([f"x={raw}"])
    nb = nbformat.v4.new_notebook()
    params.inject(nb, values)
    line = nb.cells[0].source.splitlines()[1]
    assert line.startswith("x = ")
    assert ast.literal_eval(line.removeprefix("x = ")) == values["x"]
