"""File parts of a prompt: read local files, store data URLs in the workspace, build blocks.

A file named inside the session's workspace (the chat's `@file`, a cell's `--file notes.txt`)
is in a folder the agent's shell can change at any moment: it is read with
`regular_file.read_within`, checked and read on one descriptor reached without following a
link out of the workspace. A file named outside it is the person's explicit choice, read as
named. Data URLs are stored under `.acp_notebook/<session>/attachments/` without following any
link (`safe_fs.store`): the folder is the kernel's, but in the agent's reach.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from ..errors import PromptError, RpcError
from ..protocol import content
from ..protocol import jsonrpc as rpc
from .serving.regular_file import read_regular, read_within
from .serving.safe_fs import Root, store, within

#: The largest local file a prompt attaches. It goes to the agent whole, in one message (base64
#: for images and blobs); a model's context holds far less, and the kernel holds it twice.
MAX_ATTACHMENT_BYTES = 32 * 1024 * 1024
#: And all the local files of one prompt together (ten files of 32 MiB, in base64 and held
#: twice, were close to a gigabyte).
MAX_PROMPT_ATTACHMENT_BYTES = 64 * 1024 * 1024


async def load_parts(
    parts: list[content.Part],
    caps: content.PromptCaps,
    cwd: str,
    attachment_dir: Path,
    workspace: Sequence[str] = (),
    protected: Iterable[Path] = (),
) -> list[dict[str, Any]]:
    """The prompt's blocks; `workspace`: the session's roots (default: `cwd`); `protected`:
    files (the notebook) attached only when named, never through another name."""
    roots = [Root.of(r) for r in (workspace or [cwd])]
    guarded = tuple(protected)
    blocks: list[dict[str, Any]] = []
    total = 0
    for part in parts:
        if not isinstance(part, content.FilePart):
            blocks.append(part)
        elif part.is_remote:
            blocks.append(content.link_block(part.url, part.media_type, part.filename))
        else:
            path, data, mime = await _read(part, cwd, attachment_dir, roots, guarded)
            total += len(data)
            if total > MAX_PROMPT_ATTACHMENT_BYTES:
                raise PromptError(
                    f"the prompt's attached files are {total:,} bytes or more, over the limit "
                    f"of {MAX_PROMPT_ATTACHMENT_BYTES:,} for one prompt"
                )
            # A stored data URL is named by its path relative to the workspace root.
            name = part.filename or (_relative(path, cwd) if part.is_data_url else None)
            blocks.append(content.file_block(path, data, mime, caps, name))
    return content.filter_blocks(blocks, caps)


async def _read(
    part: content.FilePart,
    cwd: str,
    attachment_dir: Path,
    roots: Sequence[Root],
    protected: tuple[Path, ...],
) -> tuple[Path, bytes, str]:
    if part.is_data_url:
        data, mime = content.decode_data_url(part.url)
        mime = part.media_type or mime
        path = await store_attachment(data, mime, part.filename, attachment_dir, roots)
        return path, data, mime
    raw = part.url.removeprefix("file://")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = Path(cwd) / path
    try:
        real, data = await anyio.to_thread.run_sync(_read_regular, path, roots, protected)
    except FileNotFoundError:
        raise PromptError(f"attached file not found: {path}") from None
    except OSError as exc:
        raise PromptError(f"cannot read attached file {path}: {exc.strerror or exc}") from None
    except RpcError as exc:
        if exc.code == rpc.RESOURCE_NOT_FOUND:
            raise PromptError(f"attached file not found: {path}") from None
        why = exc.message  # it names the path
        if "outside" in why:
            why += " (a file in the workspace is read as the agent's own reads are: a link out "
            why += "of it is not followed; name the file where it is)"
        raise PromptError(f"attached file refused: {why}") from None
    return Path(real), data, content.guess_type(path.name, part.media_type)


def _read_regular(
    path: Path, roots: Sequence[Root], protected: tuple[Path, ...] = ()
) -> tuple[str, bytes]:
    """The real path and bytes of a regular file of at most `MAX_ATTACHMENT_BYTES`
    (`regular_file`): a FIFO named in a prompt blocked the read for good (a thread no interrupt
    reaches: the cell never ended), and /dev/zero or a huge log filled the kernel's memory. A
    path inside the workspace is read without following a link out of it: the chat checked
    `notes.txt` and then read it by path, and an agent swapping it for a link to a file
    outside got that file (5 and 15 sends of 60)."""
    if within(roots, str(path)):
        return read_within(roots, os.path.normpath(path), MAX_ATTACHMENT_BYTES, protected)
    data = read_regular(path, MAX_ATTACHMENT_BYTES)
    return str(path.resolve()), data


async def store_attachment(
    data: bytes,
    mime: str,
    filename: str | None,
    attachment_dir: Path,
    roots: Sequence[Root],
) -> Path:
    """Write decoded data-URL bytes under the session's attachment folder, named by content,
    walked from the workspace's root (`roots`) without following any link."""
    digest = hashlib.sha256(data).hexdigest()[:16]
    suffix = Path(filename).suffix if filename else (mimetypes.guess_extension(mime) or ".bin")
    stem = Path(filename).stem if filename else "attachment"
    safe_stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:60] or "file"
    target = Path(os.path.abspath(attachment_dir)) / f"{safe_stem}-{digest}{suffix}"
    try:
        await anyio.to_thread.run_sync(partial(store, roots, str(target), data))
    except RpcError as exc:
        raise PromptError(f"cannot store the attachment {target}: {exc.message}") from None
    except OSError as exc:
        raise PromptError(f"cannot store the attachment {target}: {exc}") from None
    return target


def _relative(path: Path, cwd: str) -> str:
    try:
        return str(path.relative_to(Path(cwd).resolve()))
    except ValueError:
        return str(path)
