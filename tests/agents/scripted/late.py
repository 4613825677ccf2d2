"""The scripted agent's steps for what ACP v1 gained late in 2026: subagents, plan operations,
notices, compaction, prompt suggestions.

Each is sent only to a client that opted in (`clientCapabilities.subagents`, `.plan`,
`.session.notices`, `.session.compaction`, `.session.promptSuggestions`), as a conforming agent
does; to a client that did not, the step does what such an agent does instead (a legacy `plan`,
a message, nothing). Steps:

    {"subagent": {"id", "title"?, "description"?, "cancel"?: bool, "steps": [...],
                  "stop"?: "end_turn"}}      announce a child, run `steps` as the child (their
                                             updates and requests carry its sessionId), then
                                             report it idle (`cancelled` if the client
                                             cancelled it); not opted in: the steps run as the
                                             parent (an agent that hides its children)
    {"subagent_update": {...}}               a raw subagent_update on the current session
    {"wait_child_cancel": true}              (inside a child) wait for session/cancel of it
    {"session_message": {"messageId", "text", "senderSessionId"?, "recipientSessionId"?}}
    {"notice": {"severity", "title", "description"?}}
    {"compaction": {"id", "chunks"?: [str], "summary"?: str, "status"?: str,
                    "used"?: int, "size"?: int}}
    {"plan_update": {"type": "items"|"markdown", "planId", ...}}
    {"plan_removed": "<planId>"}
    {"echo_system_prompt": true}             say the session's systemPrompt (`--system-prompt`)
    {"echo_history": true}                   say the user messages of the session's conversation
                                             before this turn (what a fork copied, `--fork`)
    {"suggest": [str | [block, ...], ...]}   prompt suggestions (unstable), each a text or its
                                             content blocks; not opted in: nothing
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .store import Session
from .wire import INVALID_PARAMS, Cancelled, JsonObj, RpcError, chunk_update

if TYPE_CHECKING:
    from .agent import Agent
    from .turn import Turn


def opted_in(agent: Agent, *path: str) -> bool:
    """Whether the client's `initialize` had `clientCapabilities.<path>` as an object."""
    node: Any = agent.client_capabilities
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return isinstance(node, dict)


