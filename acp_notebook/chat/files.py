"""The workspace's files for the chat's `@path` completion, listed within bounds and confined.

The listing walks the session's workspace breadth-first, so a shallow file is never crowded out
by a deep tree: at most `limit` files, `depth` folders down, never into a hidden folder (`.git`,
`.venv`, ...) or a heavy one (`node_modules`, `__pycache__`, ...), never through a symbolic link.
A chosen path comes back from the page, which is not trusted: `resolve_in` accepts it only if
its names stay inside the workspace. Whether it is a regular file inside once links are followed
is checked where it is read, on the descriptor that is read (`client.attachments`): checked here
and read again by path, a name the agent's shell swapped for a link meanwhile sent the agent a
file from outside.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from pathlib import Path

from ..errors import PromptError

#: Folders never listed (besides every hidden one): caches, dependencies, build output.
SKIPPED = frozenset(
    {"node_modules", "__pycache__", "venv", "env", "build", "dist", "target", "site-packages"}
)
LIMIT = 2000
DEPTH = 6
FOLDERS = 5000  # folders read at most, however few files they hold
MAX_PATH_CHARS = 1000


def list_files(root: str | Path, *, limit: int = LIMIT, depth: int = DEPTH) -> list[str]:
    """Up to `limit` files under `root` (relative, with `/`), at most `depth` folders down and
    `FOLDERS` folders read, shallow ones first, the first `limit * 4` entries of each folder by
    name."""
    found: list[str] = []
    queue: deque[tuple[Path, int]] = deque([(Path(root), 0)])
    read = 0
    while queue and len(found) < limit and read < FOLDERS:
        folder, level = queue.popleft()
        read += 1
        try:
            with os.scandir(folder) as entries:
                # At most `limit * 4` entries read (in the folder's order), then sorted: all
                # of a folder of millions of files were held and sorted to keep as many.
                items = sorted(itertools.islice(entries, limit * 4), key=lambda e: e.name)
        except OSError:  # unreadable or vanished: the rest is still listed
            continue
        for entry in items:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if level + 1 < depth and entry.name not in SKIPPED:
                    queue.append((Path(entry.path), level + 1))
            elif entry.is_file(follow_symlinks=False) and len(found) < limit:
                found.append(Path(entry.path).relative_to(root).as_posix())
    return found


def resolve_in(root: str | Path, relative: str) -> Path:
    """The path `relative` names inside `root`, by its names alone (nothing on disk is looked
    at: the read checks the file it reads); PromptError for an absolute path, one whose `..`
    leads out, an empty or too long one."""
    if not relative or len(relative) > MAX_PATH_CHARS or "\x00" in relative:
        raise PromptError("not a file path of the workspace")
    base = os.path.abspath(root)
    if Path(relative).is_absolute():
        raise PromptError(f"not a path inside the workspace: {relative[:200]}")
    path = os.path.normpath(os.path.join(base, relative))
    if not (path == base or path.startswith(base.rstrip("/") + "/")):
        raise PromptError(f"not a path inside the workspace: {relative[:200]}")
    return Path(path)
