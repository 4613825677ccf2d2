"""Whether a cell's source is an `%%agent` cell, as the kernel decides it. Pure.

The kernel tools (never run nor write one), `acp-notebook run` (its agent cells, what an agent
may not make) and the replay (`notebook/recording.py`) all ask it, so they agree with the kernel:
IPython drops the leading blank lines and indentation of a cell, then the first line is a cell
magic; `notebook/rewrite.py` takes it as ours when it is `%%agent`, then whitespace or the end
of the line (not `%%agents`, nor `%%agent?`, IPython's help). A comment line first makes the
cell plain Python.
"""

from __future__ import annotations

MAGIC = "%%agent"
#: What may follow `%%agent` on its line: its options (after a space or a tab), or the line's
#: end (`\r` of a Windows line end too).
_AFTER = frozenset({"", " ", "\t", "\r", "\n"})


def is_agent_source(source: str) -> bool:
    """Whether `source` is an `%%agent` cell's (leading whitespace and blank lines skipped)."""
    text = source.lstrip()
    return text.startswith(MAGIC) and text[len(MAGIC) : len(MAGIC) + 1] in _AFTER


def split_agent_source(source: str) -> tuple[str, str] | None:
    """The options line (stripped) and the body (the prompt) of an `%%agent` cell's `source`,
    or None when it is not one (`is_agent_source`)."""
    if not is_agent_source(source):
        return None
    first, _, body = source.lstrip().partition("\n")
    return first[len(MAGIC) :].strip(), body
