"""File parts of a prompt: read local files, store data URLs in the workspace, build blocks."""

from __future__ import annotations

import hashlib
import mimetypes
from pathlib import Path
from typing import Any

import anyio

from ..errors import PromptError
from ..protocol import content
from .regular_file import read_regular

#: The largest local file a prompt attaches. It goes to the agent whole, in one message (base64
#: for images and blobs); a model's context holds far less, and the kernel holds it twice.
MAX_ATTACHMENT_BYTES = 32 * 1024 * 1024
#: And all the local files of one prompt together (ten files of 32 MiB, in base64 and held
#: twice, were close to a gigabyte).
MAX_PROMPT_ATTACHMENT_BYTES = 64 * 1024 * 1024


async def load_parts(
    parts: list[content.Part], caps: content.PromptCaps, cwd: str, attachment_dir: Path
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    total = 0
    for part in parts:
        if not isinstance(part, content.FilePart):
            blocks.append(part)
        elif part.is_remote:
            blocks.append(content.link_block(part.url, part.media_type, part.filename))
        else:
            path, data, mime = await _read(part, cwd, attachment_dir)
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


async def _read(part: content.FilePart, cwd: str, attachment_dir: Path) -> tuple[Path, bytes, str]:
    if part.is_data_url:
        data, mime = content.decode_data_url(part.url)
        mime = part.media_type or mime
        path = await store_attachment(data, mime, part.filename, attachment_dir)
        return path, data, mime
    raw = part.url.removeprefix("file://")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = Path(cwd) / path
    try:
        data = await anyio.to_thread.run_sync(_read_regular, path)
    except FileNotFoundError:
        raise PromptError(f"attached file not found: {path}") from None
    except OSError as exc:
        raise PromptError(f"cannot read attached file {path}: {exc.strerror or exc}") from None
    return path.resolve(), data, content.guess_type(path.name, part.media_type)


def _read_regular(path: Path) -> bytes:
    """The bytes of a regular file of at most `MAX_ATTACHMENT_BYTES` (`regular_file`): a FIFO
    named in a prompt blocked the read for good (a thread no interrupt reaches: the cell never
    ended), and /dev/zero or a huge log filled the kernel's memory."""
    return read_regular(path, MAX_ATTACHMENT_BYTES)


async def store_attachment(
    data: bytes, mime: str, filename: str | None, attachment_dir: Path
) -> Path:
    """Write decoded data-URL bytes under the session's attachment folder, named by content."""
    digest = hashlib.sha256(data).hexdigest()[:16]
    suffix = Path(filename).suffix if filename else (mimetypes.guess_extension(mime) or ".bin")
    stem = Path(filename).stem if filename else "attachment"
    safe_stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:60] or "file"
    target = anyio.Path(attachment_dir) / f"{safe_stem}-{digest}{suffix}"
    await target.parent.mkdir(parents=True, exist_ok=True)
    if not await target.exists():
        await target.write_bytes(data)
    return Path(target)


def _relative(path: Path, cwd: str) -> str:
    try:
        return str(path.relative_to(Path(cwd).resolve()))
    except ValueError:
        return str(path)
