"""Files a setting names (the agents file, a recording to replay) that are not small regular
files: a FIFO blocked the kernel for good (its `open` waits for a writer that never comes), a
device or a huge file filled its memory. Each is now a clear error, at once."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from acp_notebook.config import MAX_AGENTS_FILE_BYTES, Registry, read_agents_file
from acp_notebook.errors import ConfigError, ReplayError
from acp_notebook.notebook import recording
from tests.blocking import open_fifo_ends, raised_within


def _bounded(call: Callable[[], object], fifo: Path) -> BaseException | None:
    return raised_within(call, open_fifo_ends(fifo))


def _huge(path: Path, size: int) -> Path:
    with path.open("wb") as f:  # sparse: no disk used
        f.truncate(size)
    return path


def test_an_agents_file_that_is_no_small_regular_file_is_a_config_error(tmp_path: Path) -> None:
    fifo = tmp_path / "agents.toml"
    os.mkfifo(fifo)
    exc = _bounded(lambda: Registry.build({}, None, str(fifo)), fifo)
    assert isinstance(exc, ConfigError) and "a FIFO, not a regular file" in str(exc)
    with pytest.raises(ConfigError, match="a character device, not a regular file"):
        read_agents_file(Path("/dev/zero"))
    huge = _huge(tmp_path / "huge.toml", MAX_AGENTS_FILE_BYTES + 1)
    with pytest.raises(ConfigError, match=f"over the limit of {MAX_AGENTS_FILE_BYTES:,}"):
        read_agents_file(huge)
    assert read_agents_file(tmp_path / "missing.toml") == {}  # no file: no agents, as before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"a = " + b"[" * 100_000, "nest too deeply"),  # was a RecursionError's traceback
        (b"a = " + b"{b = " * 100_000, "nest too deeply"),
        (b'default = "\xff"', "cannot read"),  # was a UnicodeDecodeError's traceback
    ],
)
def test_a_hostile_agents_file_is_a_config_error(tmp_path: Path, text: bytes, message: str) -> None:
    path = tmp_path / "agents.toml"
    path.write_bytes(text)
    with pytest.raises(ConfigError, match=message):
        read_agents_file(path)


def test_a_recording_that_is_no_small_regular_file_is_a_replay_error(tmp_path: Path) -> None:
    fifo = tmp_path / "recorded.ipynb"
    os.mkfifo(fifo)
    exc = _bounded(lambda: recording.load(str(fifo)), fifo)
    assert isinstance(exc, ReplayError) and "a FIFO, not a regular file" in str(exc)
    with pytest.raises(ReplayError, match="a character device, not a regular file"):
        recording.load("/dev/zero")
    huge = _huge(tmp_path / "huge.ipynb", recording.MAX_NOTEBOOK_BYTES + 1)
    with pytest.raises(ReplayError, match=f"over the limit of {recording.MAX_NOTEBOOK_BYTES:,}"):
        recording.load(str(huge))
