"""A client terminal as a turn records it: the live, bounded output buffer (`TerminalView`) and
its frozen record in the transcript (`Terminal`). Pure, no I/O; `client/serving/terminal.py`
runs the commands and feeds the view."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .coerce import integer, mapping, opt_text, text

DEFAULT_OUTPUT_LIMIT = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Terminal:
    """What a client terminal printed and how it ended, as of one moment: the transcript's
    record of it (`TerminalView.snapshot`, or read back from a transcript)."""

    terminal_id: str
    command: str
    output: str
    truncated: bool = False
    exit_code: int | None = None
    signal: str | None = None

    @property
    def exited(self) -> bool:
        return self.exit_code is not None or self.signal is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "terminalId": self.terminal_id,
            "command": self.command,
            "output": self.output,
            "truncated": self.truncated,
            "exitStatus": {"exitCode": self.exit_code, "signal": self.signal},
        }

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> Terminal:
        status = mapping(d.get("exitStatus"))
        return cls(
            text(d.get("terminalId")),
            text(d.get("command")),
            text(d.get("output")),
            d.get("truncated") is True,
            integer(status.get("exitCode")),
            opt_text(status.get("signal")),
        )


@dataclass(eq=False)
class TerminalView:
    """A client terminal's output buffer (bounded, cut on a UTF-8 boundary) and how it ended;
    kept after release for the record. What it shows is its `snapshot()`."""

    terminal_id: str
    command: str
    output: bytearray = field(default_factory=bytearray)
    limit: int = DEFAULT_OUTPUT_LIMIT
    truncated: bool = False
    exit_code: int | None = None
    signal: str | None = None
    released: bool = False

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    @property
    def exited(self) -> bool:
        return self.exit_code is not None or self.signal is not None

    def append(self, data: bytes) -> None:
        self.output += data
        excess = len(self.output) - self.limit
        if excess > 0:
            # Drop from the start, then skip UTF-8 continuation bytes so we cut on a boundary.
            while excess < len(self.output) and (self.output[excess] & 0xC0) == 0x80:
                excess += 1
            del self.output[:excess]
            self.truncated = True

    def exit_status(self) -> dict[str, Any]:
        return {"exitCode": self.exit_code, "signal": self.signal}

    def snapshot(self) -> Terminal:
        return Terminal(
            self.terminal_id, self.command, self.text, self.truncated, self.exit_code, self.signal
        )

    def to_json(self) -> dict[str, Any]:
        return self.snapshot().to_json()