class Children:
    """The children the agent announced, by id: the cancel each got (session/cancel)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancels: dict[str, threading.Event] = {}

    def add(self, child_id: str) -> threading.Event:
        with self._lock:
            return self._cancels.setdefault(child_id, threading.Event())

    def cancel(self, child_id: Any) -> bool:
        """A session/cancel for `child_id`: whether it named one of our children."""
        with self._lock:
            event = self._cancels.get(child_id) if isinstance(child_id, str) else None
        if event is None:
            return False
        event.set()
        return True

    def cancelled(self, child_id: str) -> bool:
        with self._lock:
            event = self._cancels.get(child_id)
        return event is not None and event.is_set()


def _subagent(turn: Turn, step: JsonObj) -> None:
    spec = step["subagent"]
    if not isinstance(spec, dict) or not isinstance(spec.get("id"), str):
        raise RpcError(INVALID_PARAMS, "subagent takes an object with a string id")
    steps = list(spec.get("steps") or [])
    if not opted_in(turn.agent, "subagents"):
        turn.run_steps(steps)  # the child's work, reported as the parent's own
        return
    child_id, parent = spec["id"], turn.session
    cancel = turn.agent.children.add(child_id)
    announce: JsonObj = {"sessionUpdate": "subagent_update", "sessionId": child_id}
    for key in ("title", "description"):
        if key in spec:
            announce[key] = spec[key]
    if spec.get("cancel"):
        announce["capabilities"] = {"cancel": {}}
    announce["state"] = {"state": "running"}
    turn.emit(announce)
    turn.session = Session(child_id, parent.cwd, mcp_servers=parent.mcp_servers)
    try:
        for child_step in steps:
            if cancel.is_set():
                break
            turn.run_steps([child_step])
    except Cancelled:  # the parent's turn was cancelled: the child's work stops with it
        cancel.set()
        raise
    finally:
        turn.session = parent
        stop = "cancelled" if cancel.is_set() else str(spec.get("stop", "end_turn"))
        done: JsonObj = {"sessionUpdate": "subagent_update", "sessionId": child_id}
        if spec.get("cancel"):
            done["capabilities"] = None  # no work left to cancel: the grant is withdrawn
        done["state"] = {"state": "idle", "stopReason": stop}
        turn.emit(done)


def _raw_subagent_update(turn: Turn, step: JsonObj) -> None:
    update = step["subagent_update"]
    if not isinstance(update, dict):
        raise RpcError(INVALID_PARAMS, "subagent_update must be an object")
    if opted_in(turn.agent, "subagents"):
        turn.emit({"sessionUpdate": "subagent_update", **update})


def _wait_child_cancel(turn: Turn, step: JsonObj) -> None:
    if not opted_in(turn.agent, "subagents"):
        return  # the agent hides its children: there is none to cancel
    child_id = turn.session.session_id
    event = turn.agent.children.add(child_id)
    while not event.wait(0.05):
        turn.checkpoint()  # the parent's cancel ends the wait too


def _session_message(turn: Turn, step: JsonObj) -> None:
    spec = step["session_message"]
    if not opted_in(turn.agent, "subagents") or not isinstance(spec, dict):
        return
    update: JsonObj = {
        "sessionUpdate": "session_message_chunk",
        "messageId": str(spec.get("messageId", "msg-1")),
        "content": {"type": "text", "text": str(spec.get("text", ""))},
    }
    for key in ("senderSessionId", "recipientSessionId"):
        if key in spec:
            update[key] = spec[key]
    turn.emit(update)


def _notice(turn: Turn, step: JsonObj) -> None:
    spec = step["notice"]
    if not isinstance(spec, dict):
        raise RpcError(INVALID_PARAMS, "notice must be an object")
    if opted_in(turn.agent, "session", "notices"):
        turn.emit({"sessionUpdate": "notice", **spec})
        return
    # What an agent does for a client without notices: tell it in its answer.
    turn.emit(chunk_update("agent_message_chunk", f"Notice: {spec.get('title', '')}\n"))


def _compaction(turn: Turn, step: JsonObj) -> None:
    spec = step["compaction"]
    if not isinstance(spec, dict):
        raise RpcError(INVALID_PARAMS, "compaction must be an object")
    if opted_in(turn.agent, "session", "compaction"):
        compaction_id = str(spec.get("id", "c1"))
        turn.emit(
            {
                "sessionUpdate": "compaction_update",
                "compactionId": compaction_id,
                "status": "in_progress",
            }
        )
        for chunk in spec.get("chunks") or []:
            turn.emit(
                {
                    "sessionUpdate": "compaction_summary_chunk",
                    "compactionId": compaction_id,
                    "content": {"type": "text", "text": str(chunk)},
                }
            )
        done: JsonObj = {
            "sessionUpdate": "compaction_update",
            "compactionId": compaction_id,
            "status": str(spec.get("status", "completed")),
        }
        if "summary" in spec:
            done["summary"] = [{"type": "text", "text": str(spec["summary"])}]
        turn.emit(done)
    if "used" in spec and "size" in spec:  # the context shrank, whoever was told why
        turn.emit({"sessionUpdate": "usage_update", "used": spec["used"], "size": spec["size"]})


def _plan_update(turn: Turn, step: JsonObj) -> None:
    plan = step["plan_update"]
    if not isinstance(plan, dict):
        raise RpcError(INVALID_PARAMS, "plan_update must be an object")
    if opted_in(turn.agent, "plan"):
        turn.emit({"sessionUpdate": "plan_update", "plan": plan})
    elif plan.get("type") == "items":  # the legacy checklist; a Markdown plan has none
        turn.emit({"sessionUpdate": "plan", "entries": list(plan.get("entries") or [])})


def _plan_removed(turn: Turn, step: JsonObj) -> None:
    if opted_in(turn.agent, "plan"):
        turn.emit({"sessionUpdate": "plan_removed", "planId": str(step["plan_removed"])})
    else:
        turn.emit({"sessionUpdate": "plan", "entries": []})


def system_prompt_capability(mode: str | None) -> JsonObj:
    """`sessionCapabilities.systemPrompt` for `--system-prompt` (nothing without it)."""
    if mode is None:
        return {}
    return {"systemPrompt": {"mode": {"override": {}}} if mode == "override" else {}}


def take_system_prompt(agent: Agent, session: Session, params: JsonObj) -> None:
    """Keep the `systemPrompt` of session/new, load or resume; refuse one not advertised, or
    an override where only append is (as the spec lets an agent)."""
    prompt = params.get("systemPrompt")
    if prompt is None:
        return
    mode = agent.args.system_prompt
    if mode is None:
        raise RpcError(INVALID_PARAMS, "systemPrompt was not advertised")
    if not isinstance(prompt, dict) or prompt.get("mode") not in ("append", "override"):
        raise RpcError(INVALID_PARAMS, "systemPrompt must be {mode, content}")
    if prompt["mode"] == "override" and mode != "override":
        raise RpcError(INVALID_PARAMS, "override was not advertised")
    if not isinstance(prompt.get("content"), list):
        raise RpcError(INVALID_PARAMS, "systemPrompt.content must be a list of content blocks")
    session.system_prompt = prompt


def _echo_system_prompt(turn: Turn, step: JsonObj) -> None:
    got = json.dumps(turn.session.system_prompt)
    turn.emit(chunk_update("agent_message_chunk", "SYSTEM PROMPT " + got))


def _echo_history(turn: Turn, step: JsonObj) -> None:
    """The first line of each user message before this turn's, as JSON: what the agent knows."""
    said = []
    for update in turn.agent.store.history(turn.session):
        content = update.get("content")
        if update.get("sessionUpdate") == "user_message_chunk" and isinstance(content, dict):
            said.append(str(content.get("text", "")).partition("\n")[0][:80])
    before = said[: max(len(said) - len(turn.prompt), 0)]  # this turn's prompt is recorded too
    turn.emit(chunk_update("agent_message_chunk", "HISTORY " + json.dumps(before)))


def _suggest(turn: Turn, step: JsonObj) -> None:
    spec = step["suggest"]
    if not isinstance(spec, list):
        raise RpcError(INVALID_PARAMS, "suggest takes a list of prompts")
    if not opted_in(turn.agent, "session", "promptSuggestions"):
        return  # a client that cannot offer them is not sent any
    prompts = [s if isinstance(s, list) else [{"type": "text", "text": str(s)}] for s in spec]
    turn.emit(
        {
            "sessionUpdate": "prompt_suggestions_update",
            "suggestions": [{"prompt": p} for p in prompts],
        }
    )


STEPS: dict[str, Callable[[Turn, JsonObj], None]] = {
    "echo_history": _echo_history,
    "echo_system_prompt": _echo_system_prompt,
    "subagent": _subagent,
    "subagent_update": _raw_subagent_update,
    "wait_child_cancel": _wait_child_cancel,
    "session_message": _session_message,
    "notice": _notice,
    "compaction": _compaction,
    "plan_update": _plan_update,
    "plan_removed": _plan_removed,
    "suggest": _suggest,
}
