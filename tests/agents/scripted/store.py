"""The scripted agent's sessions: what load replays, list pages through, and prompts need."""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .wire import DEFAULT_CONFIG, MODEL_CHOICES, NOT_FOUND, JsonObj, RpcError, now_iso


def config_options(values: JsonObj) -> list[JsonObj]:
    return [
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": values["model"],
            "options": MODEL_CHOICES,
        },
        {"id": "verbose", "name": "Verbose", "type": "boolean", "currentValue": values["verbose"]},
    ]


@dataclass
class Session:
    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str = field(default_factory=now_iso)
    history: list[JsonObj] = field(default_factory=list)  # every update, for load replay
    mode_id: str = "ask"
    config: JsonObj = field(default_factory=lambda: dict(DEFAULT_CONFIG))
    # The `next_prompt` step's steps: the session's next prompt that is no #script runs them.
    next_steps: list[JsonObj] | None = None
    # The `mcpServers` of session/new, load or resume (not persisted): the `mcp` step's servers.
    mcp_servers: list[JsonObj] = field(default_factory=list)
    # The `systemPrompt` of session/new, load or resume (not persisted: a client re-sends it).
    system_prompt: JsonObj | None = None

    def to_json(self) -> JsonObj:
        return {
            "sessionId": self.session_id,
            "cwd": self.cwd,
            "title": self.title,
            "updatedAt": self.updated_at,
            "modeId": self.mode_id,
            "config": self.config,
            "history": self.history,
        }

    @classmethod
    def from_json(cls, data: JsonObj) -> Session:
        return cls(
            data["sessionId"],
            data["cwd"],
            data.get("title"),
            data["updatedAt"],
            data.get("history", []),
            data.get("modeId", "ask"),
            {**DEFAULT_CONFIG, **data.get("config", {})},
        )

    def listing(self) -> JsonObj:
        entry: JsonObj = {"sessionId": self.session_id, "cwd": self.cwd}
        if self.title is not None:
            entry["title"] = self.title
        entry["updatedAt"] = self.updated_at
        return entry


class Store:
    """Sessions of this process, optionally persisted as DIR/<sessionId>.json.

    "Known" sessions can be loaded or resumed; "live" ones (created, loaded or resumed in
    this process, not closed) accept prompts, as with a real agent after a restart.
    """

    def __init__(self, state_dir: Path | None, log: Callable[[str], None]) -> None:
        self.lock = threading.RLock()
        self._log = log
        self._dir = state_dir
        self._known: dict[str, Session] = {}
        self._live: set[str] = set()
        if state_dir is not None:
            state_dir.mkdir(parents=True, exist_ok=True)

    def create(self, cwd: str) -> Session:
        session = Session(f"sess_{uuid.uuid4().hex[:16]}", cwd)
        with self.lock:
            self._known[session.session_id] = session
            self._live.add(session.session_id)
        self.save(session)
        return session

    def find(self, session_id: str) -> Session:
        with self.lock:
            session = self._known.get(session_id) or self._read(self._path(session_id))
            if session is None:
                raise RpcError(NOT_FOUND, f"Session not found: {session_id}")
            self._known[session_id] = session
            return session

    def live(self, session_id: str) -> Session:
        with self.lock:
            if session_id in self._live:
                return self._known[session_id]
        raise RpcError(NOT_FOUND, f"Session not found: {session_id}")

    def activate(self, session: Session) -> None:
        with self.lock:
            self._live.add(session.session_id)

    def deactivate(self, session_id: str) -> None:
        with self.lock:
            self._live.discard(session_id)

    def delete(self, session_id: str) -> None:
        with self.lock:
            self._known.pop(session_id, None)
            self._live.discard(session_id)
            path = self._path(session_id)
            if path is not None:
                path.unlink(missing_ok=True)

    def record(self, session: Session, update: JsonObj) -> None:
        with self.lock:
            session.history.append(update)
            if update.get("sessionUpdate") == "session_info_update" and "title" in update:
                session.title = update["title"]

    def history(self, session: Session) -> list[JsonObj]:
        with self.lock:
            return list(session.history)

    def touch(self, session: Session) -> None:
        with self.lock:
            session.updated_at = now_iso()
        self.save(session)

    def save(self, session: Session) -> None:
        with self.lock:
            path = self._path(session.session_id)
            # A deleted session must not come back when its last turn finishes.
            if path is None or session.session_id not in self._known:
                return
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(session.to_json()), encoding="utf-8")
            os.replace(tmp, path)  # atomic: another process may list or load concurrently

    def all(self) -> list[Session]:
        with self.lock:
            sessions = dict(self._known)
            if self._dir is not None:
                for path in self._dir.glob("*.json"):
                    if path.stem not in sessions and (found := self._read(path)) is not None:
                        sessions[path.stem] = found
            return list(sessions.values())

    def _path(self, session_id: str) -> Path | None:
        if self._dir is None or not re.fullmatch(r"[A-Za-z0-9_-]+", session_id):
            return None
        return self._dir / f"{session_id}.json"

    def _read(self, path: Path | None) -> Session | None:
        if path is None or not path.is_file():
            return None
        try:
            return Session.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as exc:
            self._log(f"ignoring unreadable session file {path}: {exc}")
            return None
