"""Folding the agent's plans: the legacy `plan` (one checklist, each update replaces it whole)
and plan operations (ACP v1, stable 2026-11-20, for a client that opted in with
`clientCapabilities.plan`): several plans by `planId`, each a checklist (`items`) or a Markdown
document (`markdown`, with the absolute `path` of its file, if any), replaced whole by the next
`plan_update` of its id and gone with `plan_removed`.

A removed plan stays in the record, marked removed (the live view stops drawing it; the record
says it was removed). The August 2026 draft's `file` plans (a URI) are not in the stable spec:
kept as raw parts. Pure, no I/O; entries and characters bounded as the legacy plan's are.
"""

from __future__ import annotations

from typing import Any, Protocol

from . import schema
from .notes import NotFolded
from .state import PlanEntry, PlanPart
from .tool_patch import enum_value

#: Plans by id a turn keeps (more are dropped and counted).
MAX_PLANS = 50


class PlanHost(Protocol):
    """What folding plans needs of the fold (its `PartWriter`)."""

    visible_output: bool
    #: The record's legacy plan (the one without an id), if it has one.
    legacy_plan: PlanPart | None

    def new_id(self, prefix: str) -> str: ...

    def add_part(self, part: PlanPart, kind: str) -> bool: ...

    def updated(self, part: PlanPart) -> None: ...

    def find_part(self, kind: str, key: str) -> Any: ...

    def count_parts(self, kind: str) -> int: ...

    def clip(self, value: str) -> str: ...

    def entries(self, raw: Any) -> list[PlanEntry]: ...

    def plan_cap(self) -> int: ...

    def keep_entries(self, entries: list[PlanEntry], past: int) -> list[PlanEntry]: ...


def _entry(e: Any) -> PlanEntry | None:
    if not isinstance(e, dict) or type(e.get("content")) is not str:
        return None
    priority, status = e.get("priority"), e.get("status")
    return PlanEntry(
        e["content"],
        priority if type(priority) is str else "medium",
        status if type(status) is str else "pending",
    )


def read_entries(raw: Any, cap: int) -> tuple[list[PlanEntry], int]:
    """The entries of a plan (malformed ones skipped, as the schema says) up to `cap`, and how
    many were past it."""
    if type(raw) is not list:
        raise NotFolded("entries must be a list")
    kept = [e for e in (_entry(x) for x in raw[:cap]) if e is not None]
    return kept, max(0, len(raw) - cap)


def fold_plan(host: PlanHost, update: dict[str, Any]) -> None:
    """The legacy `plan`: the turn's one checklist, replaced whole by each update (validated
    with the SDK's model: a plan it does not read is kept as a raw part)."""
    cap, raw = host.plan_cap(), update.get("entries")
    past = len(raw) - cap if type(raw) is list and len(raw) > cap else 0
    if past and isinstance(raw, list):  # cut before validating: it costs per entry
        update = {**update, "entries": raw[:cap]}
    model = schema.validate_update(update)
    entries = host.keep_entries(
        [PlanEntry(e.content, enum_value(e.priority), enum_value(e.status)) for e in model.entries],
        past,
    )
    part = host.legacy_plan
    if part is None:
        part = PlanPart(host.new_id("plan"))
        if not host.add_part(part, "parts"):
            return
        host.legacy_plan = part
    part.entries = entries
    host.visible_output = True
    host.updated(part)


def fold_plan_update(host: PlanHost, update: dict[str, Any]) -> None:
    plan = update.get("plan")
    if type(plan) is not dict:
        raise NotFolded("plan must be an object")
    kind, plan_id = plan.get("type"), plan.get("planId")
    if kind not in ("items", "markdown"):
        raise NotFolded(f"a plan of type {str(kind)[:40]!r} is not one this client shows")
    if type(plan_id) is not str or not plan_id:
        raise NotFolded("planId must be a non-empty string")
    if kind == "markdown" and type(plan.get("content")) is not str:
        raise NotFolded("a Markdown plan needs its content")
    key = host.clip(plan_id)[:200]
    part = host.find_part("plan", key)
    if not isinstance(part, PlanPart):
        if host.count_parts("plan") >= MAX_PLANS:
            raise NotFolded(f"more than {MAX_PLANS} plans in one turn")
        part = PlanPart(host.new_id("plan"), plan_id=key)
        if not host.add_part(part, "plans"):
            return
    part.removed = False
    if kind == "items":
        part.entries, part.markdown, part.path = host.entries(plan.get("entries")), None, None
    else:
        part.entries = []
        part.markdown = host.clip(plan["content"])
        path = plan.get("path")
        part.path = host.clip(path)[:4096] if type(path) is str else None
    host.visible_output = True
    host.updated(part)


def fold_plan_removed(host: PlanHost, update: dict[str, Any]) -> None:
    plan_id = update.get("planId")
    if type(plan_id) is not str:
        raise NotFolded("planId must be a string")
    part = host.find_part("plan", host.clip(plan_id)[:200])
    if isinstance(part, PlanPart) and not part.removed:
        part.removed = True
        host.updated(part)
