"""Structured output: the schema that goes with a prompt, and the answer parsed and validated.

Pure (no I/O). `OutputSpec.of(output_type)` takes what `session.prompt(output_type=...)` and
`%%agent --schema NAME` accept: a pydantic model class (or any type pydantic validates, such as
`list[int]`), validated with pydantic's `TypeAdapter`; or a JSON-schema dict, validated with
`jsonschema` (the reference validator, which nbformat already depends on). `instructions()` is
the text added to the prompt; `spec.check(answer)` finds the JSON in the agent's answer (the
last fenced json block, else the whole text) and validates it.

Every byte of the answer is hostile: it is bounded before parsing, and an error message quotes
it only through `repr()` clipped to a few dozen characters, so the message stays one line with
no markup or control characters of the agent's.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import SchemaError
from .limits import MAX_ANSWER_CHARS, MAX_SCHEMA_CHARS

_MAX_ERRORS = 5  # validation errors named in a message
_QUOTE = 60  # characters of the agent's text quoted in an error


@dataclass(frozen=True, slots=True)
class Checked:
    """A validated answer: `value` for `result.output`, `json` for the transcript."""

    value: Any
    json: Any


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """What a structured turn must answer: a name, its JSON schema, and its validator."""

    name: str
    schema: dict[str, Any]
    validate: Callable[[str], Checked]  # JSON text -> value; raises ValueError with a message

    @classmethod
    def of(cls, output_type: Any) -> OutputSpec:
        """The spec of a pydantic model class (or type), or of a JSON-schema dict.

        Raises `SchemaError` for anything else, and for a schema that is not valid."""
        if isinstance(output_type, dict):
            return _dict_spec(output_type)
        return _type_spec(output_type)

    def check(self, answer: str) -> Checked:
        """The answer's JSON, validated; `ValueError` says why not (agent text clipped)."""
        if len(answer) > MAX_ANSWER_CHARS:
            raise ValueError(
                f"the answer is {len(answer):,} characters, over the {MAX_ANSWER_CHARS:,} a "
                "structured answer may have"
            )
        return self.validate(extract_json(answer))

    def rebuild(self, output_json: Any) -> Checked:
        """The object of a recorded `output_json` (a transcript's `output`), validated anew:
        how a replay gives `result.output` back without the agent."""
        return self.validate(json.dumps(output_json))


def instructions(spec: OutputSpec) -> str:
    """The text block sent with the prompt: how to answer, and the schema."""
    schema = json.dumps(spec.schema, indent=2, ensure_ascii=False)
    return (
        "Answer with a single fenced ```json block holding one JSON value that matches this "
        f"JSON schema ({spec.name}). Put nothing after the block.\n\n```json\n{schema}\n```"
    )


def reask(error: str) -> str:
    """The text of the second prompt, after an answer that did not validate."""
    return (
        f"Your answer did not match the JSON schema: {error}\n\nAnswer again with a single "
        "fenced ```json block whose JSON matches the schema given above, and nothing after it."
    )


def extract_json(answer: str) -> str:
    """The last fenced ```json block of `answer`; else its last bare ``` block; else the whole
    text. One pass over the lines (a regex could backtrack on many unclosed fences)."""
    last_json: list[str] | None = None
    last_bare: list[str] | None = None
    block: list[str] | None = None
    label = ""
    for line in answer.split("\n"):
        stripped = line.strip()
        if block is None:
            if stripped.startswith("```"):
                block, label = [], stripped[3:].strip().lower().partition(" ")[0]
        elif stripped == "```":
            if label == "json":
                last_json = block
            elif not label:
                last_bare = block
            block = None
        else:
            block.append(line)
    found = last_json if last_json is not None else last_bare
    return "\n".join(found) if found is not None else answer.strip()


def quote(text: str) -> str:
    """The agent's text for an error message: a clipped repr (escaped, one line)."""
    clipped = text[:_QUOTE]
    return repr(clipped) + ("…" if len(text) > _QUOTE else "")


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        raise ValueError(f"not valid JSON ({detail}): {quote(text)}") from None


def _type_spec(output_type: Any) -> OutputSpec:
    from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except (PydanticSchemaGenerationError, TypeError, ValueError) as exc:
        raise SchemaError(
            f"{_name(output_type)} is not a pydantic model, a type pydantic validates, or a "
            f"JSON-schema dict: {exc}"
        ) from None

    def validate(text: str) -> Checked:
        try:
            value = adapter.validate_json(text)
        except ValidationError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                _loads(text)  # the same message as a dict schema gives
            raise ValueError(_pydantic_errors(exc)) from None
        return Checked(value, adapter.dump_python(value, mode="json"))

    return OutputSpec(_name(output_type), _sized(schema), validate)


def _dict_spec(schema: dict[str, Any]) -> OutputSpec:
    from jsonschema import SchemaError as InvalidSchema
    from jsonschema.validators import validator_for

    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
    except InvalidSchema as exc:
        raise SchemaError(f"not a valid JSON schema: {exc.message}") from None
    validator = cls(schema)

    def validate(text: str) -> Checked:
        value = _loads(text)
        errors = list(itertools.islice(validator.iter_errors(value), _MAX_ERRORS))
        if errors:
            raise ValueError("; ".join(_jsonschema_error(e) for e in errors))
        return Checked(value, value)

    title = schema.get("title")
    return OutputSpec(title if isinstance(title, str) else "schema", _sized(schema), validate)


def _sized(schema: dict[str, Any]) -> dict[str, Any]:
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"the schema is not JSON: {exc}") from None
    if size > MAX_SCHEMA_CHARS:
        raise SchemaError(f"the schema is {size:,} characters of JSON, over {MAX_SCHEMA_CHARS:,}")
    return schema


def _name(output_type: Any) -> str:
    return str(getattr(output_type, "__name__", None) or repr(output_type))[:80]


def _pydantic_errors(exc: Any) -> str:
    """One line per error (at most a few): where, what; the offending value clipped."""
    out = []
    for err in exc.errors(include_url=False)[:_MAX_ERRORS]:
        where = ".".join(str(p) for p in err["loc"]) or "(the value)"
        given = err.get("input")
        quoted = quote(given if isinstance(given, str) else _json_text(given))
        out.append(f"{where}: {err['msg']} (got {quoted})")
    more = exc.error_count() - len(out)
    return "; ".join(out) + (f"; and {more} more" if more > 0 else "")


def _jsonschema_error(err: Any) -> str:
    where = ".".join(str(p) for p in err.absolute_path) or "(the value)"
    # err.message quotes the value; rebuilt from the validator's keyword so the agent's text
    # appears only clipped.
    rule = _json_text(err.validator_value)
    rule = rule if len(rule) <= 80 else rule[:79] + "…"
    return f"{where}: fails {err.validator!r} {rule} (got {quote(_json_text(err.instance))})"


def _json_text(value: Any) -> str:
    """A JSON value as text, at most a few hundred characters; never raises."""
    try:
        return json.dumps(value, default=str, ensure_ascii=False)[:200]
    except (ValueError, RecursionError):
        return f"({type(value).__name__})"
