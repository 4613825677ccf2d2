"""What the demo agent offers (modes, config options, slash commands) and one session's state."""

from __future__ import annotations

import time

from .wire import JSON, Turn

NOTES_FILE = "demo_notes.md"
CONTEXT_SIZE = 200_000

MODES = [
    {"id": "ask", "name": "Ask", "description": "Answer questions; never edit files"},
    {"id": "code", "name": "Code", "description": "Read, edit (with permission) and run"},
]
CONFIG_CHOICES = {
    "model": (
        "Model",
        "model",
        [
            ("demo-fast", "Demo Fast", "Quick and cheap"),
            ("demo-thorough", "Demo Thorough", "Slower, pricier, thinks more"),
        ],
    ),
    "thought_level": (
        "Thinking",
        "thought_level",
        [("low", "Low", "A short thought"), ("high", "High", "A longer thought")],
    ),
}
COMMANDS = [
    {
        "name": "explain",
        "description": "Explain something without editing files",
        "input": {"hint": "what to explain"},
    },
    {
        "name": "plan",
        "description": "Only make a plan, run nothing",
        "input": {"hint": "what to plan"},
    },
    {
        "name": "slow",
        "description": "Stream slowly for about 20 s (try Stop)",
        "input": {"hint": "any prompt"},
    },
    {"name": "fail", "description": "End the turn with an error (shows a failed turn)"},
]
PERMISSION_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Session:
    """In-memory state of one demo session (lost when the process exits)."""

    def __init__(self, session_id: str, cwd: str) -> None:
        self.id, self.cwd = session_id, cwd
        self.mode = "code"
        self.config = {"model": "demo-fast", "thought_level": "low"}
        self.title = "Demo session"
        self.named = False  # renamed after its first prompt
        self.updated_at = now_iso()
        self.history: list[tuple[str, list[JSON]]] = []  # ("user"|"agent", content blocks)
        self.turn: Turn | None = None
        self.turns = 0
        self.used = 0
        self.cost = 0.0
        self.edit_policy: str | None = None  # set by an "always" answer: "allow" / "reject"

    def modes(self) -> JSON:
        return {"currentModeId": self.mode, "availableModes": MODES}

    def config_options(self) -> list[JSON]:
        return [
            {
                "id": config_id,
                "name": name,
                "category": category,
                "type": "select",
                "currentValue": self.config[config_id],
                "options": [{"value": v, "name": n, "description": d} for v, n, d in values],
            }
            for config_id, (name, category, values) in CONFIG_CHOICES.items()
        ]

    def info(self) -> JSON:
        return {
            "sessionId": self.id,
            "cwd": self.cwd,
            "title": self.title,
            "updatedAt": self.updated_at,
        }
