"""The protocol log as a file: each JSON-RPC message appended as one JSON line, secrets masked.

`ClientOptions.log_file` (the notebook's `c.AcpNotebook.log_file` or `ACP_NOTEBOOK_LOG`) names
the file. A line is `{"time", "agent", "pid", "dir", "size", "message"}`: `dir` is `in` (from the
agent) or `out`; `message` is the message parsed (a line that is not JSON stays a string), each
string masked by the agent process's redactor and the whole cut at the wire log's clip (`size`
says how long it was). The file is opened once per agent process, appended line-buffered, and
closed when that process ends; a file that cannot be written is reported once (a warning of the
`acp_notebook` logger, which reaches the cell), never fatal.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
from typing import IO, Any

from ..protocol.redact import Redactor
from ..protocol.wirelog import WireEntry, WireLog

log = logging.getLogger("acp_notebook")

# O_NOFOLLOW: the log often sits in the workspace, where the agent's shell can put a link at
# its name; followed, the kernel appended the protocol (prompts, files read) to the file it
# led to, anywhere. A link there is a failed log (ELOOP), reported like any other.
_FLAGS = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_CREAT
    | os.O_NONBLOCK
    | os.O_NOCTTY
    | os.O_NOFOLLOW
    | os.O_CLOEXEC
)


class JsonLinesLog:
    """A `WireLog` sink writing to `path`; `close()` when the agent process ends."""

    def __init__(
        self, path: str | os.PathLike[str], agent: str, pid: int | None, redactor: Redactor
    ):
        self.path = os.fspath(path)
        self.agent = agent
        self.pid = pid
        self.redactor = redactor
        self.error: OSError | None = None  # why nothing more is written, once it failed
        self._file: IO[str] | None = None

    def __call__(self, entry: WireEntry) -> None:
        if self.error is not None:
            return
        line = {
            "time": datetime.datetime.fromtimestamp(entry.at, datetime.UTC).isoformat(),
            "agent": self.agent,
            "pid": self.pid,
            "dir": entry.direction,
            "size": entry.size,
            "message": self.redactor.obj(entry.message()),
        }
        try:
            if self._file is None:
                # 0600: the log holds prompts and files the agent read, only its owner may read.
                # O_NONBLOCK: this runs on the kernel's loop, and a FIFO with no reader blocked
                # the open for good, one whose reader stopped blocked a write once it was full;
                # now either is an OSError (ENXIO, EAGAIN): a failed log. A file is unchanged.
                fd = os.open(self.path, _FLAGS, 0o600)
                self._file = open(fd, "a", encoding="utf-8", buffering=1)
            self._file.write(json.dumps(line, ensure_ascii=False) + "\n")
        except OSError as exc:
            self.error = exc
            self.close()
            # Once: nothing more is written for this agent process (a warning reaches the cell).
            log.warning("acp_notebook: the protocol log %s stopped: %s", self.path, exc)

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                pass


def attach(wire: WireLog, path: str | os.PathLike[str] | None, **sink: Any) -> None:
    """Point `wire`'s sink at `path` for a new agent process (closing the last one's file)."""
    detach(wire)
    if path:
        wire.sink = JsonLinesLog(path, **sink)


def detach(wire: WireLog) -> None:
    if isinstance(wire.sink, JsonLinesLog):
        wire.sink.close()
    wire.sink = None
