"""Typed, read-only views of the wire values a part keeps as it received them.

A tool call keeps its `content` and `locations`, and a permission request its `options`, as the
ACP dicts the agent sent: that is what `TurnResult` exposes and what the transcript stores. The
renderers draw these views of them instead, read totally (`coerce`): a dict from a saved notebook
may lack any key or hold a value of the wrong type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .coerce import integer, mapping, text


@dataclass(frozen=True, slots=True)
class TextContent:
    text: str


@dataclass(frozen=True, slots=True)
class DiffContent:
    path: str
    old: str | None  # None: a new file
    new: str


@dataclass(frozen=True, slots=True)
class TerminalContent:
    terminal_id: str


@dataclass(frozen=True, slots=True)
class BlockContent:
    """A non-text content block (image, audio, resource, resource_link) or an unknown item."""

    block: dict[Any, Any]


Content = TextContent | DiffContent | TerminalContent | BlockContent


@dataclass(frozen=True, slots=True)
class Location:
    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Option:
    """A permission option: `kind` is allow_once, allow_always, reject_once or reject_always."""

    option_id: str
    name: str
    kind: str


def content(c: dict[Any, Any]) -> Content:
    """One item of a tool call's `content`."""
    kind = c.get("type")
    if kind == "diff":
        old = c.get("oldText")
        return DiffContent(
            text(c.get("path")), old if isinstance(old, str) else None, text(c.get("newText"))
        )
    if kind == "terminal":
        return TerminalContent(text(c.get("terminalId")))
    if kind == "content":
        block = mapping(c.get("content"))
        if block.get("type") == "text":
            return TextContent(text(block.get("text")))
        return BlockContent(block or c)
    if kind == "text":  # lenient: a bare text block
        return TextContent(text(c.get("text")))
    return BlockContent(c)


def location(loc: dict[Any, Any]) -> Location:
    return Location(text(loc.get("path")), integer(loc.get("line")))


def option(o: dict[Any, Any]) -> Option:
    return Option(text(o.get("optionId")), text(o.get("name")), text(o.get("kind")))
