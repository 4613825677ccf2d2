#!/usr/bin/env python3
"""A scripted ACP v1 agent on stdio, for testing ACP clients. Standard library only.

Wire format: newline-delimited JSON-RPC 2.0 on stdin/stdout; logs go to stderr.
Initialize-time behaviour comes from command-line flags (``parse_args``). Each prompt turn is
driven by the prompt itself: if its first text block starts with ``#script `` the JSON list
after it is run step by step (``Turn._STEPS``); any other text is echoed as ``echo: <text>``.

Steps (one action key each; other keys are options):
  say / think / user TEXT [message_id]   agent_message / agent_thought / user_message chunk
  chunks N [size=20, message_id]         N agent_message_chunks, text = index zero-padded to size
  huge_say NBYTES                        one agent_message_chunk of NBYTES digits
  update {...} [session_id]              session/update carrying exactly this update
  flood [{...}, ...] times=N [session_id]  N session/updates cycling through these (not recorded)
  plan_entries N                         one plan update with N entries "step <i>"
  after_turn [steps]                     run these steps after the prompt is answered
  request METHOD [params, id, cancel_after, quiet]  call the client, report "RESPONSE <json>"
                                             (not with quiet: true)
  permission {toolCall} [options, id, cancel_after]  same, session/request_permission, "PERMISSION "
  sleep SECONDS                          a session/cancel cuts it short: stopReason cancelled
  wait_cancel true [after_cancel: steps] block until session/cancel, run after_cancel, "cancelled"
  ignore_cancel true | "answer"          ignore cancels; true: also never answer the prompt
  exit CODE / kill_self true             exit now / SIGKILL itself
  stderr NBYTES                          write NBYTES of filler lines to stderr
  raw TEXT / raw_hex HEX                 write these bytes plus "\n" to stdout
  respond_id ID                          a {"result": {}} response to an id never sent
  stop REASON / error {code, message}    how the prompt is answered at the end
  fail_until {counter, attempts, mode}   fail while the counter file's new value <= attempts
  echo_prompt true                       report "PROMPT <json of the prompt blocks>"

Flags for requests that are never answered (the client's deadlines):
  --hang-method METHOD      never answer METHOD (repeatable; initialize, session/new, ...): the
                            request is recorded, then nothing, not even to $/cancel_request
  --hang-once-marker FILE   with --hang-method: hang only if FILE does not exist, and create it
                            holding this process's pid, so the next agent process answers

Flag ``--config-options-json JSON``: answer session/new, load and resume with exactly this
``configOptions`` value (any JSON, valid or not), instead of the built-in options.

Threads: the main thread only reads stdin and answers the quick requests, so session/cancel,
$/cancel_request and the client's responses to the agent's own requests are seen while a turn
runs. Each turn runs its script on its own daemon thread. Every write to stdout takes one lock,
so lines from different threads never interleave.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import fcntl
import itertools
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, NoReturn

JsonObj = dict[str, Any]

VERSION = "0.1.0"
SCRIPT_PREFIX = "#script "

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
AUTH_REQUIRED = -32000
NOT_FOUND = -32002

AUTH_METHOD: JsonObj = {"id": "token", "name": "Token", "description": "test"}
MODES: list[JsonObj] = [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]
MODEL_CHOICES: list[JsonObj] = [
    {"value": "fast", "name": "Fast"},
    {"value": "smart", "name": "Smart"},
]
DEFAULT_CONFIG: JsonObj = {"model": "fast", "verbose": False}
COMMANDS: list[JsonObj] = [
    {"name": "web", "description": "Search the web", "input": {"hint": "query to search for"}},
    {"name": "test", "description": "Run the tests"},
]
PERMISSION_OPTIONS: list[JsonObj] = [
    {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
]
DEFAULT_TOOL_CALL: JsonObj = {"toolCallId": "call_1", "title": "Run a tool", "kind": "other"}
# Prompt block types that need a prompt capability, keyed to the --prompt-capabilities name.
BLOCK_CAPABILITY = {"image": "image", "audio": "audio", "resource": "embedded"}
CAPABILITY_NAMES = {"image": "image", "audio": "audio", "embedded": "embedded",
                    "embeddedContext": "embedded"}
# Lines per write(): keeps floods fast without holding the stdout lock for a whole flood.
BATCH = 256
_AUTO_ID = object()  # "no explicit id": the agent picks the next number


class RpcError(Exception):
    """A JSON-RPC error to answer the current request with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_json(self) -> JsonObj:
        return {"code": self.code, "message": self.message}


class _Cancelled(Exception):
    """Unwinds a turn's steps once a session/cancel has been honoured."""


