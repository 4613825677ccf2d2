"""The checkpoint index (`.acp_notebook/<session>/checkpoints/index.jsonl`) is in the workspace,
where the agent's own shell can put a FIFO: appending to it blocked a worker thread for good
(`open` waiting for a reader), and with it the agent's `fs/write_text_file`, its turn, the cell.
Now a FIFO (or any file that is not regular) there is an error the caller logs, at once."""

from __future__ import annotations

import os
from pathlib import Path

from acp_notebook.client.serving import checkpoint_files as files
from acp_notebook.client.serving.safe_fs import Root
from acp_notebook.errors import RpcError
from tests.blocking import open_fifo_ends, raised_within


def test_appending_to_a_fifo_index_fails_at_once(tmp_path: Path) -> None:
    index = tmp_path / "checkpoints" / "index.jsonl"
    index.parent.mkdir()
    os.mkfifo(index)
    exc = raised_within(
        lambda: files.append_line([Root.of(tmp_path)], str(index), b"{}\n"), open_fifo_ends(index)
    )
    assert isinstance(exc, RpcError), exc
    assert "a FIFO, not a regular file" in str(exc)


def test_a_regular_index_is_appended(tmp_path: Path) -> None:
    index = tmp_path / "checkpoints" / "index.jsonl"
    for n in range(2):
        files.append_line([Root.of(tmp_path)], str(index), b'{"n": %d}\n' % n)
    assert index.read_bytes() == b'{"n": 0}\n{"n": 1}\n'
    assert index.stat().st_mode & 0o777 == 0o600
