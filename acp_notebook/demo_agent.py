"""The embedded demo ACP agent: `python -m acp_notebook.demo_agent`.

acp_notebook starts it when no agent is configured, so a new user sees every feature of the
client (thoughts, plans, tool calls, a permission prompt with a diff, file writes, command
output, Markdown answers, usage and cost, modes, config options, slash commands, session
list/load/resume/close, Stop, failed turns) without a network or an API key.

It speaks ACP v1 as newline-delimited JSON-RPC 2.0 on stdin/stdout and logs to stderr only.
It is stdlib-only and imports nothing else from acp_notebook, so it starts in a few tens of
milliseconds. The main thread keeps reading stdin while each turn runs in its own thread, so
`session/cancel` and the client's answers to the agent's own requests arrive mid-turn.

Environment: ACP_NOTEBOOK_DEMO_SPEED multiplies every delay (default 1, about 2 s a turn;
0 = no delays, for tests). Prompts starting with /fail end in a JSON-RPC error, /slow streams
for about 20 s (to try Stop), /plan only plans, /explain never edits.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

JSON = dict[str, Any]

VERSION = "0.1.0"
NOTES_FILE = "demo_notes.md"
CONTEXT_SIZE = 200_000
SPEED_ENV = "ACP_NOTEBOOK_DEMO_SPEED"

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND = -32700, -32600, -32601
INVALID_PARAMS, INTERNAL_ERROR, NOT_FOUND = -32602, -32603, -32002

MODES = [
    {"id": "ask", "name": "Ask", "description": "Answer questions; never edit files"},
    {"id": "code", "name": "Code", "description": "Read, edit (with permission) and run"},
]
CONFIG_CHOICES = {
    "model": ("Model", "model", [
        ("demo-fast", "Demo Fast", "Quick and cheap"),
        ("demo-thorough", "Demo Thorough", "Slower, pricier, thinks more")]),
    "thought_level": ("Thinking", "thought_level", [
        ("low", "Low", "A short thought"),
        ("high", "High", "A longer thought")]),
}
COMMANDS = [
    {"name": "explain", "description": "Explain something without editing files",
     "input": {"hint": "what to explain"}},
    {"name": "plan", "description": "Only make a plan, run nothing",
     "input": {"hint": "what to plan"}},
    {"name": "slow", "description": "Stream slowly for about 20 s (try Stop)",
     "input": {"hint": "any prompt"}},
    {"name": "fail", "description": "End the turn with an error (shows a failed turn)"},
]
PERMISSION_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]
CODE_SAMPLE = """```python
# What a real agent might run next to check its edit
from pathlib import Path

notes = Path("demo_notes.md").read_text()
print(notes.count("\\n## "), "demo sections so far")
```
"""


def log(message: str) -> None:
    print(f"[acp-notebook-demo] {message}", file=sys.stderr, flush=True)


def read_speed() -> float:
    """The delay multiplier from the environment; a bad value must not stop the demo."""
    raw = os.environ.get(SPEED_ENV, "1")
    try:
        speed = float(raw)
    except ValueError:
        speed = -1.0
    if not speed >= 0:  # also rejects NaN
        log(f"ignoring {SPEED_ENV}={raw!r}; using 1")
        return 1.0
    return speed


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def text_block(text: str) -> JSON:
    return {"type": "text", "text": text}


def text_content(text: str) -> JSON:
    return {"type": "content", "content": text_block(text)}


def chunks(text: str, words: int = 3) -> list[str]:
    """Splits text into small pieces that join back exactly, like a token stream."""
    pieces = re.findall(r"\S+\s*|\s+", text)
    return ["".join(pieces[i:i + words]) for i in range(0, len(pieces), words)]


def excerpt(text: str, limit: int = 60) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = " ".join(line.split())
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def attachment_names(blocks: list[JSON]) -> list[str]:
    """Names of the non-text prompt blocks, so the answer can mention what was attached."""
    names: list[str] = []
    for block in blocks:
        kind, uri = block.get("type"), ""
        if kind == "resource_link":
            uri = str(block.get("name") or block.get("uri") or "")
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            uri = str(block["resource"].get("uri") or "")
        elif kind in ("image", "audio"):
            uri = str(block.get("uri") or f"{kind} ({block.get('mimeType', '?')})")
        if uri:
            names.append(uri.rstrip("/").rsplit("/", 1)[-1] or uri)
    return names


class RpcError(Exception):
    """Raised by a handler to answer its request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class Cancelled(Exception):
    """Unwinds a turn that was cancelled; nothing more is sent but the response."""


