"""The checkpoint index (`.acp_notebook/<session>/checkpoints/index.jsonl`) is in the workspace,
where the agent's own shell can put a FIFO: appending to it blocked a worker thread for good
(`open` waiting for a reader), and with it the agent's `fs/write_text_file`, its turn, the cell.
Now a FIFO (or any file that is not regular) there is an error the caller logs, at once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from acp_notebook.client import checkpoint_files as files
from acp_notebook.client.safe_fs import Root
from acp_notebook.errors import RpcError


@pytest.mark.timeout(60)
def test_appending_to_a_fifo_index_fails_at_once(tmp_path: Path) -> None:
    index = tmp_path / "checkpoints" / "index.jsonl"
    index.parent.mkdir()
    os.mkfifo(index)
    raised: list[BaseException] = []

    def append() -> None:
        try:
            files.append_line([Root.of(tmp_path)], str(index), b"{}\n")
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=append, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        os.close(os.open(index, os.O_RDONLY | os.O_NONBLOCK))  # the blocked open returns
        thread.join(10)
        pytest.fail("append_line blocked on a FIFO")
    assert raised and isinstance(raised[0], RpcError), raised
    assert "a FIFO, not a regular file" in str(raised[0])


def test_a_regular_index_is_appended(tmp_path: Path) -> None:
    index = tmp_path / "checkpoints" / "index.jsonl"
    for n in range(2):
        files.append_line([Root.of(tmp_path)], str(index), b'{"n": %d}\n' % n)
    assert index.read_bytes() == b'{"n": 0}\n{"n": 1}\n'
    assert index.stat().st_mode & 0o777 == 0o600
