"""What the agent tells about the session rather than in the conversation: notices and context
compaction (ACP v1, stable 2026-10-09; sent only to a client that opted in with
`clientCapabilities.session.notices` / `.compaction`). Their parts, and how the fold folds them.

A `notice` (`severity`, `title`, `description?`) is advisory: it has no id, is never replayed,
and an `error` notice does not fail the turn. A compaction is an entity the agent names
(`compactionId`): its first `compaction_update` fixes its place in the turn, later ones patch it
(`summary` and `error`: omitted = unchanged, null or `[]` = cleared), and
`compaction_summary_chunk`s append to its summary (a first-seen id makes an in-progress one).
Severity and status are open enums: a word we do not know is kept, and shown as data.

Pure, no I/O. Every string is bounded (`FoldHost.clip`), every block list capped.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Protocol

from .coerce import dicts, opt_text, text

#: Notice severities ACP names (others are kept as sent, shown as `info`).
SEVERITIES = ("info", "warning", "error")
#: Compaction statuses ACP names.
COMPACTION_STATUSES = ("in_progress", "completed", "failed", "cancelled")
#: Characters of a compaction's summary text kept (a summary is a page, not a book).
SUMMARY_CHARS = 64 * 1024
#: Blocks of a compaction's summary kept.
SUMMARY_BLOCKS = 50


@dataclass(slots=True, eq=False)
class NoticePart:
    """A notice: a banner in the turn, by severity."""

    part_id: str
    severity: str
    title: str
    description: str | None = None

    kind = "notice"

    @property
    def level(self) -> str:
        """The severity if ACP names it, else `info` (what a view styles it as)."""
        return self.severity if self.severity in SEVERITIES else "info"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "notice",
            "id": self.part_id,
            "severity": self.severity,
            "title": self.title,
        }
        if self.description is not None:
            out["description"] = self.description
        return out

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> NoticePart:
        return cls(
            text(d.get("id")),
            text(d.get("severity")) or "info",
            text(d.get("title")),
            opt_text(d.get("description")),
        )


@dataclass(slots=True, eq=False)
class CompactionPart:
    """Where the agent summarised its context: its status, and the summary it kept (blocks the
    agent sent whole, then text streamed in chunks)."""

    part_id: str
    compaction_id: str
    status: str = "in_progress"
    summary: list[dict[str, Any]] = field(default_factory=list)  # content blocks
    error: str | None = None
    _text: io.StringIO = field(default_factory=io.StringIO, repr=False)

    kind = "compaction"

    @property
    def text(self) -> str:
        """The summary as text: its text blocks, then what the chunks streamed."""
        blocks = [b["text"] for b in self.summary if b.get("type") == "text" and "text" in b]
        return "\n\n".join([*(str(t) for t in blocks), self._text.getvalue()]).strip("\n")

    def append(self, chunk: str) -> None:
        self._text.write(chunk[: max(0, SUMMARY_CHARS - self._text.tell())])

    def clear_text(self) -> None:
        self._text = io.StringIO()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "compaction",
            "id": self.part_id,
            "compactionId": self.compaction_id,
            "status": self.status,
        }
        if self.summary:
            out["summary"] = self.summary
        streamed = self._text.getvalue()
        if streamed:
            out["streamed"] = streamed
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> CompactionPart:
        part = cls(
            text(d.get("id")),
            text(d.get("compactionId")),
            text(d.get("status")) or "in_progress",
            dicts(d.get("summary"))[:SUMMARY_BLOCKS],
            opt_text(d.get("error")),
        )
        part.append(text(d.get("streamed")))
        return part


class FoldHost(Protocol):
    """What folding notices and compactions needs of the fold (`SessionFold` provides it)."""

    visible_output: bool

    def new_id(self, prefix: str) -> str: ...

    def add_part(self, part: NoticePart | CompactionPart, kind: str) -> bool: ...

    def updated(self, part: NoticePart | CompactionPart) -> None: ...

    def find_part(self, kind: str, key: str) -> Any: ...

    def clip(self, value: str) -> str: ...

    def bounded(self, value: Any) -> Any: ...


class NotFolded(ValueError):
    """The update is not what the spec says it is: the fold keeps it as a raw part."""


def fold_notice(host: FoldHost, update: dict[str, Any]) -> None:
    severity, title = update.get("severity"), update.get("title")
    if type(severity) is not str or type(title) is not str or not title:
        raise NotFolded("a notice needs a severity and a non-empty title")
    description = update.get("description")
    part = NoticePart(
        host.new_id("n"),
        host.clip(severity)[:40],
        host.clip(title),
        host.clip(description) if type(description) is str else None,
    )
    if host.add_part(part, "notices"):
        host.visible_output = True


def _compaction(host: FoldHost, compaction_id: Any) -> CompactionPart | None:
    """The compaction of this id, made (in progress) if it is new; None if no room was left."""
    if type(compaction_id) is not str or not compaction_id:
        raise NotFolded("compactionId must be a non-empty string")
    key = host.clip(compaction_id)[:200]
    known = host.find_part("compaction", key)
    if isinstance(known, CompactionPart):
        return known
    part = CompactionPart(host.new_id("c"), key)
    return part if host.add_part(part, "compactions") else None


def fold_compaction(host: FoldHost, update: dict[str, Any]) -> None:
    part = _compaction(host, update.get("compactionId"))
    if part is None:
        return
    status = update.get("status")
    if type(status) is str:
        part.status = host.clip(status)[:40]
    elif status is None and "status" in update:
        part.status = "in_progress"  # null resets it (the schema's patch rule)
    if "summary" in update:
        summary = update["summary"]
        part.summary = host.bounded(dicts(summary)[:SUMMARY_BLOCKS]) if summary else []
        part.clear_text()  # a summary sent whole replaces what was streamed
    if "error" in update:
        error = update["error"]
        part.error = host.clip(error) if type(error) is str else None
    host.visible_output = True
    host.updated(part)


def fold_summary_chunk(host: FoldHost, update: dict[str, Any]) -> None:
    content = update.get("content")
    if type(content) is not dict or type(content.get("type")) is not str:
        raise NotFolded("content must be a content block")
    part = _compaction(host, update.get("compactionId"))
    if part is None:
        return
    if content.get("type") == "text" and type(content.get("text")) is str:
        part.append(content["text"])
    elif len(part.summary) < SUMMARY_BLOCKS:
        part.summary.append(host.bounded(content))
    host.updated(part)
