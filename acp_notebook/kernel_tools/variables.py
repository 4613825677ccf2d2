"""What the kernel's MCP tools read: the user's variables, listed and inspected, every size bounded.

Nothing here imports pandas, numpy or matplotlib: a DataFrame, an array and a figure are known
by their attributes and module, so the tools work (and say less) where those are not installed.
A value's `repr` may be huge (a 50 MB string) or slow: strings and containers are cut before
they are formatted (`protocol.limits.BoundedRepr`), and every text that leaves is clipped to a
stated size.
"""

from __future__ import annotations

import difflib
import io
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..protocol.limits import BoundedRepr, clip_text

MAX_TEXT = 20_000  # characters of one tool answer
LIST_REPR = 120  # characters of each variable's repr in the list
INSPECT_REPR = 8_000
MAX_LISTED = 500
HEAD_ROWS = 10
DESCRIBE_COLS = 30  # columns `describe()` summarises (as many as a table shows)
DESCRIBE_ROWS = 1_000_000  # rows it reads: its quantiles sort each column
SAMPLE = 20  # elements of an array shown
MAX_PNG = 4 * 1024 * 1024
# IPython's own names, present in every namespace: not the user's variables.
_IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})


@dataclass(frozen=True)
class ToolOutput:
    """One tool's answer: text (bounded), PNG images, and whether it is an error."""

    text: str
    images: tuple[bytes, ...] = field(default=())
    error: bool = False


