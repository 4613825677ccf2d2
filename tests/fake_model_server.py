"""A scripted model endpoint on 127.0.0.1, so that a vendor's coding agent (written by others)
runs a real turn offline. It speaks two APIs, each streamed as server-sent events:

- the Anthropic Messages API (`POST …/messages`, and `…/messages/count_tokens`), which Claude
  Code's ACP adapter reaches through `ANTHROPIC_BASE_URL`;
- the OpenAI Responses API (`POST …/responses`), which Codex's ACP adapter reaches through a
  model provider's `base_url`.

The script is one tool call, then a final text: a request that offers the kernel's MCP tool
`insert_cell` (under the name the agent gives it: `mcp__kernel__insert_cell`, or `insert_cell`
in Codex's `mcp__kernel` namespace) and holds no tool result yet is answered with a call of it
with `arguments`; any other request (the tool's result came back, or the agent's side requests:
titles, summaries) with `final`. The test reads what was called and what the agent sent back.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.http_stub import Handler, serving

Events = list[tuple[str, dict[str, Any]]]
TOOL = "insert_cell"


@dataclass
class Script:
    """What the model says, and what it saw: `called` the tool calls it made (by the agent's
    name for the tool), `results` the tool results the agent sent back (each once)."""

    arguments: dict[str, Any]
    final: str
    url: str = ""
    called: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, results: list[str]) -> None:
        with self.lock:
            self.results += [r for r in results if r not in self.results]

    def calls(self, name: str) -> None:
        with self.lock:
            self.called.append(name)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(c.get("text", "")) for c in _dicts(content))


# --- Anthropic Messages ------------------------------------------------------------------------
def _messages_reply(script: Script, body: dict[str, Any]) -> Events:
    blocks = [b for m in _dicts(body.get("messages")) for b in _dicts(m.get("content"))]
    results = [_text_of(b.get("content")) for b in blocks if b.get("type") == "tool_result"]
    script.saw(results)
    names = [str(t.get("name")) for t in _dicts(body.get("tools"))]
    tool = next((n for n in names if n.endswith(f"__{TOOL}") or n == TOOL), None)
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": str(body.get("model", "fake")),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    if tool is not None and not results:
        script.calls(tool)
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": "toolu_fake_1",
            "name": tool,
            "input": {},
        }
        delta = {"type": "input_json_delta", "partial_json": json.dumps(script.arguments)}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": script.final}
        stop = "end_turn"
    return [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def _as_message(events: Events) -> dict[str, Any]:
    """The same reply as one JSON body (a request without `stream`)."""
    message = dict(events[0][1]["message"])
    block = dict(events[1][1]["content_block"])
    delta = events[2][1]["delta"]
    if block["type"] == "text":
        block["text"] = delta["text"]
    else:
        block["input"] = json.loads(delta["partial_json"])
    message["content"] = [block]
    message["stop_reason"] = events[4][1]["delta"]["stop_reason"]
    return message


# --- OpenAI Responses --------------------------------------------------------------------------
def _responses_reply(script: Script, body: dict[str, Any]) -> Events:
    items = _dicts(body.get("input"))
    results = [_text_of(i.get("output")) for i in items if i.get("type") == "function_call_output"]
    script.saw(results)
    tools = _dicts(body.get("tools"))
    # Codex offers an MCP server's tools in a namespace (`mcp__kernel`); a plain function too.
    namespace = next(
        (
            str(t.get("name"))
            for t in tools
            if t.get("type") == "namespace"
            and TOOL in {n.get("name") for n in _dicts(t.get("tools"))}
        ),
        None,
    )
    plain = next((str(t["name"]) for t in tools if str(t.get("name", "")).endswith(TOOL)), None)
    item: dict[str, Any]
    if (namespace or plain) and not results:
        item = {
            "type": "function_call",
            "id": "fc_fake_1",
            "call_id": "call_fake_1",
            "name": TOOL if namespace else plain,
            "arguments": json.dumps(script.arguments),
            "status": "completed",
        }
        if namespace:
            item["namespace"] = namespace
        script.calls(f"{namespace}.{TOOL}" if namespace else str(plain))
    else:
        text = {"type": "output_text", "text": script.final, "annotations": []}
        item = {
            "type": "message",
            "id": "msg_fake_1",
            "role": "assistant",
            "status": "completed",
            "content": [text],
        }
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    return [
        ("response.created", {"type": "response.created", "response": {"id": "resp_fake"}}),
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        (
            "response.completed",
            {"type": "response.completed", "response": {"id": "resp_fake", "usage": usage}},
        ),
    ]


@contextmanager
def fake_model(arguments: dict[str, Any], final: str = "Done.") -> Iterator[Script]:
    """Serve the script on 127.0.0.1 in a thread; `.url` is the base URL (no `/v1`)."""
    script = Script(arguments, final)

    class Model(Handler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = min(int(self.headers.get("Content-Length") or 0), 64 << 20)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            body = body if isinstance(body, dict) else {}
            path = self.path.split("?", 1)[0]
            if path.endswith("/count_tokens"):
                self._json({"input_tokens": 10})
            elif path.endswith("/messages"):
                events = _messages_reply(script, body)
                if body.get("stream"):
                    self._sse(events)
                else:
                    self._json(_as_message(events))
            elif path.endswith("/responses"):
                self._sse(_responses_reply(script, body))
            else:
                self._json({"error": {"type": "not_found_error", "message": path[:200]}}, 404)

        def do_GET(self) -> None:
            self._json({"error": {"type": "not_found_error"}}, 404)

        def _json(self, value: Any, status: int = 200) -> None:
            self.reply(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

        def _sse(self, events: Events) -> None:
            data = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()
            headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            self.reply(200, data, headers)

    with serving(Model) as base:
        script.url = base
        yield script
