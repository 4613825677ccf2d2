"""JSON schema, written by hand from the spec, for what ACP v1 stabilized after the SDK the
project pins (0.12.1, schema of 2026-08): subagents (2026-11-20), plan operations (2026-11-20),
session notices and compaction (2026-10-09), the tool call's `name` (2026-09-17), the client
system prompt (2026-11-06), and the unstable prompt suggestions.

Sources: the announcements of those dates on agentclientprotocol.com, the v1 pages they link
(`protocol/v1/subagents`, `agent-plan#plan-operations`, `prompt-turn#session-notices`,
`session-setup#system-prompt`), and the v1 schema types of the Rust SDK 5.x (`SubagentUpdate`,
`StateUpdate`, `SessionMessageChunk`, `CompactionUpdate`, `Notice`,
`SessionSystemPromptCapabilities`). As in `tests/conformance.py`: the types and required fields,
no salvage, `_meta` and unknown keys allowed.
"""

from __future__ import annotations

from typing import Any

_META = {"type": ["object", "null"]}
_MARKER = {"type": ["object", "null"], "properties": {"_meta": _META}}  # {} = supported
_TEXT = {"type": "string"}
_OPT_TEXT = {"type": ["string", "null"]}
# A content block: its discriminator and the fields each type requires (content.mdx).
_BLOCK = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"type": "string"}},
    "allOf": [
        {
            "if": {"properties": {"type": {"const": "text"}}},
            "then": {"required": ["text"], "properties": {"text": _TEXT}},
        },
        {
            "if": {"properties": {"type": {"enum": ["image", "audio"]}}},
            "then": {"required": ["data", "mimeType"]},
        },
        {
            "if": {"properties": {"type": {"const": "resource_link"}}},
            "then": {"required": ["uri", "name"]},
        },
        {
            "if": {"properties": {"type": {"const": "resource"}}},
            "then": {"required": ["resource"]},
        },
    ],
}
_PLAN_ENTRY = {
    "type": "object",
    "required": ["content", "priority", "status"],
    "properties": {
        "content": _TEXT,
        "priority": {"enum": ["high", "medium", "low"]},
        "status": {"enum": ["pending", "in_progress", "completed"]},
    },
}
# An open enum: the known words, or a custom one (`_x`); other unknown words are reserved.
_OPEN = {"type": "string"}

#: The client's opt-ins, in `InitializeRequest.clientCapabilities`.
CLIENT_CAPABILITIES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "subagents": _MARKER,
        "plan": _MARKER,
        "session": {
            "type": ["object", "null"],
            "properties": {
                "notices": _MARKER,
                "compaction": _MARKER,
                "promptSuggestions": _MARKER,
            },
        },
    },
}

#: `systemPrompt` on session/new, session/load and session/resume (and the unstable
#: session/fork, whose request the SDK's schema has without it).
SYSTEM_PROMPT: dict[str, Any] = {
    "type": ["object", "null"],
    "required": ["mode", "content"],
    "properties": {
        "mode": {"enum": ["append", "override"]},
        "content": {"type": "array", "items": _BLOCK},
        "_meta": _META,
    },
}

_STATE = {
    "type": ["object", "null"],
    "required": ["state"],
    "properties": {
        "state": _OPEN,  # running, idle, requires_action, unknown, _x
        "stopReason": _OPEN,  # on idle: end_turn … cancelled, error, _x
    },
}

#: The new `session/update` kinds, by `sessionUpdate` (the update object's schema).
UPDATES: dict[str, dict[str, Any]] = {
    "subagent_update": {
        "required": ["sessionId"],
        "properties": {
            "sessionId": _TEXT,
            "title": _OPT_TEXT,
            "description": _OPT_TEXT,
            "capabilities": {
                "type": ["object", "null"],
                "properties": {"cancel": _MARKER, "_meta": _META},
            },
            "state": _STATE,
        },
    },
    "session_message_chunk": {
        "required": ["messageId", "content"],
        "properties": {
            "messageId": _TEXT,
            "senderSessionId": _OPT_TEXT,
            "recipientSessionId": _OPT_TEXT,
            "content": _BLOCK,
        },
    },
    "session_message": {
        "required": ["messageId"],
        "properties": {
            "messageId": _TEXT,
            "senderSessionId": _OPT_TEXT,
            "recipientSessionId": _OPT_TEXT,
            "content": {"type": ["array", "null"], "items": _BLOCK},
        },
    },
    "plan_update": {
        "required": ["plan"],
        "properties": {
            "plan": {
                "type": "object",
                "required": ["type", "planId"],
                "properties": {"type": {"enum": ["items", "markdown"]}, "planId": _TEXT},
                "allOf": [
                    {
                        "if": {"properties": {"type": {"const": "items"}}},
                        "then": {
                            "required": ["entries"],
                            "properties": {"entries": {"type": "array", "items": _PLAN_ENTRY}},
                        },
                    },
                    {
                        "if": {"properties": {"type": {"const": "markdown"}}},
                        "then": {
                            "required": ["content"],
                            "properties": {"content": _TEXT, "path": _OPT_TEXT},
                        },
                    },
                ],
            }
        },
    },
    "plan_removed": {"required": ["planId"], "properties": {"planId": _TEXT}},
    "notice": {
        "required": ["severity", "title"],
        "properties": {
            "severity": _OPEN,  # info, warning, error, _x
            "title": {"type": "string", "minLength": 1},
            "description": _OPT_TEXT,
        },
    },
    "compaction_update": {
        "required": ["compactionId"],
        "properties": {
            "compactionId": _TEXT,
            "status": _OPEN,  # in_progress, completed, failed, cancelled, _x
            "summary": {"type": ["array", "null"], "items": _BLOCK},
            "error": _OPT_TEXT,
        },
    },
    "compaction_summary_chunk": {
        "required": ["compactionId", "content"],
        "properties": {"compactionId": _TEXT, "content": _BLOCK},
    },
    # Unstable (RFD prompt-suggestions; the Rust schema's `PromptSuggestionsUpdate`).
    "prompt_suggestions_update": {
        "required": ["suggestions"],
        "properties": {
            "suggestions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["prompt"],
                    "properties": {"prompt": {"type": "array", "items": _BLOCK}, "_meta": _META},
                },
            }
        },
    },
}

#: Which opt-in (a path in `clientCapabilities`) each kind needs.
NEEDS: dict[str, tuple[str, ...]] = {
    "subagent_update": ("subagents",),
    "session_message_chunk": ("subagents",),
    "session_message": ("subagents",),
    "plan_update": ("plan",),
    "plan_removed": ("plan",),
    "notice": ("session", "notices"),
    "compaction_update": ("session", "compaction"),
    "compaction_summary_chunk": ("session", "compaction"),
    "prompt_suggestions_update": ("session", "promptSuggestions"),
}


def notification(kind: str) -> dict[str, Any]:
    """The schema of a `session/update` notification's params carrying a `kind` update."""
    update = UPDATES[kind]
    return {
        "type": "object",
        "required": ["sessionId", "update"],
        "properties": {
            "sessionId": _TEXT,
            "update": {
                "type": "object",
                "required": ["sessionUpdate", *update["required"]],
                "properties": {
                    "sessionUpdate": {"const": kind},
                    "_meta": _META,
                    **update["properties"],
                },
            },
            "_meta": _META,
        },
    }


def has(capabilities: Any, path: tuple[str, ...]) -> bool:
    """Whether `capabilities` has an object at `path` (a marker: present and not null)."""
    node = capabilities
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return isinstance(node, dict)
