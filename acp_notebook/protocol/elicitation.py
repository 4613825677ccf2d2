"""Elicitation (`elicitation/create`): what the agent asks, the part that records it, and the
check of an answer against the form it asked for. Pure.

Form mode asks for a flat object of fields (string, number, integer, boolean, an enum or a
multi-select), URL mode for a visit to a link. The request is the agent's: it is read leniently
but bounded (fields, choices, text), and one that cannot be read is an invalid-params error. An
answer is checked and converted here ("3" for an integer field is 3), so every front-end, and a
Python handler, gives the agent the types its schema asked for.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..errors import ElicitationError
from .coerce import dicts, mapping, opt_text, text
from .weburl import WebLink, web_link

MAX_FIELDS = 50
MAX_CHOICES = 100
MAX_TEXT = 2000  # characters kept of a message, title or description
MAX_VALUE = 10_000  # characters of one answered string
#: A text field that may be longer than this (its maxLength) is answered in several lines.
MULTILINE_LENGTH = 200

ACTIONS = ("accept", "decline", "cancel")


@dataclass(slots=True, frozen=True)
class Field:
    """One input of a form."""

    name: str
    type: str  # string, number, integer, boolean, array (a multi-select)
    title: str = ""
    description: str = ""
    required: bool = False
    default: Any = None
    choices: tuple[tuple[str, str], ...] = ()  # (value, label) of an enum or a multi-select
    minimum: float | None = None
    maximum: float | None = None
    format: str = ""

    @property
    def multiline(self) -> bool:
        """Whether the answer may take several lines: a free text field (no choices, no format)
        that may be longer than `MULTILINE_LENGTH` or whose default has a line break. A form
        gives it a text area, where Enter is a new line rather than Submit."""
        if self.type != "string" or self.choices or self.format:
            return False
        long = self.maximum is not None and self.maximum > MULTILINE_LENGTH
        return long or (isinstance(self.default, str) and "\n" in self.default)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "required": self.required}
        for key, value in (("title", self.title), ("description", self.description)):
            if value:
                out[key] = value
        if self.default is not None:
            out["default"] = self.default
        if self.choices:
            out["choices"] = [list(c) for c in self.choices]
        for key, bound in (("minimum", self.minimum), ("maximum", self.maximum)):
            if bound is not None:
                out[key] = bound
        if self.format:
            out["format"] = self.format
        return out

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> Field:
        choices = [c for c in d.get("choices") or [] if isinstance(c, list) and len(c) == 2]
        return cls(
            _clip(d.get("name"), 200),
            _clip(d.get("type"), 20) or "string",
            _clip(d.get("title"), 500),
            _clip(d.get("description")),
            d.get("required") is True,
            _default(d.get("default")),
            tuple((_clip(v, 500), _clip(label, 500)) for v, label in choices[:MAX_CHOICES]),
            _number(d.get("minimum")),
            _number(d.get("maximum")),
            _clip(d.get("format"), 40),
        )


@dataclass(slots=True, eq=False)
class ElicitationPart:
    """An `elicitation/create` in the turn, and once known, its answer."""

    part_id: str
    mode: str  # "form" or "url"
    message: str
    fields: list[Field] = field(default_factory=list)
    url: str = ""
    elicitation_id: str = ""
    tool_call_id: str = ""
    #: "pending", then "accept", "decline" or "cancel".
    outcome: str = "pending"
    content: dict[str, Any] | None = None  # what was answered (accept)
    decided_by: str | None = None  # "user", "handler", "nobody to answer", "cancel", ...

    kind = "elicitation"

    @property
    def link(self) -> WebLink:
        """The URL as the browser will open it, or why it is refused (`weburl.web_link`).
        Computed from `url` each time, so a saved record is checked again when it is read."""
        return web_link(self.url) if self.mode == "url" else WebLink(refused="not a link")

    @property
    def host(self) -> str:
        """The host the browser will open (punycode), which the user must see before following
        the link (the spec); "" when the link is refused."""
        return self.link.host

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "elicitation",
            "id": self.part_id,
            "mode": self.mode,
            "message": self.message,
            "fields": [f.to_json() for f in self.fields],
            "url": self.url,
            "elicitationId": self.elicitation_id,
            "toolCallId": self.tool_call_id,
            "outcome": self.outcome,
            "content": self.content,
            "decidedBy": self.decided_by,
        }

    @classmethod
    def from_json(cls, d: dict[Any, Any]) -> ElicitationPart:
        content = d.get("content")
        return cls(
            text(d.get("id")),
            text(d.get("mode")) or "form",
            text(d.get("message")),
            [Field.from_json(f) for f in dicts(d.get("fields"))[:MAX_FIELDS]],
            text(d.get("url")),
            text(d.get("elicitationId")),
            text(d.get("toolCallId")),
            text(d.get("outcome")) or "pending",
            mapping(content) if isinstance(content, dict) else None,
            opt_text(d.get("decidedBy")),
        )


def read_request(params: Any, part_id: str) -> ElicitationPart:
    """The part for an `elicitation/create`'s params; `ElicitationError` if it cannot be read."""
    if not isinstance(params, dict):
        raise ElicitationError("elicitation/create params must be an object")
    mode = params.get("mode")
    message = _clip(params.get("message"))
    tool_call_id = _clip(params.get("toolCallId"), 200)
    if mode == "url":
        url, eid = params.get("url"), params.get("elicitationId")
        if not isinstance(url, str) or not isinstance(eid, str):
            raise ElicitationError("a url elicitation needs url and elicitationId strings")
        # Not a web address at all: the agent's mistake, said to it. One that is, but that
        # would mislead (user info, read differently by browsers), is shown refused in the card.
        if urlsplit(url).scheme not in ("https", "http") or len(url) > MAX_TEXT:
            raise ElicitationError("the elicitation url must be an http(s) URL")
        # NULs dropped as the saved record drops them: the link read live is the one it keeps.
        return ElicitationPart(
            part_id, "url", message, [], text(url), _clip(eid, 200), tool_call_id
        )
    if mode != "form":
        raise ElicitationError(f"unsupported elicitation mode {text(mode)[:40]!r}")
    schema = params.get("requestedSchema")
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise ElicitationError("a form elicitation needs requestedSchema.properties")
    props = schema["properties"]
    if len(props) > MAX_FIELDS:
        raise ElicitationError(f"a form may have at most {MAX_FIELDS} fields")
    required = {r for r in schema.get("required") or [] if isinstance(r, str)}
    fields = [_field(str(name)[:200], p, required) for name, p in props.items()]
    if any(f is None for f in fields):
        raise ElicitationError("a form field has a type this client does not know")
    return ElicitationPart(
        part_id, "form", message, [f for f in fields if f is not None], tool_call_id=tool_call_id
    )


