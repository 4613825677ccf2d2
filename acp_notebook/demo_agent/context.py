"""The state and helpers that every step of a demo turn shares."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import methods
from .session import NOTES_FILE, Session
from .text import attachment_names, excerpt
from .wire import INTERNAL_ERROR, JSON, RpcError, Turn, Wire


class TurnContext:
    """What every step of a demo turn uses: the prompt, the session, pacing, the wire."""

    def __init__(
        self,
        wire: Wire,
        can: Callable[[str], bool],
        speed: float,
        session: Session,
        turn: Turn,
        blocks: list[JSON],
    ) -> None:
        """`can(capability)` tells whether the client advertised it, e.g. "terminal"."""
        self.wire, self.can, self.session, self.turn = wire, can, session, turn
        self.blocks = blocks
        self.text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        stripped = self.text.strip()
        self.command = stripped.split(None, 1)[0][1:] if stripped.startswith("/") else ""
        rest = stripped.split(None, 1)[1] if self.command and " " in stripped else ""
        self.quote = excerpt(rest) or excerpt(stripped) or "(no text)"
        self.attachments = attachment_names(blocks)
        self.number = session.turns + 1
        self.pace = speed * (9 if self.command == "slow" else 1)  # ~20 s
        if session.config["model"] == "demo-thorough":
            self.pace *= 1.3
        self.notes_path = os.path.join(session.cwd, NOTES_FILE)
        self.answer: list[str] = []
        self.plan: list[JSON] = []
        self.summary: dict[str, str] = {}

    def send(self, update: JSON) -> None:
        self.turn.check()  # after a cancel, nothing more but the prompt response
        self.wire.notify(methods.SESSION_UPDATE, {"sessionId": self.session.id, "update": update})

    def pause(self, seconds: float) -> None:
        self.turn.sleep(seconds * self.pace)

    def ask(self, method: str, params: JSON) -> JSON:
        """Calls the client and waits; raises RpcError on an error, Cancelled on cancel."""
        self.turn.check()
        _, pending = self.wire.request(method, {"sessionId": self.session.id, **params})
        response = self.turn.wait(pending)
        error = response.get("error")
        if isinstance(error, dict) or "result" not in response:
            error = error if isinstance(error, dict) else {}
            raise RpcError(
                int(error.get("code", INTERNAL_ERROR)),
                str(error.get("message", "error")),
                error.get("data"),
            )
        result = response["result"]
        return result if isinstance(result, dict) else {}

    def update_tool(self, call: str, status: str, **fields: Any) -> None:
        """Sends a `tool_call_update` for `call`: its new status and any other fields."""
        update = {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": status}
        self.send({**update, **fields})

    def call_id(self, name: str) -> str:
        return f"call_{self.number}_{name}"
