"""A prompt turn of the scripted agent: its script's steps, run on a thread of their own."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from . import late
from .host import AgentGone, quietly
from .wire import (
    AUTO_ID,
    BATCH,
    DEFAULT_TOOL_CALL,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    PERMISSION_OPTIONS,
    SCRIPT_PREFIX,
    Cancelled,
    JsonObj,
    RpcError,
    chunk_update,
    digits,
    encode,
    filler_text,
    session_update,
)

if TYPE_CHECKING:
    from .agent import Agent
    from .store import Session


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


def first_text(prompt: list[JsonObj]) -> str:
    for block in prompt:
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            return str(block["text"])
    return ""


def parse_script(text: str) -> list[JsonObj]:
    if not text.startswith(SCRIPT_PREFIX):
        return [{"say": "echo: " + text}]
    try:
        steps = json.loads(text[len(SCRIPT_PREFIX) :])
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

    def __init__(
        self, agent: Agent, session: Session, request_id: Any, prompt: list[JsonObj]
    ) -> None:
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
        threading.Thread(
            target=quietly(self._run), daemon=True, name=f"turn-{self.request_id}"
        ).start()

    def cancel(self) -> None:
        self.cancelled.set()

    def _run(self) -> None:
        self._record_prompt()
        try:
            self._run_steps(self._steps())
        except Cancelled:
            self.stop_reason, self.error = "cancelled", None
        except RpcError as err:
            self.error = err.to_json()
        except (KeyError, TypeError, ValueError, AttributeError, OSError) as exc:
            # A malformed step must fail the turn visibly rather than kill the thread silently.
            self.error = RpcError(INVALID_PARAMS, f"bad script step: {exc!r}").to_json()
        self._finish()

    def _steps(self) -> list[JsonObj]:
        text = first_text(self.prompt)
        queued = self.session.next_steps
        if queued is not None and not text.startswith(SCRIPT_PREFIX):
            self.session.next_steps = None
            return queued
        return parse_script(text)

    def _record_prompt(self) -> None:
        store = self.agent.store
        for block in self.prompt:
            store.record(self.session, {"sessionUpdate": "user_message_chunk", "content": block})
        if self.session.title is None:  # real agents title a session after its first message
            self.session.title = first_text(self.prompt).partition("\n")[0][:60] or None

    def _finish(self) -> None:
        if self.hang:
            self.agent.host.log(f"turn {self.request_id!r} ignores cancellation and never answers")
            self.agent.host.hang()
        self.agent.end_turn(self)  # before answering: the next prompt may follow at once
        if self.error is not None:
            self.agent.out.send({"jsonrpc": "2.0", "id": self.request_id, "error": self.error})
        else:
            self.agent.out.send(
                {
                    "jsonrpc": "2.0",
                    "id": self.request_id,
                    "result": {"stopReason": self.stop_reason},
                }
            )
        if self.after:
            self.cancel_handled = True  # the turn is over: a cancel no longer applies
            try:
                self._run_steps(self.after)
            except (Cancelled, RpcError, KeyError, TypeError, ValueError) as exc:
                self.agent.host.log(f"after_turn steps failed: {exc!r}")

    # -- cancellation

    @property
    def _cancellable(self) -> bool:
        return not self.ignore_cancel and not self.cancel_handled

    def _checkpoint(self) -> None:
        if self._cancellable and self.cancelled.is_set():
            raise Cancelled

    def run_steps(self, steps: list[JsonObj]) -> None:
        """Run `steps` now, within this turn (a step that runs others: `late.py`'s subagent)."""
        self._run_steps(steps)

    def checkpoint(self) -> None:
        """Raise `Cancelled` if the turn was cancelled (and heeds it)."""
        self._checkpoint()

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

    def _call_and_report(self, prefix: str, method: str, params: JsonObj, step: JsonObj) -> None:
        request_id = step["id"] if "id" in step else AUTO_ID
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
        if step.get("every"):  # paced, as a real agent streams: a chunk, then a pause
            first = int(step.get("first", 0))  # the index of the first chunk: goes on a stream
            for index in range(first, first + int(step["chunks"])):
                self.emit(chunk_update("agent_message_chunk", digits(index, size), message_id))
                self._sleep({"sleep": step["every"]})
            return
        batch: list[bytes] = []
        for index in range(int(step["chunks"])):
            batch.append(
                self._line(chunk_update("agent_message_chunk", digits(index, size), message_id))
            )
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
        lines = [
            encode(session_update(step.get("session_id") or self.session.session_id, u))
            for u in updates
        ]
        for start in range(0, times, BATCH):
            self.agent.out.write(
                lines[i % len(lines)] for i in range(start, min(start + BATCH, times))
            )

    def _plan_entries(self, step: JsonObj) -> None:
        entries = [
            {"content": f"step {i}", "priority": "medium", "status": "pending"}
            for i in range(int(step["plan_entries"]))
        ]
        self.emit({"sessionUpdate": "plan", "entries": entries})

    def _next_prompt(self, step: JsonObj) -> None:
        self.session.next_steps = list(step["next_prompt"])

    def _after_turn(self, step: JsonObj) -> None:
        self.after = list(step["after_turn"])

    def _request(self, step: JsonObj) -> None:
        params = dict(step.get("params") or {})
        params.setdefault("sessionId", self.session.session_id)
        self._call_and_report("RESPONSE ", str(step["request"]), params, step)

    def _permission(self, step: JsonObj) -> None:
        tool_call = step["permission"]
        params = {
            "sessionId": self.session.session_id,
            "toolCall": tool_call if isinstance(tool_call, dict) else DEFAULT_TOOL_CALL,
            "options": step.get("options", PERMISSION_OPTIONS),
        }
        self._call_and_report("PERMISSION ", "session/request_permission", params, step)

    def _sleep(self, step: JsonObj) -> None:
        seconds = float(step["sleep"])
        if not self._cancellable:
            if self.agent.host.ended.wait(seconds):  # in-process, the agent was ended meanwhile
                raise AgentGone
        elif self.cancelled.wait(seconds):
            raise Cancelled

    def _wait_cancel(self, step: JsonObj) -> None:
        if self.ignore_cancel:
            self.hang = True  # the cancel it waits for is ignored, so it waits forever
            self.agent.host.hang()
        self.cancelled.wait()  # also set when the agent ends (in-process): see Agent._ended
        if self.agent.host.ended.is_set():
            raise AgentGone
        self.cancel_handled = True  # after_cancel steps run in full, then "cancelled"
        self._run_steps(list(step.get("after_cancel") or []))
        raise Cancelled

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
        self.agent.host.kill()

    def _stderr(self, step: JsonObj) -> None:
        self.agent.host.stderr_filler(int(step["stderr"]))

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
            self.agent.host.write_err(f"{message}\n".encode())
            self.agent.out.exit(3)
        if mode == "error":
            raise RpcError(INTERNAL_ERROR, message)
        raise RpcError(INVALID_PARAMS, f"fail_until mode must be exit or error, not {mode!r}")

    def _mcp(self, step: JsonObj) -> None:
        from .mcp import call_tools

        name = step["mcp"]
        entry = next((s for s in self.session.mcp_servers if s.get("name") == name), None)
        if entry is None:
            names = [s.get("name") for s in self.session.mcp_servers]
            self.emit(chunk_update("agent_message_chunk", f"MCP no server {name!r} in {names}"))
            return
        calls = list(step.get("calls", []))
        during = list(step.get("during") or [])
        if not during:
            results = call_tools(entry, calls)
        else:  # the calls on a thread of their own, these steps meanwhile (a call waits)
            done: list[list[JsonObj]] = []
            thread = threading.Thread(target=lambda: done.append(call_tools(entry, calls)))
            thread.start()
            try:
                self._run_steps(during)
            finally:
                thread.join()
            results = done[0] if done else [{"error": "the calls raised (see stderr)"}]
        self.emit(chunk_update("agent_message_chunk", "MCP " + json.dumps(results)))

    def _wait_fifo(self, step: JsonObj) -> None:
        # A test's signal: it opens the FIFO for writing when the moment has come (a thread, so
        # that nobody writing ends the turn with an error instead of hanging it).
        path, opened = str(step["wait_fifo"]), threading.Event()

        def read() -> None:
            with open(path, "rb") as fifo:
                fifo.read()
            opened.set()

        threading.Thread(target=read, daemon=True).start()
        if not opened.wait(float(step.get("timeout", 60))):
            raise RpcError(INTERNAL_ERROR, f"nobody wrote to {path}")

    def _echo_prompt(self, step: JsonObj) -> None:
        self.emit(chunk_update("agent_message_chunk", "PROMPT " + json.dumps(self.prompt)))

    _STEPS: ClassVar[dict[str, Callable[[Turn, JsonObj], None]]] = {
        "say": _say,
        "think": _think,
        "user": _user,
        "chunks": _chunks,
        "huge_say": _huge_say,
        "update": _update,
        "request": _request,
        "permission": _permission,
        "sleep": _sleep,
        "wait_cancel": _wait_cancel,
        "ignore_cancel": _ignore_cancel,
        "exit": _exit,
        "kill_self": _kill_self,
        "stderr": _stderr,
        "raw": _raw,
        "raw_hex": _raw_hex,
        "respond_id": _respond_id,
        "stop": _stop,
        "error": _error,
        "fail_until": _fail_until,
        "echo_prompt": _echo_prompt,
        "mcp": _mcp,
        "wait_fifo": _wait_fifo,
        "flood": _flood,
        "plan_entries": _plan_entries,
        "after_turn": _after_turn,
        "next_prompt": _next_prompt,
    }


Turn._STEPS.update(late.STEPS)  # subagents, plan operations, notices, compaction

#: Every step a script may use (its action key): tests that cover them all enumerate these.
STEP_NAMES = frozenset(Turn._STEPS)
