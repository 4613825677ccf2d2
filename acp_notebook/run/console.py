"""The terminal end of `acp-notebook run`: lines out, with colour on a terminal, one writer.

Colour only when the stream is a TTY, `NO_COLOR` is unset and `TERM` is not `dumb`
(https://no-color.org). With several notebooks at once (`-j`), every line is prefixed by its
notebook's name; lines are written whole, so two notebooks never mix within a line.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TextIO

from .printer import Line

_COLOURS = {
    "answer": "",
    "tool": "\x1b[36m",
    "ok": "\x1b[32m",
    "fail": "\x1b[31;1m",
    "warn": "\x1b[33m",
    "dim": "\x1b[2m",
    "bold": "\x1b[1m",
}
_RESET = "\x1b[0m"
#: What a terminal acts on instead of showing: C0 controls (ESC opens a sequence that can set the
#: window title or clear the screen), DEL, C1 (CSI), bidirectional overrides.
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def wants_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def shown(text: str) -> str:
    """`text` as a terminal shows it, not acts on it: controls written as escapes (`\\x1b`).

    Every line goes through here, not only the agent's text (`printer.safe` cleans that, and
    masks it): a notebook's file name, in the summary and the `-j` prefix, is whatever a glob
    found, and the agent's shell can name a file `\\x1b]0;…\\x07.ipynb`; so can a path or an
    exception's message that quotes one."""
    text = text.replace("\t", "    ")
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class Console:
    """Writes `Line`s to a stream. Thread-safe; each notebook gets a `Console.tagged` view."""

    def __init__(self, stream: TextIO, *, colour: bool | None = None) -> None:
        self.stream = stream
        self.colour = wants_colour(stream) if colour is None else colour
        self._lock = threading.Lock()

    def write(self, lines: list[Line], prefix: str = "") -> None:
        if not lines:
            return
        prefix = shown(prefix)
        text = "".join(f"{prefix}{self._paint(line)}\n" for line in lines)
        with self._lock:
            self.stream.write(text)
            self.stream.flush()

    def _paint(self, line: Line) -> str:
        code = _COLOURS.get(line.style, "") if self.colour else ""
        text = shown(line.text)
        return f"{code}{text}{_RESET}" if code else text

    def tagged(self, prefix: str) -> Tagged:
        return Tagged(self, prefix)


class Tagged:
    """A console whose lines all start with one prefix ("[name] "), or none."""

    def __init__(self, console: Console, prefix: str) -> None:
        self.console = console
        self.prefix = prefix

    def write(self, lines: list[Line]) -> None:
        self.console.write(lines, self.prefix)

    def line(self, text: str, style: str = "") -> None:
        self.console.write([Line(text, style)], self.prefix)