def _clip(value: Any, n: int = MAX_TEXT) -> str:
    return text(value)[:n]


def _field(name: str, p: Any, required: set[str]) -> Field | None:
    if not isinstance(p, dict):
        return None
    kind = p.get("type")
    choices: list[tuple[str, str]] = []
    items = p.get("items")
    source: dict[Any, Any] = items if kind == "array" and isinstance(items, dict) else p
    for value in (source.get("enum") or [])[:MAX_CHOICES]:
        choices.append((_clip(value, 500), _clip(value, 500)))
    for option in dicts(source.get("oneOf") or source.get("anyOf"))[:MAX_CHOICES]:
        value = _clip(option.get("const"), 500)
        choices.append((value, _clip(option.get("title"), 500) or value))
    if kind not in ("string", "number", "integer", "boolean", "array"):
        return None
    if kind == "array" and not choices:
        return None  # only multi-selects are arrays in a form
    return Field(
        name,
        str(kind),
        _clip(p.get("title"), 500),
        _clip(p.get("description")),
        name in required or bool(p.get("required") is True),
        _default(p.get("default")),
        tuple(choices),
        _number(p.get("minimum", p.get("minLength"))),
        _number(p.get("maximum", p.get("maxLength"))),
        _clip(p.get("format"), 40),
    )


def _default(value: Any) -> Any:
    if isinstance(value, str):
        return value[:MAX_VALUE]
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, list):
        return [str(v)[:500] for v in value[:MAX_CHOICES]]
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def check_answer(part: ElicitationPart, content: Any) -> dict[str, Any]:
    """`content` checked against the form and converted to its types; `ElicitationError` says
    which field is wrong and why. Fields left empty are left out (required ones are an error)."""
    if not isinstance(content, dict):
        raise ElicitationError("the answer must be a mapping of field names to values")
    known = {f.name: f for f in part.fields}
    unknown = sorted(set(content) - set(known))
    if unknown:
        raise ElicitationError(f"no field named {unknown[0]!r} in this form")
    out: dict[str, Any] = {}
    for f in part.fields:
        value = content.get(f.name)
        if value is None or value == "" or value == []:
            if f.required:
                raise ElicitationError(f"{f.title or f.name} is required", f.name)
            continue
        try:
            out[f.name] = _convert(f, value)
        except ElicitationError as exc:  # said next to the field it is about
            raise ElicitationError(str(exc), f.name) from None
    return out


def _convert(f: Field, value: Any) -> Any:
    label = f.title or f.name
    values = {v for v, _ in f.choices}
    if f.type == "boolean":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise ElicitationError(f"{label} must be true or false")
        return value
    if f.type in ("number", "integer"):
        try:
            number = float(value) if f.type == "number" else int(str(value).strip())
        except (TypeError, ValueError):
            what = "a number" if f.type == "number" else "a whole number"
            raise ElicitationError(f"{label} must be {what}") from None
        # NaN and the infinities ("1e999" parses to inf) are no JSON number: not an answer.
        if isinstance(value, bool) or not math.isfinite(number):
            raise ElicitationError(f"{label} must be a finite number")
        if f.minimum is not None and number < f.minimum:
            raise ElicitationError(f"{label} must be at least {f.minimum:g}")
        if f.maximum is not None and number > f.maximum:
            raise ElicitationError(f"{label} must be at most {f.maximum:g}")
        return number
    if f.type == "array":
        items = value if isinstance(value, list | tuple) else [value]
        bad = [v for v in items if str(v) not in values]
        if bad:
            raise ElicitationError(f"{label}: {str(bad[0])[:40]!r} is not one of the choices")
        return [str(v) for v in items]
    value = str(value)
    if len(value) > MAX_VALUE:
        raise ElicitationError(f"{label} is longer than {MAX_VALUE} characters")
    if values and value not in values:
        raise ElicitationError(f"{label}: {value[:40]!r} is not one of the choices")
    if f.format == "email" and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", value):
        raise ElicitationError(f"{label} must be an email address")
    if f.minimum is not None and len(value) < f.minimum:
        raise ElicitationError(f"{label} must have at least {f.minimum:g} characters")
    if f.maximum is not None and len(value) > f.maximum:
        raise ElicitationError(f"{label} must have at most {f.maximum:g} characters")
    return value