def bounded_repr(value: Any, limit: int = INSPECT_REPR) -> str:
    """A repr of at most about `limit` characters, made without formatting all of a big string,
    bytes or container first; a repr that raises is reported, not raised."""
    try:
        if isinstance(value, str | bytes | bytearray) and len(value) > limit:
            # Cut before repr: the repr of 50 MB would take 50 MB (and escapes may double it).
            return clip_text(repr(value[: limit // 2]), limit) + f"… ({len(value):,} in all)"
        text = BoundedRepr(max(limit, 20), items=20, digits=200).repr(value)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}: {clip_text(str(exc), 200)}>"
    return clip_text(text, limit)


def type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def size_of(value: Any) -> str:
    """ "shape (3, 4)", "length 12", or "" when it has neither (never iterates)."""
    shape = getattr(value, "shape", None) if not isinstance(value, type) else None
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        return f"shape {shape}"
    if isinstance(value, type):
        return ""
    try:
        return f"length {len(value)}"
    except Exception:  # no __len__, or one that fails: nothing to say
        return ""


def _hidden(name: str, value: Any, hidden_names: Iterable[str]) -> bool:
    if name.startswith("_") or name in _IPYTHON_NAMES or name in hidden_names:
        return True
    return isinstance(value, types.ModuleType) or callable(value)


def list_variables(
    ns: Mapping[str, Any], hidden_names: Iterable[str] = (), include_hidden: bool = False
) -> ToolOutput:
    """One line per variable: name, type, shape or length, a short repr. Modules, callables,
    `_`-names and IPython's own names are left out unless `include_hidden`."""
    hidden = frozenset(hidden_names)
    lines: list[str] = []
    left_out = 0
    for name, value in list(ns.items()):
        if not include_hidden and _hidden(name, value, hidden):
            left_out += 1
            continue
        if len(lines) >= MAX_LISTED:
            lines.append(f"… more variables not listed (the first {MAX_LISTED} are)")
            break
        size = size_of(value)
        lines.append(
            f"{name}: {type_name(value)}{f', {size}' if size else ''} = "
            f"{' '.join(bounded_repr(value, LIST_REPR).split())}"
        )
    if not lines:
        lines.append("(no variables yet)")
    if left_out:
        lines.append(
            f"({left_out} modules, functions, classes and _-names not listed; "
            "include_hidden=true lists them)"
        )
    return ToolOutput(clip_text("\n".join(lines), MAX_TEXT))


def inspect_variable(ns: Mapping[str, Any], name: str) -> ToolOutput:
    """One variable in detail: a DataFrame's schema, head and describe; an array's shape, dtype
    and a sample; a figure as a PNG; anything else as a bounded repr."""
    if name not in ns:
        close = difflib.get_close_matches(name, [n for n in ns if isinstance(n, str)], n=5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return ToolOutput(f"no variable {name!r} in the kernel{hint}", error=True)
    value = ns[name]
    size = size_of(value)
    head = [f"name: {name}", f"type: {type_name(value)}"] + ([size] if size else [])
    png = figure_png(value)
    if png is not None:
        return ToolOutput("\n".join([*head, "a figure: the image follows"]), (png,))
    if is_frame(value):
        body = describe_frame(value)
    elif _is_array(value):
        body = _describe_array(value)
    else:
        body = ["value:", bounded_repr(value)]
    return ToolOutput(clip_text("\n".join(head + body), MAX_TEXT))


def is_frame(value: Any) -> bool:
    """A pandas DataFrame or Series, known by its attributes (pandas is not imported)."""
    return all(hasattr(value, a) for a in ("shape", "dtypes", "head", "to_string"))


def _is_array(value: Any) -> bool:
    return type(value).__module__.startswith("numpy") and all(
        hasattr(value, a) for a in ("shape", "dtype", "flat")
    )


def describe_frame(frame: Any, *, summary: bool = True) -> list[str]:
    """A DataFrame's schema and first rows, and its `describe()` when `summary` (the agent's
    `inspect_variable` asks; a prompt's `--with` does not: the rows are what it is about)."""
    out: list[str] = []
    try:
        dtypes = frame.dtypes
        out += ["schema (column: dtype):", clip_text(table_text(dtypes), 4_000)]
        out += [f"first {HEAD_ROWS} rows:", clip_text(table_text(frame.head(HEAD_ROWS)), 6_000)]
        if summary:
            out += _describe(frame)
    except Exception as exc:  # a frame-like object that is not quite one: say so, go on
        out.append(f"(could not describe it all: {type(exc).__name__}: {clip_text(str(exc), 300)})")
    return out


def _describe(frame: Any) -> list[str]:
    """`describe()` of the first `DESCRIBE_COLS` columns and `DESCRIBE_ROWS` rows: of all of a
    frame of 100,000 columns it took minutes, with the kernel blocked, to show 30 of them."""
    shape = tuple(frame.shape)  # a Series' is (rows,)
    rows, cols = shape[0], shape[1] if len(shape) > 1 else 1
    of = []
    if cols > DESCRIBE_COLS:
        of.append(f"{DESCRIBE_COLS} of {cols:,} columns")
    if rows > DESCRIBE_ROWS:
        of.append(f"{DESCRIBE_ROWS:,} of {rows:,} rows")
    title = "describe()"
    if of and getattr(frame, "iloc", None) is not None:
        cut = (slice(DESCRIBE_ROWS), slice(DESCRIBE_COLS))
        frame = frame.iloc[cut[: len(shape)]]
        title = f"describe() of the first {' and the first '.join(of)}"
    return [f"{title}:", clip_text(table_text(frame.describe()), 6_000)]


def table_text(table: Any) -> str:
    """A DataFrame's or Series' `to_string`, told its bounds: unbounded, a frame of 100,000
    columns took 33 s to format (every column, though only the first were kept)."""
    to_string = getattr(table, "to_string", None)
    if callable(to_string):
        try:
            return str(to_string(max_rows=60, max_cols=30, max_colwidth=60))
        except TypeError:  # a Series' to_string takes no max_cols
            try:
                return str(to_string(max_rows=60))
            except TypeError:  # a frame-like object's, which takes no bounds
                return str(to_string())
    return bounded_repr(table, 6_000)


def _describe_array(array: Any) -> list[str]:
    out = [f"dtype: {array.dtype}", f"size: {getattr(array, 'size', '?')}"]
    try:
        sample = array.flat[:SAMPLE].tolist()
        out.append(f"first {min(SAMPLE, len(sample))} elements (flattened): {sample!r}")
        if array.dtype.kind in "iuf" and array.size:
            out.append(f"min {array.min()!r}, max {array.max()!r}, mean {array.mean()!r}")
    except Exception as exc:
        out.append(f"(could not sample it: {type(exc).__name__}: {clip_text(str(exc), 300)})")
    return [clip_text(line, 4_000) for line in out]


def figure_png(value: Any) -> bytes | None:
    """A figure as PNG bytes: anything with matplotlib's `savefig` (a figure, a seaborn grid),
    or a matplotlib Axes through its figure; None for anything else, a `savefig` that fails or
    writes no PNG, or a picture over 4 MB."""
    savefig = getattr(value, "savefig", None)
    if not callable(savefig) and type(value).__module__.startswith("matplotlib"):
        savefig = getattr(getattr(value, "figure", None), "savefig", None)
    if not callable(savefig):
        return None
    buffer = io.BytesIO()
    try:
        savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    except Exception:
        return None
    png = buffer.getvalue()
    # Known by what it wrote, as it is by its name: a mock's savefig writes nothing.
    return png if png.startswith(b"\x89PNG") and len(png) <= MAX_PNG else None