# ---------------------------------------------------------------- low-level output


def write_fd(fd: int, data: bytes) -> None:
    """Writes all of data to a raw fd: os.write may write only part of it to a pipe."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def log(text: str) -> None:
    # Raw fd writes: unbuffered, so the line is out even if the process dies right after.
    write_fd(2, f"[scripted-agent {os.getpid()}] {text}\n".encode())


def stderr_filler(nbytes: int) -> None:
    """Writes nbytes of log-like lines in 64 KiB pieces; it blocks if nobody drains stderr."""
    block = (b"stderr filler " + b"." * 65 + b"\n") * 820
    while nbytes > 0:
        piece = block[:nbytes]
        write_fd(2, piece)
        nbytes -= len(piece)


def filler_text(nbytes: int) -> str:
    return ("0123456789" * (nbytes // 10 + 1))[:nbytes]


def digits(index: int, size: int) -> str:
    """Chunk text: the index zero-padded to size, so a test can check order and count."""
    return f"{index:0{size}d}"[-size:] if size > 0 else ""


def encode(msg: Any) -> bytes:
    """One compact JSON line. Raw UTF-8, as real agents send, to exercise client decoding."""
    try:
        return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    except UnicodeEncodeError:
        # Lone surrogates (legal in the client's JSON) have no UTF-8 form: use \u escapes.
        return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def notification(method: str, params: JsonObj) -> JsonObj:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def session_update(session_id: str, update: JsonObj) -> JsonObj:
    return notification("session/update", {"sessionId": session_id, "update": update})


def chunk_update(kind: str, text: str, message_id: Any = None) -> JsonObj:
    update: JsonObj = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def now_iso() -> str:
    # Fixed-width UTC with microseconds: sorts as a string, distinct within a fast test.
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def id_key(request_id: Any) -> str:
    # JSON text as the key, so the int id 1 and the string id "1" stay different requests.
    return json.dumps(request_id)


class Output:
    """stdout shared by the reader and the turn threads: whole lines, one writer at a time."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, msg: JsonObj) -> None:
        self.write([encode(msg)])

    def write(self, lines: Iterable[bytes]) -> None:
        with self._lock:
            try:
                for line in lines:
                    self._stream.write(line)
                self._stream.flush()
            except (BrokenPipeError, ValueError):  # ValueError: the stream was closed
                log("stdout is gone; exiting")
                os._exit(1)

    def exit(self, code: int) -> NoReturn:
        """Exits at once, but never in the middle of another thread's line."""
        with self._lock:
            try:
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                pass
            os._exit(code)


# ---------------------------------------------------------------- sessions


