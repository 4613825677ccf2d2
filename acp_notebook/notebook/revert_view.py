"""What `%agent revert` shows: each file's fate, the diff of what changed on disk, and what
checkpoints never cover. Paths and reasons may come from the agent: escaped by `views`."""

from __future__ import annotations

from collections.abc import Callable

from ..client.serving.checkpoints import RevertResult
from ..display.views import Code, Doc
from ..render.diff import unified

MAX_DIFF_LINES = 400  # per file; a revert of a large file shows its head


def revert_doc(result: RevertResult, session: str, mask: Callable[[str], str] = str) -> Doc:
    """The display of one revert of `session`'s turn."""
    doc = Doc(mask).para(
        "Revert of turn ", Code(result.turn_id), " of session ", Code(session), ":"
    )
    for each in result.files:
        doc.item(
            Code(each.path), f": {each.action}", *((f" ({each.reason})",) if each.reason else ())
        )
    for each in result.files:
        if each.action not in ("restored", "deleted") or each.current == each.restored:
            continue
        diff = unified(each.path, each.current, each.restored or "")
        lines = list(diff.lines[:MAX_DIFF_LINES])
        if len(diff.lines) > MAX_DIFF_LINES:
            lines.append(f"… {len(diff.lines) - MAX_DIFF_LINES} more lines")
        doc.pre("\n".join(lines))
    if result.refused:
        doc.para(
            "Refused files were left as they are; ",
            Code(f"%agent revert {result.turn_id} --force"),
            " overwrites those changed since the turn, never a symbolic link (nor a folder "
            "that became one) or a protected file.",
        )
    return doc.para(result.note)