class Pending:
    """One request the agent sent to the client, waiting for its response."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: JSON | None = None


class Turn:
    """Cancellation state of one running prompt turn."""

    def __init__(self, request_id: Any) -> None:
        self.request_id = request_id
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._waiting: set[Pending] = set()

    def cancel(self) -> None:
        # Wakes every wait at once so the turn can answer "cancelled" without waiting for
        # the client's replies (it answers permission requests with "cancelled" later).
        with self._lock:
            self.cancelled.set()
            for pending in self._waiting:
                pending.done.set()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.cancelled.wait(seconds)
        self.check()

    def wait(self, pending: Pending) -> JSON:
        with self._lock:
            if self.cancelled.is_set():
                raise Cancelled
            self._waiting.add(pending)
        pending.done.wait()
        with self._lock:
            self._waiting.discard(pending)
        self.check()
        assert pending.response is not None
        return pending.response


class Wire:
    """JSON-RPC over a byte stream, shared by the reader thread and the turn threads."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[Any, Pending] = {}

    def send(self, message: JSON) -> None:
        # ensure_ascii keeps U+2028 and friends escaped, so no client splits a line early.
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            try:
                self._out.write(line)
                self._out.flush()
            except (OSError, ValueError):
                pass  # the client went away; the reader will see EOF and stop

    def respond(self, request_id: Any, result: JSON) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def fail(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: JSON = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def notify(self, method: str, params: JSON) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: JSON) -> tuple[Any, Pending]:
        pending = Pending()
        with self._lock:
            request_id, self._next_id = self._next_id, self._next_id + 1
            self._pending[request_id] = pending
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id, pending

    def resolve(self, message: JSON) -> None:
        with self._lock:
            pending = self._pending.pop(message.get("id"), None)
        if pending is not None:  # late answers to abandoned requests are simply dropped
            pending.response = message
            pending.done.set()


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
        return [{"id": config_id, "name": name, "category": category, "type": "select",
                 "currentValue": self.config[config_id],
                 "options": [{"value": v, "name": n, "description": d} for v, n, d in values]}
                for config_id, (name, category, values) in CONFIG_CHOICES.items()]

    def info(self) -> JSON:
        return {"sessionId": self.id, "cwd": self.cwd, "title": self.title,
                "updatedAt": self.updated_at}