def config_options(values: JsonObj) -> list[JsonObj]:
    return [
        {"id": "model", "name": "Model", "category": "model", "type": "select",
         "currentValue": values["model"], "options": MODEL_CHOICES},
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

    def to_json(self) -> JsonObj:
        return {"sessionId": self.session_id, "cwd": self.cwd, "title": self.title,
                "updatedAt": self.updated_at, "modeId": self.mode_id, "config": self.config,
                "history": self.history}

    @classmethod
    def from_json(cls, data: JsonObj) -> Session:
        return cls(data["sessionId"], data["cwd"], data.get("title"), data["updatedAt"],
                   data.get("history", []), data.get("modeId", "ask"),
                   {**DEFAULT_CONFIG, **data.get("config", {})})

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

    def __init__(self, state_dir: Path | None) -> None:
        self.lock = threading.RLock()
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

    @staticmethod
    def _read(path: Path | None) -> Session | None:
        if path is None or not path.is_file():
            return None
        try:
            return Session.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as exc:
            log(f"ignoring unreadable session file {path}: {exc}")
            return None


# ---------------------------------------------------------------- parameter checks


def str_param(params: JsonObj, name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        raise RpcError(INVALID_PARAMS, f"{name} must be a string")
    return value


def abs_path_param(params: JsonObj, name: str) -> str:
    value = str_param(params, name)
    if not os.path.isabs(value):
        raise RpcError(INVALID_PARAMS, f"{name} must be an absolute path")
    return value


def check_list_param(params: JsonObj, name: str, required: bool) -> None:
    # mcpServers is required in session/new and session/load: catch clients that omit it.
    if (name in params or required) and not isinstance(params.get(name), list):
        raise RpcError(INVALID_PARAMS, f"{name} must be an array")


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def decode_cursor(cursor: Any) -> int:
    try:
        text = base64.urlsafe_b64decode(str(cursor).encode()).decode()
        kind, _, number = text.partition(":")
        if kind == "offset" and number.isdigit():
            return int(number)
    except (binascii.Error, UnicodeDecodeError):
        pass
    raise RpcError(INVALID_PARAMS, f"invalid cursor: {cursor!r}")


# ---------------------------------------------------------------- calls to the client


class PendingCall:
    """An agent-to-client request waiting for the client's response."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.response: JsonObj = {}

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def resolve(self, response: JsonObj) -> None:
        self.response = response
        self._done.set()

    def wait(self) -> JsonObj:
        self._done.wait()
        return self.response


# ---------------------------------------------------------------- prompt turns


def first_text(prompt: list[JsonObj]) -> str:
    for block in prompt:
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            return str(block["text"])
    return ""


def parse_script(text: str) -> list[JsonObj]:
    if not text.startswith(SCRIPT_PREFIX):
        return [{"say": "echo: " + text}]
    try:
        steps = json.loads(text[len(SCRIPT_PREFIX):])
    except ValueError as exc:
        raise RpcError(INVALID_PARAMS, f"invalid #script JSON: {exc}") from exc
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        raise RpcError(INVALID_PARAMS, "#script must be a JSON list of objects")
    return steps


def bump_counter(path: Path) -> int:
    """Increments the integer in path under an exclusive lock (processes may race)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    with os.fdopen(fd, "r+", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        value = int(file.read().strip() or 0) + 1
        file.seek(0)
        file.truncate()
        file.write(str(value))
        file.flush()
        os.fsync(file.fileno())
    return value


class Turn:
    """One session/prompt: runs its script on a thread, then answers the request."""

    def __init__(self, agent: Agent, session: Session, request_id: Any,
                 prompt: list[JsonObj]) -> None:
        self.agent = agent
        self.session = session
        self.request_id = request_id
        self.prompt = prompt
        self.cancelled = threading.Event()  # set by session/cancel, $/cancel_request, close
        self.ignore_cancel = False
        self.hang = False  # ignore_cancel: true — never answer
        self.cancel_handled = False  # wait_cancel saw the cancel; after_cancel steps run
        self.stop_reason = "end_turn"
        self.error: JsonObj | None = None
        self.after: list[JsonObj] = []  # after_turn steps

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True, name=f"turn-{self.request_id}").start()

    def cancel(self) -> None:
        self.cancelled.set()

    def _run(self) -> None:
        self._record_prompt()
        try:
            self._run_steps(parse_script(first_text(self.prompt)))
        except _Cancelled:
            self.stop_reason, self.error = "cancelled", None
        except RpcError as err:
            self.error = err.to_json()
        except (KeyError, TypeError, ValueError, AttributeError, OSError) as exc:
            # A malformed step must fail the turn visibly rather than kill the thread silently.
            self.error = RpcError(INVALID_PARAMS, f"bad script step: {exc!r}").to_json()
        self._finish()

    def _record_prompt(self) -> None:
        store = self.agent.store
        for block in self.prompt:
            store.record(self.session, {"sessionUpdate": "user_message_chunk", "content": block})
        if self.session.title is None:  # real agents title a session after its first message
            self.session.title = first_text(self.prompt).partition("\n")[0][:60] or None

    def _finish(self) -> None:
        if self.hang:
            log(f"turn {self.request_id!r} ignores cancellation and never answers")
            threading.Event().wait()
        self.agent.end_turn(self)  # before answering: the next prompt may follow at once
        if self.error is not None:
            self.agent.out.send({"jsonrpc": "2.0", "id": self.request_id, "error": self.error})
        else:
            self.agent.out.send({"jsonrpc": "2.0", "id": self.request_id,
                                 "result": {"stopReason": self.stop_reason}})
        if self.after:
            self.cancel_handled = True  # the turn is over: a cancel no longer applies
            try:
                self._run_steps(self.after)
            except (_Cancelled, RpcError, KeyError, TypeError, ValueError) as exc:
                log(f"after_turn steps failed: {exc!r}")

    # -- cancellation

    @property
    def _cancellable(self) -> bool:
        return not self.ignore_cancel and not self.cancel_handled

    def _checkpoint(self) -> None:
        if self._cancellable and self.cancelled.is_set():
            raise _Cancelled

    def _run_steps(self, steps: list[JsonObj]) -> None:
        for step in steps:
            action = next((key for key in step if key in self._STEPS), None)
            if action is None:
                raise RpcError(INVALID_PARAMS, f"unknown script step: {json.dumps(step)}")
            if action != "wait_cancel":  # a cancel that came early is still wait_cancel's
                self._checkpoint()
            self._STEPS[action](self, step)
        self._checkpoint()  # a cancel that lands after the last step still wins

    # -- output

    def emit(self, update: JsonObj, session_id: str | None = None) -> None:
        self.agent.out.write([self._line(update, session_id)])

    def _line(self, update: JsonObj, session_id: str | None = None) -> bytes:
        target = session_id or self.session.session_id
        if target == self.session.session_id:
            self.agent.store.record(self.session, update)
        return encode(session_update(target, update))

    def _call_and_report(self, prefix: str, method: str, params: JsonObj,
                         step: JsonObj) -> None:
        request_id = step["id"] if "id" in step else _AUTO_ID
        answer = self.agent.call_client(method, params, step.get("cancel_after"), request_id)
        if step.get("quiet"):  # no report: the call leaves no visible output of its own
            return
        self.emit(chunk_update("agent_message_chunk", prefix + json.dumps(answer, sort_keys=True)))

    # -- steps (one method per action key; extra keys are options)

    def _say(self, step: JsonObj) -> None:
        self.emit(chunk_update("agent_message_chunk", str(step["say"]), step.get("message_id")))

    def _think(self, step: JsonObj) -> None:
        self.emit(chunk_update("agent_thought_chunk", str(step["think"]), step.get("message_id")))

    def _user(self, step: JsonObj) -> None:
        self.emit(chunk_update("user_message_chunk", str(step["user"]), step.get("message_id")))

    def _chunks(self, step: JsonObj) -> None:
        size, message_id = int(step.get("size", 20)), step.get("message_id")
        batch: list[bytes] = []
        for index in range(int(step["chunks"])):
            batch.append(self._line(chunk_update("agent_message_chunk", digits(index, size),
                                                 message_id)))
            if len(batch) == BATCH:
                self.agent.out.write(batch)
                batch = []
                self._checkpoint()  # a flood can be cancelled midway, like real streaming
        self.agent.out.write(batch)

    def _huge_say(self, step: JsonObj) -> None:
        text = filler_text(int(step["huge_say"]))
        self.emit(chunk_update("agent_message_chunk", text, step.get("message_id")))

    def _update(self, step: JsonObj) -> None:
        if not isinstance(step["update"], dict):
            raise RpcError(INVALID_PARAMS, "update must be an object")
        self.emit(step["update"], step.get("session_id"))

    def _flood(self, step: JsonObj) -> None:
        updates, times = step["flood"], int(step["times"])
        if not isinstance(updates, list) or not updates:
            raise RpcError(INVALID_PARAMS, "flood takes a non-empty list of updates")
        lines = [encode(session_update(step.get("session_id") or self.session.session_id, u))
                 for u in updates]
        for start in range(0, times, BATCH):
            self.agent.out.write(lines[i % len(lines)]
                                 for i in range(start, min(start + BATCH, times)))

    def _plan_entries(self, step: JsonObj) -> None:
        entries = [{"content": f"step {i}", "priority": "medium", "status": "pending"}
                   for i in range(int(step["plan_entries"]))]
        self.emit({"sessionUpdate": "plan", "entries": entries})

    def _after_turn(self, step: JsonObj) -> None:
        self.after = list(step["after_turn"])

    def _request(self, step: JsonObj) -> None:
        params = dict(step.get("params") or {})
        params.setdefault("sessionId", self.session.session_id)
        self._call_and_report("RESPONSE ", str(step["request"]), params, step)

    def _permission(self, step: JsonObj) -> None:
        tool_call = step["permission"]
        params = {"sessionId": self.session.session_id,
                  "toolCall": tool_call if isinstance(tool_call, dict) else DEFAULT_TOOL_CALL,
                  "options": step.get("options", PERMISSION_OPTIONS)}
        self._call_and_report("PERMISSION ", "session/request_permission", params, step)

    def _sleep(self, step: JsonObj) -> None:
        seconds = float(step["sleep"])
        if not self._cancellable:
            time.sleep(seconds)
        elif self.cancelled.wait(seconds):
            raise _Cancelled

    def _wait_cancel(self, step: JsonObj) -> None:
        if self.ignore_cancel:
            self.hang = True  # the cancel it waits for is ignored, so it waits forever
            threading.Event().wait()
        self.cancelled.wait()
        self.cancel_handled = True  # after_cancel steps run in full, then "cancelled"
        self._run_steps(list(step.get("after_cancel") or []))
        raise _Cancelled

    def _ignore_cancel(self, step: JsonObj) -> None:
        # true: ignore cancels and never answer; "answer": ignore them but answer normally.
        value = step["ignore_cancel"]
        self.ignore_cancel = bool(value)
        self.hang = value is True
        if self.hang:
            self.agent.linger = True  # stay alive after stdin closes: the client must kill us

    def _exit(self, step: JsonObj) -> None:
        self.agent.out.exit(int(step["exit"]))

    def _kill_self(self, step: JsonObj) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def _stderr(self, step: JsonObj) -> None:
        stderr_filler(int(step["stderr"]))

    def _raw(self, step: JsonObj) -> None:
        self.agent.out.write([str(step["raw"]).encode() + b"\n"])

    def _raw_hex(self, step: JsonObj) -> None:
        self.agent.out.write([bytes.fromhex(str(step["raw_hex"])) + b"\n"])

    def _respond_id(self, step: JsonObj) -> None:
        self.agent.out.send({"jsonrpc": "2.0", "id": step["respond_id"], "result": {}})

    def _stop(self, step: JsonObj) -> None:
        self.stop_reason = str(step["stop"])

    def _error(self, step: JsonObj) -> None:
        error = step["error"]
        if not isinstance(error, dict):
            raise RpcError(INVALID_PARAMS, "error must be an object")
        self.error = error

    def _fail_until(self, step: JsonObj) -> None:
        spec = step["fail_until"]
        attempt = bump_counter(Path(spec["counter"]))
        if attempt > int(spec.get("attempts", 1)):
            return
        message = f"transient failure {attempt}"
        mode = spec.get("mode", "exit")
        if mode == "exit":
            write_fd(2, f"{message}\n".encode())
            self.agent.out.exit(3)
        if mode == "error":
            raise RpcError(INTERNAL_ERROR, message)
        raise RpcError(INVALID_PARAMS, f"fail_until mode must be exit or error, not {mode!r}")

    def _echo_prompt(self, step: JsonObj) -> None:
        self.emit(chunk_update("agent_message_chunk", "PROMPT " + json.dumps(self.prompt)))

    _STEPS: ClassVar[dict[str, Callable[[Turn, JsonObj], None]]] = {
        "say": _say, "think": _think, "user": _user, "chunks": _chunks, "huge_say": _huge_say,
        "update": _update, "request": _request, "permission": _permission, "sleep": _sleep,
        "wait_cancel": _wait_cancel, "ignore_cancel": _ignore_cancel, "exit": _exit,
        "kill_self": _kill_self, "stderr": _stderr, "raw": _raw, "raw_hex": _raw_hex,
        "respond_id": _respond_id, "stop": _stop, "error": _error, "fail_until": _fail_until,
        "echo_prompt": _echo_prompt, "flood": _flood, "plan_entries": _plan_entries,
        "after_turn": _after_turn,
    }


# ---------------------------------------------------------------- the agent


Handler = Callable[[JsonObj], JsonObj]


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Output(sys.stdout.buffer)
        self.store = Store(args.state_dir)
        self.linger = False  # a turn hangs on purpose: stay alive after stdin closes
        self._record = open(args.record, "a", encoding="utf-8") if args.record else None
        self._initialized = False
        self._authenticated = False
        self._followups: list[JsonObj] = []  # notifications to send after the current response
        self._ids = itertools.count()
        self._pending: dict[str, PendingCall] = {}
        self._turns: dict[str, Turn] = {}  # by session id
        self._lock = threading.Lock()  # guards _pending and _turns
        self._handlers = self._build_handlers()

    def _build_handlers(self) -> dict[str, Handler]:
        args = self.args
        handlers: dict[str, Handler] = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "session/new": self._new,
        }
        # Methods whose capability is off stay unknown (-32601), as with a real agent.
        optional: dict[str, tuple[bool, Handler]] = {
            "session/load": (args.load_session, self._load),
            "session/resume": (args.resume, self._resume),
            "session/list": (args.list, self._list),
            "session/close": (args.close, self._close),
            "session/delete": (args.delete, self._delete),
            "session/set_mode": (args.modes, self._set_mode),
            "session/set_config_option": (args.config_options, self._set_config_option),
        }
        handlers.update({method: fn for method, (on, fn) in optional.items() if on})
        return handlers

    # -- reading

    def serve(self, stdin: BinaryIO) -> None:
        for raw in stdin:  # readline() has no length limit: 50 MB lines are fine
            self._handle_line(raw)
        log("stdin closed")
        if self.linger:
            threading.Event().wait()

    def _handle_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            msg = json.loads(raw.decode("utf-8"))  # strict UTF-8; json.loads(bytes) is lax
        except ValueError as exc:
            self.out.send({"jsonrpc": "2.0", "id": None,
                           "error": {"code": PARSE_ERROR, "message": f"Parse error: {exc}"}})
            return
        if self._record is not None:  # before handling, so it is on disk before any reply
            self._record.write(json.dumps(msg) + "\n")
            self._record.flush()
        self._dispatch(msg)

    def _dispatch(self, msg: Any) -> None:
        if isinstance(msg, dict) and isinstance(msg.get("method"), str):
            if "id" in msg:
                self._on_request(msg)
            else:
                self._on_notification(msg)
        elif isinstance(msg, dict) and "id" in msg and ("result" in msg or "error" in msg):
            self._on_response(msg)
        else:  # includes batches (arrays): v1 has none
            request_id = msg.get("id") if isinstance(msg, dict) else None
            self.out.send({"jsonrpc": "2.0", "id": request_id,
                           "error": {"code": INVALID_REQUEST, "message": "Invalid request"}})

    def _on_request(self, msg: JsonObj) -> None:
        request_id, method = msg["id"], msg["method"]
        if self._hangs(method):
            return
        params = {} if msg.get("params") is None else msg["params"]
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params must be an object")
            if not self._initialized and method != "initialize":
                raise RpcError(INVALID_REQUEST, "initialize must be the first request")
            if method == "session/prompt":
                self._start_turn(request_id, params)  # the turn answers when it ends
                return
            handler = self._handlers.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            result = handler(params)
        except RpcError as err:
            self._answer_error(request_id, err.to_json())
            return
        except (KeyError, TypeError, ValueError, AttributeError, OSError) as exc:
            # Odd params must not kill the reader: that would look like an agent crash.
            self._answer_error(request_id, {"code": INTERNAL_ERROR, "message": repr(exc)})
            return
        self.out.send({"jsonrpc": "2.0", "id": request_id, "result": result})
        for note in self._followups:
            self.out.send(note)
        self._followups.clear()

    def _hangs(self, method: str) -> bool:
        if method not in (self.args.hang_method or ()):
            return False
        marker: Path | None = self.args.hang_once_marker
        if marker is not None:
            try:
                with open(marker, "x", encoding="utf-8") as out:
                    out.write(str(os.getpid()))
            except FileExistsError:
                return False  # an earlier process hung already: answer
        log(f"not answering {method} (--hang-method)")
        return True

    def _answer_error(self, request_id: Any, error: JsonObj) -> None:
        self._followups.clear()
        self.out.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def _on_notification(self, msg: JsonObj) -> None:
        params: JsonObj = msg["params"] if isinstance(msg.get("params"), dict) else {}
        if msg["method"] == "session/cancel":
            session_id = params.get("sessionId")
            with self._lock:
                turn = self._turns.get(session_id) if isinstance(session_id, str) else None
        elif msg["method"] == "$/cancel_request":
            # Only prompts outlive their request here; cancelling one is a session/cancel.
            key = id_key(params.get("requestId"))
            with self._lock:
                turn = next((t for t in self._turns.values() if id_key(t.request_id) == key),
                            None)
        else:
            return  # unknown notifications are ignored, as the spec requires
        if turn is not None:
            turn.cancel()

    def _on_response(self, msg: JsonObj) -> None:
        with self._lock:
            call = self._pending.pop(id_key(msg["id"]), None)
        if call is None:
            log(f"ignoring a response to unknown request id {msg['id']!r}")
        else:
            call.resolve(msg)

    # -- calls to the client (from turn threads)

    def call_client(self, method: str, params: JsonObj, cancel_after: Any,
                    request_id: Any = _AUTO_ID) -> JsonObj:
        """Sends a request, waits for its response, returns it without jsonrpc and id."""
        if request_id is _AUTO_ID:
            request_id = next(self._ids)
        call = PendingCall()
        with self._lock:  # registered before sending: the answer may come back at once
            self._pending[id_key(request_id)] = call
        self.out.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if cancel_after is not None:
            timer = threading.Timer(float(cancel_after), self._cancel_call, (request_id, call))
            timer.daemon = True
            timer.start()
        response = call.wait()
        return {key: value for key, value in response.items() if key not in ("jsonrpc", "id")}

    def _cancel_call(self, request_id: Any, call: PendingCall) -> None:
        if not call.done:
            self.out.send(notification("$/cancel_request", {"requestId": request_id}))

    # -- turns

    def _start_turn(self, request_id: Any, params: JsonObj) -> None:
        session = self.store.live(str_param(params, "sessionId"))
        prompt = params.get("prompt")
        if not isinstance(prompt, list) or not all(isinstance(b, dict) for b in prompt):
            raise RpcError(INVALID_PARAMS, "prompt must be an array of content blocks")
        for block in prompt:
            needed = BLOCK_CAPABILITY.get(str(block.get("type")))
            if needed is not None and needed not in self.args.prompt_capabilities:
                raise RpcError(INVALID_PARAMS, f"{block['type']} blocks were not advertised "
                                               "in promptCapabilities")
        with self._lock:
            if session.session_id in self._turns:
                raise RpcError(INVALID_REQUEST, "a prompt turn is already running")
            turn = self._turns[session.session_id] = Turn(self, session, request_id, prompt)
        turn.start()

    def end_turn(self, turn: Turn) -> None:
        with self._lock:
            self._turns.pop(turn.session.session_id, None)
        self.store.touch(turn.session)

    def _cancel_turn(self, session_id: str) -> None:
        with self._lock:
            turn = self._turns.get(session_id)
        if turn is not None:
            turn.cancel()

    # -- request handlers

    def _initialize(self, params: JsonObj) -> JsonObj:
        code = self.args.exit_during_initialize
        if code is not None:
            log(f"exiting with code {code} during initialize, as asked")
            self.out.exit(code)
        if type(params.get("protocolVersion")) is not int:
            raise RpcError(INVALID_PARAMS, "protocolVersion must be an integer")
        self._initialized = True
        args, caps = self.args, self.args.prompt_capabilities
        return {
            "protocolVersion": args.protocol_version,
            "agentCapabilities": {
                "loadSession": args.load_session,
                "promptCapabilities": {"image": "image" in caps, "audio": "audio" in caps,
                                       "embeddedContext": "embedded" in caps},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {
                    name: {} for name, flag in (("resume", args.resume), ("list", args.list),
                                                ("close", args.close), ("delete", args.delete),
                                                ("additionalDirectories",
                                                 args.additional_directories)) if flag},
            },
            "authMethods": [AUTH_METHOD] if args.auth_required else [],
            "agentInfo": {"name": args.agent_name, "version": VERSION},
        }

    def _authenticate(self, params: JsonObj) -> JsonObj:
        if not self.args.auth_required or params.get("methodId") != AUTH_METHOD["id"]:
            raise RpcError(INVALID_PARAMS, f"unknown auth method: {params.get('methodId')!r}")
        self._authenticated = True
        return {}

    def _require_auth(self) -> None:
        if self.args.auth_required and not self._authenticated:
            raise RpcError(AUTH_REQUIRED, "Authentication required")

    def _session_state(self, session: Session) -> JsonObj:
        """The modes/configOptions part of new, load and resume responses."""
        state: JsonObj = {}
        if self.args.modes:
            state["modes"] = {"currentModeId": session.mode_id, "availableModes": MODES}
        if self.args.config_options:
            state["configOptions"] = config_options(session.config)
        if self.args.config_options_json is not None:
            state["configOptions"] = json.loads(self.args.config_options_json)
        return state

    def _new(self, params: JsonObj) -> JsonObj:
        self._require_auth()
        cwd = abs_path_param(params, "cwd")
        check_list_param(params, "mcpServers", required=True)
        session = self.store.create(cwd)
        if self.args.commands:
            self._followups.append(session_update(session.session_id, {
                "sessionUpdate": "available_commands_update", "availableCommands": COMMANDS}))
        return {"sessionId": session.session_id, **self._session_state(session)}

    def _open(self, params: JsonObj, mcp_required: bool) -> Session:
        """The checks load and resume share; the session becomes live (promptable)."""
        self._require_auth()
        session_id = str_param(params, "sessionId")
        cwd = abs_path_param(params, "cwd")
        check_list_param(params, "mcpServers", required=mcp_required)
        session = self.store.find(session_id)
        session.cwd = cwd
        self.store.activate(session)
        return session

    def _load(self, params: JsonObj) -> JsonObj:
        session = self._open(params, mcp_required=True)
        lines = [encode(session_update(session.session_id, update))
                 for update in self.store.history(session)]
        for start in range(0, len(lines), BATCH):
            self.out.write(lines[start:start + BATCH])
        return self._session_state(session)

    def _resume(self, params: JsonObj) -> JsonObj:
        return self._session_state(self._open(params, mcp_required=False))

    def _list(self, params: JsonObj) -> JsonObj:
        if self.args.list_endless:
            page = next(self._ids)
            fake = {"sessionId": f"fake-{page}", "cwd": params.get("cwd") or "/"}
            return {"sessions": [] if self.args.list_endless == "empty" else [fake],
                    "nextCursor": "same" if self.args.list_endless == "repeat" else f"c{page}"}
        cwd = params.get("cwd")
        offset = 0 if params.get("cursor") is None else decode_cursor(params["cursor"])
        matching = sorted((s for s in self.store.all() if cwd is None or s.cwd == cwd),
                          key=lambda s: (s.updated_at, s.session_id), reverse=True)
        end = offset + self.args.list_page_size
        result: JsonObj = {"sessions": [s.listing() for s in matching[offset:end]]}
        if end < len(matching):
            result["nextCursor"] = encode_cursor(end)
        return result

    def _close(self, params: JsonObj) -> JsonObj:
        session_id = str_param(params, "sessionId")
        self._cancel_turn(session_id)  # close cancels in-flight work like session/cancel
        self.store.deactivate(session_id)
        return {}

    def _delete(self, params: JsonObj) -> JsonObj:
        session_id = str_param(params, "sessionId")
        self._cancel_turn(session_id)
        self.store.delete(session_id)  # unknown ids succeed silently, per the spec
        return {}

    def _set_mode(self, params: JsonObj) -> JsonObj:
        session = self.store.live(str_param(params, "sessionId"))
        mode_id = str_param(params, "modeId")
        if mode_id not in {mode["id"] for mode in MODES}:
            raise RpcError(INVALID_PARAMS, f"unknown mode: {mode_id}")
        session.mode_id = mode_id
        self.store.save(session)
        # Sent before the response, so a client sees the update by the time set_mode returns.
        self.out.send(session_update(session.session_id, {
            "sessionUpdate": "current_mode_update", "currentModeId": mode_id}))
        return {}

    def _set_config_option(self, params: JsonObj) -> JsonObj:
        session = self.store.live(str_param(params, "sessionId"))
        config_id, value = str_param(params, "configId"), params.get("value")
        if config_id == "model":
            valid = value in {choice["value"] for choice in MODEL_CHOICES}
        elif config_id == "verbose":
            valid = isinstance(value, bool)
        else:
            raise RpcError(INVALID_PARAMS, f"unknown config option: {config_id}")
        if not valid:
            raise RpcError(INVALID_PARAMS, f"invalid value for {config_id}: {value!r}")
        session.config[config_id] = value
        self.store.save(session)
        return {"configOptions": config_options(session.config)}


# ---------------------------------------------------------------- command line


def capability_list(text: str) -> frozenset[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CAPABILITY_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown prompt capabilities: {', '.join(unknown)}")
    return frozenset(CAPABILITY_NAMES[name] for name in names)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--record", type=Path, metavar="FILE",
                        help="append every received message to FILE, one JSON per line")
    parser.add_argument("--state-dir", type=Path, metavar="DIR",
                        help="persist sessions in DIR so another process can load them")
    parser.add_argument("--protocol-version", type=int, default=1, metavar="N")
    parser.add_argument("--exit-during-initialize", type=int, metavar="CODE")
    parser.add_argument("--load-session", action="store_true")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--list-page-size", type=int, default=50, metavar="N")
    parser.add_argument("--list-endless", choices=["empty", "repeat", "fresh"],
                        help="session/list never ends: empty pages with new cursors, the same "
                             "cursor again, or one made-up session per page with a new cursor")
    parser.add_argument("--close", action="store_true")
    parser.add_argument("--delete", action="store_true")
    parser.add_argument("--additional-directories", action="store_true")
    parser.add_argument("--auth-required", action="store_true")
    parser.add_argument("--modes", action="store_true")
    parser.add_argument("--config-options", action="store_true")
    parser.add_argument("--prompt-capabilities", type=capability_list, default=frozenset(),
                        metavar="LIST", help="comma list of image, audio, embedded")
    parser.add_argument("--commands", action="store_true")
    parser.add_argument("--config-options-json", metavar="JSON",
                        help="the configOptions of session/new, load and resume, as given")
    parser.add_argument("--stderr-at-start", type=int, default=0, metavar="N")
    parser.add_argument("--agent-name", default="scripted-agent")
    parser.add_argument("--hang-method", action="append", metavar="METHOD",
                        help="never answer this request (repeatable)")
    parser.add_argument("--hang-once-marker", type=Path, metavar="FILE",
                        help="hang only if FILE does not exist yet; create it with our pid")
    parser.add_argument("--ignore-sigterm", action="store_true",
                        help="ignore SIGTERM, so only SIGKILL stops the process")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> NoReturn:
    args = parse_args(argv)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.stderr_at_start:
        stderr_filler(args.stderr_at_start)
    agent = Agent(args)
    try:
        agent.serve(sys.stdin.buffer)
    except KeyboardInterrupt:  # SIGINT, e.g. a kernel interrupt sent to our process group
        os._exit(130)
    # os._exit: interpreter shutdown could block on stdout held by a turn thread.
    os._exit(0)


if __name__ == "__main__":
    main()
