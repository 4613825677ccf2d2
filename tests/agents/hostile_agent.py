#!/usr/bin/env python3
"""A hostile ACP v1 agent on stdio: every string it controls carries a payload. Stdlib only.

Wire format: newline-delimited JSON-RPC 2.0 on stdin/stdout, as tests/agents/scripted_agent.py.
The payloads come from tests/hostile_payloads.py, one class per process: `--payloads CLASS`, else
the `HOSTILE_PAYLOADS` environment variable, else `tags`.

Where the payloads go:
  initialize      agent name, title and version; auth method names and descriptions
  session/new     the session id; modes (ids, names, descriptions); config options (ids, names,
                  descriptions, categories, values, value names, groups)
  session/list    one listed session per payload (id, title, cwd, updatedAt), `--page-size` a page
The prompt's first text picks the turn (K is a payload index, modulo the class's size):
  turn K (or any other text)  everything: thoughts, message chunks, plan entries, tool calls
                  (titles, kinds, locations, diff paths and texts, content, raw input and output),
                  a client terminal printing the payloads (when the client offers terminals),
                  commands, config options, mode, session title and updatedAt, usage currency,
                  unknown update kinds, resource links, resources and images with hostile MIME types
  title K         only the session's title/updatedAt, mode, usage currency and one message
  stop K          one message, then the stop reason is payload K
  fail K          one message, then a JSON-RPC error whose message is payload K
  permission K    session/request_permission with payloads in the tool call and the option names;
                  waits for the answer and reports it as a message, and (with `--log FILE`)
                  appends it to FILE as one JSON line
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hostile_payloads import by_class  # a standalone script: the corpus is found by path

JsonObj = dict[str, Any]

SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" onload="{js}"><script>{js}</script>'
    '<image href="x" onerror="{js}"/></svg>'
)
PNG_1PX = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAA"
    "AABJRU5ErkJggg=="
)


class Agent:
    def __init__(self, cls: str, page_size: int, log: Path | None) -> None:
        self.payloads = [p.text for p in by_class(cls)]
        self.ids = [p.id for p in by_class(cls)]
        self.page_size = page_size
        self.log = log
        self.lock = threading.Lock()
        self.pending: dict[int, tuple[threading.Event, list[JsonObj]]] = {}
        self.next_id = 0
        self.sessions = 0
        self.terminal = False
        self.cancelled: set[str] = set()

    # -- wire

    def send(self, msg: JsonObj) -> None:
        line = json.dumps(msg, ensure_ascii=True) + "\n"  # ASCII: lone surrogates stay legal
        with self.lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def update(self, session_id: str, update: JsonObj) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": session_id, "update": update},
            }
        )

    def call(self, method: str, params: JsonObj) -> JsonObj:
        """A request to the client from a turn thread; waits for the answer."""
        event, box = threading.Event(), []
        with self.lock:
            self.next_id += 1
            request_id = self.next_id
            self.pending[request_id] = (event, box)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        event.wait()
        return box[0]

    def serve(self) -> None:
        for raw in sys.stdin:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            if "method" not in msg:
                waiter = self.pending.pop(msg.get("id"), None)
                if waiter is not None:
                    waiter[1].append(msg)
                    waiter[0].set()
                continue
            params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
            if "id" not in msg:
                if msg["method"] == "session/cancel":
                    self.cancelled.add(str(params.get("sessionId")))
                continue
            self.answer(msg["id"], msg["method"], params)

    def answer(self, request_id: Any, method: str, params: JsonObj) -> None:
        if method == "session/prompt":
            threading.Thread(target=self.turn, args=(request_id, params), daemon=True).start()
            return
        handler = HANDLERS.get(method)
        if handler is None:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": self.all()},
                }
            )
        else:
            self.send({"jsonrpc": "2.0", "id": request_id, "result": handler(self, params)})

    # -- payload helpers

    def p(self, k: int) -> str:
        return self.payloads[k % len(self.payloads)]

    def all(self) -> str:
        return " ".join(self.payloads)

    def modes(self, current: int = 0) -> JsonObj:
        return {
            "currentModeId": self.p(current),
            "availableModes": [{"id": p, "name": p, "description": p} for p in self.payloads],
        }

    def config_options(self, k: int = 0) -> list[JsonObj]:
        options: list[JsonObj] = [
            {
                "id": f"opt{i}{p}",
                "name": p,
                "description": p,
                "category": p,
                "type": "select",
                "currentValue": p,
                "options": [{"value": p, "name": p, "description": p}],
            }
            for i, p in enumerate(self.payloads)
        ]
        options.append(
            {
                "id": self.p(k),
                "name": self.p(k + 1),
                "type": "boolean",
                "currentValue": True,
                "category": "_" + self.p(k),
            }
        )
        options.append(
            {
                "id": "grouped",
                "name": self.p(k),
                "type": "select",
                "currentValue": self.p(k),
                "options": [
                    {
                        "group": self.p(k),
                        "name": self.p(k + 1),
                        "options": [{"value": self.p(k), "name": self.p(k)}],
                    }
                ],
            }
        )
        return options

    # -- handlers

    def initialize(self, params: JsonObj) -> JsonObj:
        caps = params.get("clientCapabilities") or {}
        self.terminal = bool(isinstance(caps, dict) and caps.get("terminal"))
        return {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": False,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "sessionCapabilities": {"list": {}, "close": {}},
            },
            "authMethods": [
                {"id": f"auth{i}", "name": p, "description": p} for i, p in enumerate(self.payloads)
            ],
            "agentInfo": {"name": self.all(), "title": self.all(), "version": self.p(0)},
        }

    def new_session(self, params: JsonObj) -> JsonObj:
        self.sessions += 1
        return {
            "sessionId": f"sess-{self.sessions}-{self.p(self.sessions)}",
            "modes": self.modes(),
            "configOptions": self.config_options(),
        }

    def list_sessions(self, params: JsonObj) -> JsonObj:
        cursor = params.get("cursor")
        start = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else 0
        page = [
            {
                "sessionId": f"listed-{i}-{p}",
                "cwd": "/" + p,
                "title": p,
                "updatedAt": p,
                "_meta": {"note": p},
            }
            for i, p in enumerate(self.payloads)
        ][start : start + self.page_size]
        result: JsonObj = {"sessions": page}
        if start + self.page_size < len(self.payloads):
            result["nextCursor"] = str(start + self.page_size)
        return result

    def set_config(self, params: JsonObj) -> JsonObj:
        return {"configOptions": self.config_options()}

    # -- turns

    def turn(self, request_id: Any, params: JsonObj) -> None:
        sid = str(params.get("sessionId"))
        text = next(
            (
                b.get("text", "")
                for b in params.get("prompt") or []
                if isinstance(b, dict) and b.get("type") == "text"
            ),
            "",
        )
        m = re.match(r"\s*(turn|title|stop|fail|permission)\s+(\d+)", str(text))
        kind, k = (m.group(1), int(m.group(2))) if m else ("turn", 0)
        result: JsonObj = {"stopReason": "end_turn"}
        if kind == "turn":
            self.full_turn(sid, k)
        elif kind == "title":
            self.title_turn(sid, k)
        elif kind == "permission":
            self.permission_turn(sid, k)
        else:
            self.say(sid, self.p(k))
            if kind == "stop":
                result = {"stopReason": self.p(k)}
            else:
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": {
                            "code": 1,
                            "message": self.p(k),
                            "data": {"details": self.p(k + 1)},
                        },
                    }
                )
                return
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def say(self, sid: str, text: str, kind: str = "agent_message_chunk") -> None:
        self.update(sid, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})

    def title_turn(self, sid: str, k: int) -> None:
        self.update(
            sid,
            {
                "sessionUpdate": "session_info_update",
                "title": self.p(k),
                "updatedAt": self.p(k + 1),
            },
        )
        self.update(sid, {"sessionUpdate": "current_mode_update", "currentModeId": self.p(k)})
        self.update(
            sid,
            {
                "sessionUpdate": "usage_update",
                "used": 10,
                "size": 100,
                "cost": {"amount": 0.25, "currency": self.p(k)},
            },
        )
        self.update(
            sid, {"sessionUpdate": "config_option_update", "configOptions": self.config_options(k)}
        )
        self.say(sid, self.p(k))

    def full_turn(self, sid: str, k: int) -> None:
        for p in self.payloads:
            self.say(sid, p, "agent_thought_chunk")
        for p in self.payloads:
            self.say(sid, p + "\n\n")
        self.say(sid, "inline: " + self.all() + "\n\n")
        self.update(
            sid,
            {
                "sessionUpdate": "plan",
                "entries": [
                    {"content": p, "priority": "high", "status": "pending"} for p in self.payloads
                ],
            },
        )
        for i, p in enumerate(self.payloads):
            self.tool_call(sid, i, p)
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "badkind",
                "title": self.p(k),
                "kind": self.p(k),
                "status": self.p(k),
            },
        )
        if self.terminal:
            self.terminal_call(sid)
        self.update(
            sid,
            {
                "sessionUpdate": "available_commands_update",
                "availableCommands": [
                    {"name": p, "description": p, "input": {"hint": p}} for p in self.payloads
                ],
            },
        )
        self.title_turn(sid, k)
        self.update(sid, {"sessionUpdate": self.p(k), "data": self.p(k)})
        self.update(sid, {"sessionUpdate": "hostile_unknown_kind", "html": self.all()})
        for i, p in enumerate(self.payloads):
            self.blocks(sid, i, p)

    def tool_call(self, sid: str, i: int, p: str) -> None:
        call_id = f"call-{i}"
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": p,
                "kind": "edit",
                "status": "pending",
                "locations": [{"path": "/" + p, "line": 1}],
                "content": [
                    {"type": "diff", "path": "/" + p, "oldText": p, "newText": p + "\n" + p},
                    {"type": "content", "content": {"type": "text", "text": p}},
                ],
                "rawInput": {"command": p, "path": p},
            },
        )
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "completed",
                "title": p,
                "rawOutput": {"output": p},
                "content": [
                    {"type": "content", "content": {"type": "text", "text": p}},
                    {"type": "diff", "path": p, "oldText": None, "newText": p},
                ],
            },
        )

    def terminal_call(self, sid: str) -> None:
        created = self.call(
            "terminal/create",
            {
                "sessionId": sid,
                "command": "printf",
                "args": ["%s\\n", *self.payloads],
                "outputByteLimit": 1_000_000,
            },
        )
        terminal_id = (created.get("result") or {}).get("terminalId")
        if not isinstance(terminal_id, str):
            self.say(sid, "terminal/create failed: " + json.dumps(created))
            return
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "term",
                "kind": "execute",
                "title": self.all(),
                "status": "in_progress",
                "content": [{"type": "terminal", "terminalId": terminal_id}],
            },
        )
        self.call("terminal/wait_for_exit", {"sessionId": sid, "terminalId": terminal_id})
        self.update(
            sid, {"sessionUpdate": "tool_call_update", "toolCallId": "term", "status": "completed"}
        )
        self.call("terminal/release", {"sessionId": sid, "terminalId": terminal_id})

    def blocks(self, sid: str, i: int, p: str) -> None:
        pid = self.ids[i]
        script = f"Reflect.set(top,/__acp_pwned/.source,/{pid}/.source)"
        svg = base64.b64encode(SVG.format(js=script).encode()).decode()
        for block in (
            {
                "type": "resource_link",
                "uri": f"javascript:{script}",
                "name": p,
                "title": p,
                "description": p,
                "mimeType": p,
            },
            {"type": "resource_link", "uri": p, "name": p},
            {"type": "resource", "resource": {"uri": p, "mimeType": "text/html", "text": p}},
            {"type": "image", "mimeType": "image/svg+xml", "data": svg},
            {"type": "image", "mimeType": p, "data": PNG_1PX},
            {"type": "image", "mimeType": "image/png", "data": p, "uri": p},
        ):
            self.update(sid, {"sessionUpdate": "agent_message_chunk", "content": block})

    def permission_turn(self, sid: str, k: int) -> None:
        p = self.p(k)
        answer = self.call(
            "session/request_permission",
            {
                "sessionId": sid,
                "toolCall": {
                    "toolCallId": f"perm-{k}",
                    "title": p,
                    "kind": "edit",
                    "locations": [{"path": "/" + p}],
                    "content": [
                        {"type": "content", "content": {"type": "text", "text": p}},
                        {"type": "diff", "path": "/" + p, "oldText": p, "newText": p},
                    ],
                },
                "options": [
                    {"optionId": "allow", "name": p, "kind": "allow_once"},
                    {"optionId": "allow-always", "name": self.p(k + 1), "kind": "allow_always"},
                    {"optionId": "reject", "name": "Reject " + p, "kind": "reject_once"},
                ],
            },
        )
        outcome = (answer.get("result") or {}).get("outcome")
        if self.log is not None:
            with self.log.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"k": k, "outcome": outcome}) + "\n")
        self.say(sid, "permission outcome: " + json.dumps(outcome))


HANDLERS = {
    "initialize": Agent.initialize,
    "authenticate": lambda self, params: {},
    "session/new": Agent.new_session,
    "session/list": Agent.list_sessions,
    "session/close": lambda self, params: {},
    "session/set_mode": lambda self, params: {},
    "session/set_config_option": Agent.set_config,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--payloads", default=os.environ.get("HOSTILE_PAYLOADS", "tags"))
    parser.add_argument("--page-size", type=int, default=3)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    Agent(args.payloads, args.page_size, args.log).serve()
    os._exit(0)


if __name__ == "__main__":
    main()
