"""The official SDK's schema models, loaded once and lazily.

`acp.schema` builds a few hundred pydantic models on import (about a second), so it is not
imported when the extension loads; the first connection pays for it. The models are lenient:
invalid optional fields fall back to defaults and invalid list items are skipped.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = [
    "ValidationError",
    "describe",
    "dump",
    "models",
    "validate_tool_call_update",
    "validate_update",
]

_UPDATE_MODELS = {
    "user_message_chunk": "UserMessageChunk",
    "agent_message_chunk": "AgentMessageChunk",
    "agent_thought_chunk": "AgentThoughtChunk",
    "tool_call": "ToolCallStart",
    "tool_call_update": "ToolCallProgress",
    "plan": "AgentPlanUpdate",
    "available_commands_update": "AvailableCommandsUpdate",
    "current_mode_update": "CurrentModeUpdate",
    "config_option_update": "ConfigOptionUpdate",
    "session_info_update": "SessionInfoUpdate",
    "usage_update": "UsageUpdate",
}


@cache
def models() -> ModuleType:
    import acp.schema

    return acp.schema


@cache
def _update_model(kind: str) -> type[BaseModel]:
    return getattr(models(), _UPDATE_MODELS[kind])  # type: ignore[no-any-return]


def validate_update(update: dict[str, Any]) -> Any:
    """Validate one known `session/update` payload; raises `ValidationError`."""
    return _update_model(update["sessionUpdate"]).model_validate(update)


def validate_tool_call_update(tool_call: dict[str, Any]) -> Any:
    return models().ToolCallUpdate.model_validate(tool_call)


def dump(model: Any) -> dict[str, Any]:
    """A schema model back to its wire form."""
    if isinstance(model, BaseModel):
        return model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dict(model) if isinstance(model, dict) else {"value": model}


def describe(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return f"invalid update: {exc}"
    where = ".".join(str(x) for x in errors[0]["loc"])
    return f"invalid {where or 'update'}: {errors[0]['msg']}"
