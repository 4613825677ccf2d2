"""The protocol log file (`ACP_NOTEBOOK_LOG`, `c.AcpNotebook.log_file`) named as a FIFO.

It is written on the kernel's event loop, as each message is read or sent: a FIFO with no reader
blocked its `open` for good, and one whose reader stopped reading blocked a write once the pipe
was full (64 KiB), the kernel hung either way. Now each is a failed log, reported, never fatal."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from acp_notebook.client.wirefile import JsonLinesLog
from acp_notebook.protocol.redact import Redactor
from acp_notebook.protocol.wirelog import WireEntry
from tests.blocking import open_fifo_ends, raised_within


def _entry(seq: int, text: str) -> WireEntry:
    return WireEntry(seq, time.time(), "in", text, len(text))


def test_a_fifo_nobody_reads_is_a_failed_log_not_a_hung_kernel(tmp_path: Path) -> None:
    fifo = tmp_path / "wire.jsonl"
    os.mkfifo(fifo)
    log = JsonLinesLog(fifo, agent="a", pid=1, redactor=Redactor())

    raised_within(lambda: log(_entry(1, '{"jsonrpc": "2.0"}')), open_fifo_ends(fifo))
    assert log.error is not None
    log.close()


def test_a_fifo_whose_reader_stopped_is_a_failed_log_not_a_hung_kernel(tmp_path: Path) -> None:
    fifo = tmp_path / "wire.jsonl"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # there, and never reads
    log = JsonLinesLog(fifo, agent="a", pid=1, redactor=Redactor())
    line = '"' + "x" * 10_000 + '"'

    def write_many() -> None:
        for seq in range(100):  # about 1 MB: far more than a pipe holds
            log(_entry(seq, line))

    def release() -> None:
        while os.read(reader, 1 << 20):
            pass

    try:
        raised_within(write_many, release)
        assert log.error is not None
    finally:
        log.close()
        os.close(reader)


def test_a_regular_file_is_still_written(tmp_path: Path) -> None:
    path = tmp_path / "wire.jsonl"
    log = JsonLinesLog(path, agent="a", pid=1, redactor=Redactor())
    for seq in range(3):
        log(_entry(seq, f'{{"id": {seq}}}'))
    log.close()
    assert log.error is None and len(path.read_text().splitlines()) == 3
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_link_at_the_name_is_a_failed_log_not_written_through(tmp_path: Path) -> None:
    """The agent's shell replaced the log by a link to another file: nothing is appended to
    that file (the log fails, reported once)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's data\n")
    path = tmp_path / "wire.jsonl"
    path.symlink_to(victim)
    log = JsonLinesLog(path, agent="a", pid=1, redactor=Redactor())
    log(_entry(1, '{"id": 1}'))
    log.close()
    assert log.error is not None and victim.read_text() == "the victim's data\n"


def test_a_failed_log_says_so_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # It was kept as `error` and never said: the person believed the protocol was logged.
    folder = tmp_path / "wire.jsonl"
    folder.mkdir()
    log = JsonLinesLog(folder, agent="a", pid=1, redactor=Redactor())
    with caplog.at_level("WARNING", logger="acp_notebook"):
        for seq in range(3):
            log(_entry(seq, '{"jsonrpc": "2.0"}'))
    said = [r.getMessage() for r in caplog.records if "protocol log" in r.getMessage()]
    assert len(said) == 1 and str(folder) in said[0], said
    log.close()