class DemoAgent:
    """Dispatches the client's messages; each prompt turn runs in a thread of its own."""

    def __init__(self, wire: Wire, speed: float) -> None:
        self.wire, self.speed = wire, speed
        self.sessions: dict[str, Session] = {}
        self.client_caps: JSON = {}
        self.threads: list[threading.Thread] = []
        self.handlers: dict[str, Callable[[Any, JSON], JSON | None]] = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/resume": self.resume_session,
            "session/list": self.list_sessions,
            "session/close": self.close_session,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
            "session/prompt": self.prompt,
        }

    # -- plumbing ---------------------------------------------------------------------------

    def handle_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            message = json.loads(raw)
        except ValueError:
            self.wire.fail(None, PARSE_ERROR, "Parse error")
            return
        if not isinstance(message, dict):
            self.wire.fail(None, INVALID_REQUEST, "Invalid request")
            return
        self.handle(message)

    def handle(self, message: JSON) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            if "id" in message:
                self.wire.resolve(message)
            return
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            self.on_notification(method, params)
            return
        request_id = message["id"]
        handler = self.handlers.get(method)
        if handler is None:
            self.wire.fail(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
            return
        try:
            result = handler(request_id, params)
        except RpcError as error:
            self.wire.fail(request_id, error.code, error.message, error.data)
        except Exception as error:  # a demo bug must not kill the connection
            log(f"{method} failed: {error!r}")
            self.wire.fail(request_id, INTERNAL_ERROR, f"Internal error: {error}")
        else:
            if result is not None:  # None: the handler has answered already
                self.wire.respond(request_id, result)

    def on_notification(self, method: str, params: JSON) -> None:
        if method == "session/cancel":
            session = self.sessions.get(str(params.get("sessionId")))
            if session is not None and session.turn is not None:
                session.turn.cancel()
        elif method == "$/cancel_request":
            # Only prompts last long enough to be worth cancelling this way.
            for session in self.sessions.values():
                if session.turn is not None and session.turn.request_id == params.get(
                        "requestId"):
                    session.turn.cancel()
        # Other notifications (unknown `_` ones included) are ignored, as the spec asks.

    def update(self, session: Session, update: JSON) -> None:
        self.wire.notify("session/update", {"sessionId": session.id, "update": update})

    def session(self, params: JSON) -> Session:
        session = self.sessions.get(str(params.get("sessionId")))
        if session is None:
            raise RpcError(NOT_FOUND, "Resource not found: unknown session (sessions of the "
                           "demo agent live only as long as its process)",
                           {"sessionId": params.get("sessionId")})
        return session

    def can(self, capability: str) -> bool:
        """Whether the client advertised `fs.readTextFile`, `fs.writeTextFile` or `terminal`."""
        value: Any = self.client_caps
        for key in capability.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        return value is True

    def shutdown(self) -> None:
        for session in self.sessions.values():
            if session.turn is not None:
                session.turn.cancel()
        for thread in self.threads:
            thread.join(timeout=1)

    # -- requests ---------------------------------------------------------------------------

    def initialize(self, request_id: Any, params: JSON) -> JSON:
        caps = params.get("clientCapabilities")
        self.client_caps = caps if isinstance(caps, dict) else {}
        return {
            "protocolVersion": 1,
            "agentInfo": {"name": "acp-notebook-demo", "title": "acp_notebook demo agent",
                          "version": VERSION},
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "authMethods": [],
        }

    def new_session(self, request_id: Any, params: JSON) -> None:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not cwd:
            raise RpcError(INVALID_PARAMS, "cwd is required (an absolute path)")
        session = Session("demo-" + os.urandom(6).hex(), os.path.abspath(cwd))
        self.sessions[session.id] = session
        self.wire.respond(request_id, {"sessionId": session.id, "modes": session.modes(),
                                       "configOptions": session.config_options()})
        # After the response, so even a client that drops updates for unknown ids sees them.
        self.update(session, {"sessionUpdate": "available_commands_update",
                              "availableCommands": COMMANDS})
        self.update(session, {"sessionUpdate": "session_info_update",
                              "title": session.title, "updatedAt": session.updated_at})

    def load_session(self, request_id: Any, params: JSON) -> JSON:
        session = self.session(params)
        self.reopen(session, params)
        for index, (role, blocks) in enumerate(session.history):
            kind = "user_message_chunk" if role == "user" else "agent_message_chunk"
            for block in blocks:
                self.update(session, {"sessionUpdate": kind, "content": block,
                                      "messageId": f"replay-{index}"})
        self.update(session, {"sessionUpdate": "available_commands_update",
                              "availableCommands": COMMANDS})
        return {"modes": session.modes(), "configOptions": session.config_options()}

    def resume_session(self, request_id: Any, params: JSON) -> None:
        session = self.session(params)
        self.reopen(session, params)
        self.wire.respond(request_id, {"modes": session.modes(),
                                       "configOptions": session.config_options()})
        self.update(session, {"sessionUpdate": "available_commands_update",
                              "availableCommands": COMMANDS})

    def reopen(self, session: Session, params: JSON) -> None:
        if session.turn is not None:
            raise RpcError(INVALID_REQUEST, "a turn is still running in this session")
        cwd = params.get("cwd")
        if isinstance(cwd, str) and cwd:
            session.cwd = os.path.abspath(cwd)

    def list_sessions(self, request_id: Any, params: JSON) -> JSON:
        cwd = params.get("cwd")
        found = [s for s in self.sessions.values()
                 if not isinstance(cwd, str) or os.path.abspath(cwd) == s.cwd]
        found.sort(key=lambda s: s.updated_at, reverse=True)
        return {"sessions": [s.info() for s in found]}  # one page: no nextCursor

    def close_session(self, request_id: Any, params: JSON) -> JSON:
        session = self.sessions.pop(str(params.get("sessionId")), None)
        if session is not None and session.turn is not None:
            session.turn.cancel()  # the turn still answers its prompt with "cancelled"
        return {}

    def set_mode(self, request_id: Any, params: JSON) -> JSON:
        session = self.session(params)
        mode = params.get("modeId")
        if mode not in {m["id"] for m in MODES}:
            raise RpcError(INVALID_PARAMS, f"unknown mode: {mode}")
        session.mode = str(mode)
        self.update(session, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        return {}

    def set_config_option(self, request_id: Any, params: JSON) -> JSON:
        session = self.session(params)
        config_id, value = params.get("configId"), params.get("value")
        if config_id not in CONFIG_CHOICES:
            raise RpcError(INVALID_PARAMS, f"unknown config option: {config_id}")
        if value not in {v for v, _, _ in CONFIG_CHOICES[str(config_id)][2]}:
            raise RpcError(INVALID_PARAMS, f"invalid value for {config_id}: {value}")
        session.config[str(config_id)] = str(value)
        return {"configOptions": session.config_options()}

    def prompt(self, request_id: Any, params: JSON) -> None:
        session = self.session(params)
        if session.turn is not None:
            raise RpcError(INVALID_REQUEST, "a turn is already running in this session")
        blocks = params.get("prompt")
        if not isinstance(blocks, list):
            raise RpcError(INVALID_PARAMS, "prompt must be a list of content blocks")
        # Registered before the thread starts, so a cancel sent right after finds it.
        session.turn = Turn(request_id)
        runner = DemoTurn(self, session, session.turn, [b for b in blocks if isinstance(b, dict)])
        thread = threading.Thread(target=runner.run, name=f"turn-{request_id}", daemon=True)
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]
        thread.start()


class DemoFailure(Exception):
    """The /fail command: the turn ends in a JSON-RPC error."""


class DemoTurn:
    """One scripted, streamed coding-agent turn about the user's prompt."""

    def __init__(self, agent: DemoAgent, session: Session, turn: Turn,
                 blocks: list[JSON]) -> None:
        self.agent, self.session, self.turn, self.blocks = agent, session, turn, blocks
        self.text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        stripped = self.text.strip()
        self.command = stripped.split(None, 1)[0][1:] if stripped.startswith("/") else ""
        rest = stripped.split(None, 1)[1] if self.command and " " in stripped else ""
        self.quote = excerpt(rest) or excerpt(stripped) or "(no text)"
        self.attachments = attachment_names(blocks)
        self.number = session.turns + 1
        self.pace = agent.speed * (9 if self.command == "slow" else 1)  # ~20 s
        if session.config["model"] == "demo-thorough":
            self.pace *= 1.3
        self.notes_path = os.path.join(session.cwd, NOTES_FILE)
        self.answer: list[str] = []
        self.plan: list[JSON] = []
        self.summary: dict[str, str] = {}

    # -- helpers ----------------------------------------------------------------------------

    def send(self, update: JSON) -> None:
        self.turn.check()  # after a cancel, nothing more but the prompt response
        self.agent.update(self.session, update)

    def pause(self, seconds: float) -> None:
        self.turn.sleep(seconds * self.pace)

    def ask(self, method: str, params: JSON) -> JSON:
        """Calls the client and waits; raises RpcError on an error, Cancelled on cancel."""
        self.turn.check()
        _, pending = self.agent.wire.request(method, {"sessionId": self.session.id, **params})
        response = self.turn.wait(pending)
        error = response.get("error")
        if isinstance(error, dict) or "result" not in response:
            error = error if isinstance(error, dict) else {}
            raise RpcError(int(error.get("code", INTERNAL_ERROR)),
                           str(error.get("message", "error")), error.get("data"))
        result = response["result"]
        return result if isinstance(result, dict) else {}

    def call_id(self, name: str) -> str:
        return f"call_{self.number}_{name}"

    def set_plan(self, *statuses: str) -> None:
        for entry, status in zip(self.plan, statuses, strict=False):
            entry["status"] = status
        self.send({"sessionUpdate": "plan", "entries": [dict(e) for e in self.plan]})

    # -- the turn ---------------------------------------------------------------------------

    def run(self) -> None:
        stop: str | None = None
        error: RpcError | None = None
        try:
            stop = self.script()
        except Cancelled:
            stop = "cancelled"
        except DemoFailure:
            error = RpcError(INTERNAL_ERROR, "demo failure",
                             {"hint": "prompts starting with /fail always fail"})
        except Exception as exc:  # a bug in the demo must still end the turn
            log(f"turn failed: {exc!r}")
            error = RpcError(INTERNAL_ERROR, f"Internal error: {exc}")
        self.finish()
        wire = self.agent.wire
        if error is not None:
            wire.fail(self.turn.request_id, error.code, error.message, error.data)
        else:
            wire.respond(self.turn.request_id, {"stopReason": stop})

    def finish(self) -> None:
        session = self.session
        session.turns = self.number
        session.history.append(("user", self.blocks))
        if self.answer:
            session.history.append(("agent", [text_block("".join(self.answer))]))
        session.updated_at = now_iso()
        # Cleared before the response, so the client may send its next prompt right away.
        session.turn = None

    def script(self) -> str:
        self.pause(0.15)
        self.think()
        if self.command == "fail":
            self.pause(0.3)
            raise DemoFailure
        planning_only = self.command == "plan"
        may_edit = self.session.mode == "code" and self.command != "explain"
        self.plan = [
            {"content": f"Read {NOTES_FILE} for context", "priority": "high"},
            {"content": f"Add a section about the prompt to {NOTES_FILE}" if may_edit
             else f"Sketch a change to {NOTES_FILE} (no edits in this turn)",
             "priority": "medium"},
            {"content": "Check the result with a quick command", "priority": "low"},
        ]
        self.set_plan("pending", "pending", "pending")
        if not planning_only:
            self.pause(0.1)
            self.set_plan("in_progress")
            old_text = self.read_notes()
            self.set_plan("completed", "in_progress")
            new_text = self.edit_notes(old_text) if may_edit else old_text
            if not may_edit:
                self.summary["edit"] = "skipped: this turn does not edit files"
            self.set_plan("completed", "completed", "in_progress")
            self.run_check(new_text)
            self.set_plan("completed", "completed", "completed")
        self.write_answer(planning_only)
        self.report_usage()
        return "end_turn"

    def think(self) -> None:
        thoughts = [f"The user asks: “{self.quote}”. "]
        if self.attachments:
            thoughts.append(f"They attached {', '.join(self.attachments)}. ")
        thoughts += ["I'm the demo agent, so I'll walk through a typical coding turn: ",
                     f"read {NOTES_FILE}, propose a small additive edit, ",
                     "run a quick check, then summarise in Markdown."]
        if self.command == "fail":
            thoughts = [f"The user asks: “{self.quote}”. ", "Pretending to hit an error…"]
        elif self.session.config["thought_level"] == "high":
            thoughts += [" Thinking harder: the edit must only append, ",
                         "so existing notes are never lost."]
        message_id = f"thought_{self.number}"
        for piece in thoughts:
            self.send({"sessionUpdate": "agent_thought_chunk", "content": text_block(piece),
                       "messageId": message_id})
            self.pause(0.12)

    def read_notes(self) -> str | None:
        """Reads the notes file (via the client if it can), None if it does not exist yet."""
        call = self.call_id("read")
        self.send({"sessionUpdate": "tool_call", "toolCallId": call,
                   "title": f"Read {NOTES_FILE}", "kind": "read", "status": "pending",
                   "locations": [{"path": self.notes_path, "line": 1}],
                   "rawInput": {"path": self.notes_path}})
        self.pause(0.05)
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                   "status": "in_progress"})
        self.pause(0.2)
        content = self.fetch_notes()
        if content is None:
            shown = f"`{NOTES_FILE}` does not exist yet; the edit will create it."
            self.summary["read"] = "not there yet"
        else:
            lines = content.splitlines()
            more = f"\n… ({len(lines) - 12} more lines)" if len(lines) > 12 else ""
            shown = "```markdown\n" + "\n".join(lines[:12]) + "\n```" + more
            self.summary["read"] = f"{len(lines)} lines"
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                   "status": "completed", "content": [text_content(shown)]})
        return content

    def fetch_notes(self) -> str | None:
        if self.agent.can("fs.readTextFile"):
            try:
                content = self.ask("fs/read_text_file", {"path": self.notes_path}).get("content")
                return content if isinstance(content, str) else None
            except RpcError as error:
                if error.code == NOT_FOUND:
                    return None
                log(f"fs/read_text_file failed ({error.message}); reading the disk instead")
        # Reading is harmless, and the edit must know the current text to only append.
        try:
            with open(self.notes_path, encoding="utf-8") as file:
                return file.read()
        except (OSError, UnicodeDecodeError):
            return None

    def new_notes(self, old_text: str | None) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        section = [f"## Demo turn {self.number} ({stamp})", "",
                   f"- Prompt: “{self.quote}”"]
        if self.attachments:
            section.append(f"- Attachments: {', '.join(self.attachments)}")
        section += ["- Next step: configure a real ACP agent for real work.", ""]
        if old_text is None:
            return "# Demo notes\n\n" + "\n".join(section)
        return old_text + ("" if old_text.endswith("\n") else "\n") + "\n" + "\n".join(section)

    def edit_notes(self, old_text: str | None) -> str | None:
        """Proposes the edit, asks permission, writes it if allowed; returns the new text."""
        call, new_text = self.call_id("edit"), self.new_notes(old_text)
        diff = {"type": "diff", "path": self.notes_path, "oldText": old_text,
                "newText": new_text}
        tool = {"toolCallId": call, "title": f"Edit {NOTES_FILE}", "kind": "edit",
                "status": "pending", "content": [diff],
                "locations": [{"path": self.notes_path}], "rawInput": {"path": self.notes_path}}
        self.send({"sessionUpdate": "tool_call", **tool})
        decision = self.session.edit_policy or self.ask_permission(tool)
        if decision != "allow":
            self.summary["edit"] = "declined by you, so nothing changed"
            self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                       "status": "failed",
                       "content": [text_content("The user declined the edit.")]})
            return old_text
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                   "status": "in_progress"})
        self.pause(0.1)
        content: list[JSON] = [diff]
        if self.agent.can("fs.writeTextFile"):
            try:
                self.ask("fs/write_text_file", {"path": self.notes_path, "content": new_text})
            except RpcError as error:
                self.summary["edit"] = f"allowed, but the client refused the write ({error})"
                self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                           "status": "failed", "content": [diff, text_content(
                               f"Could not write {self.notes_path}: {error.message}")]})
                return old_text
            self.summary["edit"] = "allowed and written through the client"
        else:
            self.summary["edit"] = "allowed (shown as a diff: the client cannot write files)"
            content.append(text_content("Preview only: the client does not offer "
                                        "fs/write_text_file, so nothing was written."))
        self.pause(0.1)
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                   "status": "completed", "content": content})
        return new_text

    def ask_permission(self, tool: JSON) -> str:
        """Returns "allow" or "reject"; a cancelled outcome ends the turn."""
        try:
            result = self.ask("session/request_permission",
                              {"toolCall": tool, "options": PERMISSION_OPTIONS})
        except RpcError as error:
            log(f"session/request_permission failed: {error.message}; not editing")
            return "reject"
        outcome = result.get("outcome")
        outcome = outcome if isinstance(outcome, dict) else {}
        if outcome.get("outcome") != "selected":
            raise Cancelled  # "cancelled" (or nonsense): stop, as the spec asks
        option = outcome.get("optionId")
        if option in ("allow_always", "reject_always"):
            self.session.edit_policy = str(option).split("_")[0]  # no prompt next turn
        return "allow" if option in ("allow", "allow_always") else "reject"

    def run_check(self, notes: str | None) -> None:
        lines = len(notes.splitlines()) if notes else 0
        message = f"{NOTES_FILE}: {lines} lines, turn {self.number} checked"
        call = self.call_id("run")
        self.send({"sessionUpdate": "tool_call", "toolCallId": call,
                   "title": f'Run echo "{message}"', "kind": "execute", "status": "pending",
                   "rawInput": {"command": "echo", "args": [message], "cwd": self.session.cwd}})
        self.pause(0.1)
        if self.agent.can("terminal"):
            self.run_in_terminal(call, message)
            return
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                   "status": "in_progress"})
        self.pause(0.25)
        self.summary["run"] = "simulated output (the client offers no terminal)"
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                   "status": "completed",
                   "content": [text_content(f'```console\n$ echo "{message}"\n{message}\n```')],
                   "rawOutput": {"exitCode": 0, "stdout": message + "\n"}})

    def run_in_terminal(self, call: str, message: str) -> None:
        try:
            created = self.ask("terminal/create", {"command": "echo", "args": [message],
                                                   "cwd": self.session.cwd,
                                                   "outputByteLimit": 4096})
        except RpcError as error:
            self.summary["run"] = f"the client could not start it ({error.message})"
            self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                       "status": "failed", "content": [text_content(
                           f"terminal/create failed: {error.message}")]})
            return
        terminal = {"terminalId": created.get("terminalId")}
        try:
            self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                       "status": "in_progress", "content": [{"type": "terminal", **terminal}]})
            status = self.ask("terminal/wait_for_exit", terminal)
            output = self.ask("terminal/output", terminal)
            ok = status.get("exitCode") == 0
            self.summary["run"] = "ran in a client terminal" + ("" if ok else f" ({status})")
            self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                       "status": "completed" if ok else "failed",
                       "rawOutput": {**status, "output": output.get("output")}})
        except RpcError as error:
            self.summary["run"] = f"the terminal failed ({error.message})"
            self.send({"sessionUpdate": "tool_call_update", "toolCallId": call,
                       "status": "failed"})
        finally:
            self.release(terminal)

    def release(self, terminal: JSON) -> None:
        """The agent MUST release its terminals; after a cancel, without waiting for a reply."""
        if self.turn.cancelled.is_set():
            self.agent.wire.request("terminal/release", {"sessionId": self.session.id, **terminal})
            return
        try:
            self.ask("terminal/release", terminal)
        except RpcError as error:
            log(f"terminal/release failed: {error.message}")

    def compose_answer(self, planning_only: bool) -> str:
        session = self.session
        lines = [f"## Demo turn {self.number}: a walk through a coding-agent turn", "",
                 f"> {self.quote}", "",
                 "I'm acp_notebook's **built-in demo agent**: no model and no network, just a "
                 "script showing what a real ACP coding agent streams into this cell.", ""]
        if planning_only:
            lines += ["Here is the plan (nothing was run):", ""]
            lines += [f"{i}. {e['content']}" for i, e in enumerate(self.plan, 1)]
            lines += ["", "Send the prompt without `/plan` to run it.", ""]
        else:
            lines += ["- **Thought**: collapsed above",
                      "- **Plan**: three steps, updated as they ran",
                      f"- **Read** `{NOTES_FILE}`: {self.summary.get('read', '-')}",
                      f"- **Edit** `{NOTES_FILE}`: {self.summary.get('edit', '-')}",
                      f"- **Run** a check: {self.summary.get('run', '-')}"]
        if self.attachments:
            lines.append(f"- **Attached**: {', '.join(self.attachments)}")
        lines += [f"- **Settings**: mode `{session.mode}`, model "
                  f"`{session.config['model']}`, thinking `{session.config['thought_level']}`",
                  "", CODE_SAMPLE,
                  "Configure a real ACP agent (Claude Code, Gemini CLI, Codex, goose, …) for "
                  "real answers. Try `/slow` then Stop, or `/fail` for a failed turn.\n"]
        return "\n".join(lines)

    def write_answer(self, planning_only: bool) -> None:
        message_id = f"msg_{self.session.id}_{self.number}"
        for piece in chunks(self.compose_answer(planning_only)):
            self.send({"sessionUpdate": "agent_message_chunk", "content": text_block(piece),
                       "messageId": message_id})
            self.answer.append(piece)
            self.pause(0.015)

    def report_usage(self) -> None:
        session = self.session
        thorough = session.config["model"] == "demo-thorough"
        session.used = min(CONTEXT_SIZE, session.used + 1800 + len(self.text) // 4
                           + sum(len(p) for p in self.answer) // 4 + (1500 if thorough else 0))
        session.cost = round(session.cost + (0.0123 if thorough else 0.0031), 6)
        self.send({"sessionUpdate": "usage_update", "used": session.used,
                   "size": CONTEXT_SIZE, "cost": {"amount": session.cost, "currency": "USD"}})
        if not session.named:  # name the session after its first prompt
            session.named, session.title = True, self.quote
            self.send({"sessionUpdate": "session_info_update", "title": session.title,
                       "updatedAt": now_iso()})


def main() -> int:
    agent = DemoAgent(Wire(sys.stdout.buffer), read_speed())
    log(f"demo agent {VERSION} ready (pid {os.getpid()})")
    try:
        for raw in sys.stdin.buffer:  # returns each line as soon as it is complete
            agent.handle_line(raw)
    except KeyboardInterrupt:
        pass
    agent.shutdown()  # stdin closed: the client is gone, so stop every turn
    return 0


if __name__ == "__main__":
    sys.exit(main())
