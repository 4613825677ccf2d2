"""`fs/read_text_file` and `fs/write_text_file`, confined to the session's workspace roots.

Every path is resolved (symlinks followed) before it is checked, so `..`, absolute paths elsewhere
and links that point out are all refused the same way. Protected files (the notebook being run)
can be neither read nor written by the agent. Notebooks (`*.ipynb`) cannot be written by default:
often nothing tells the kernel which notebook it runs (nbclient, papermill, `jupyter execute`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio

from ..protocol import jsonrpc as rpc
from .connection import RpcError


class Workspace:
    def __init__(self, roots: Iterable[str | os.PathLike[str]],
                 protected: Iterable[str | os.PathLike[str]] = (),
                 protect_notebooks: bool = True) -> None:
        self.roots = [Path(r).resolve() for r in roots]
        self.protected = {Path(p).resolve() for p in protected}
        self.protect_notebooks = protect_notebooks

    def resolve(self, path: Any) -> Path:
        if not isinstance(path, str) or not path:
            raise RpcError(rpc.INVALID_PARAMS, "path must be a non-empty string")
        if not os.path.isabs(path):
            raise RpcError(rpc.INVALID_PARAMS, f"path must be absolute: {path}")
        real = Path(path).resolve()
        if not any(real == root or real.is_relative_to(root) for root in self.roots):
            raise RpcError(rpc.INVALID_PARAMS,
                           f"access denied: {path} is outside the session's workspace")
        if real in self.protected:
            raise RpcError(rpc.INVALID_PARAMS, f"access denied: {path} is protected")
        return real

    async def read(self, params: Any) -> dict[str, Any]:
        params = params if isinstance(params, dict) else {}
        path = self.resolve(params.get("path"))
        line, limit = params.get("line"), params.get("limit")
        for name, value in (("line", line), ("limit", limit)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise RpcError(rpc.INVALID_PARAMS, f"{name} must be a non-negative integer")
        try:
            text = await anyio.Path(path).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise RpcError(rpc.RESOURCE_NOT_FOUND, f"file not found: {path}") from None
        except IsADirectoryError:
            raise RpcError(rpc.INVALID_PARAMS, f"is a directory: {path}") from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            end = start + limit if limit is not None else None
            text = "".join(lines[start:end])
        return {"content": text}

    async def write(self, params: Any) -> dict[str, Any]:
        params = params if isinstance(params, dict) else {}
        path = self.resolve(params.get("path"))
        # The resolved path: a link to a notebook is a notebook. Under nbclient, papermill and
        # `jupyter execute` the kernel cannot know which notebook runs, and an agent overwrote
        # it (the run then saved over the agent's edit, or the other way round). Notebooks are
        # the user's documents, not the agent's files: edits go through cells.
        if self.protect_notebooks and path.suffix.lower() == ".ipynb":
            raise RpcError(rpc.INVALID_PARAMS,
                           f"access denied: {path} is a notebook; agents may not write notebooks "
                           "(c.AcpNotebook.protect_notebooks, or protect_notebooks=False)")
        content = params.get("content")
        if not isinstance(content, str):
            raise RpcError(rpc.INVALID_PARAMS, "content must be a string")
        target = anyio.Path(path)
        await target.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename: a reader (or a crash) never sees half a file.
        tmp = target.with_name(f".{target.name}.acp-tmp")
        await tmp.write_text(content, encoding="utf-8")
        await tmp.replace(target)
        return {}
