"""A scripted model endpoint on 127.0.0.1, so that a vendor's coding agent (written by others)
runs a real turn offline: it speaks the Anthropic Messages API (streamed as server-sent events,
or one JSON body), which Claude Code's ACP adapter talks to through `ANTHROPIC_BASE_URL`.

The script is one tool call, then a final text: a request that offers a tool named
`<something>insert_cell` (the kernel's MCP tool, as the agent names it) and holds no tool result
yet is answered with a `tool_use` of it, with `arguments`; any other request (the tool's result
came back, or the agent's side requests: titles, summaries, token counts) with `final`. Every
request is kept, in order, for the test to read.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Script:
    """What the model says; `requests` is every (path, body) it was sent, in order."""

    arguments: dict[str, Any]
    final: str = "Done: I inserted the cell."
    url: str = ""
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tool_calls(self) -> list[str]:
        """The tools the model called, by the name the agent gave them."""
        with self.lock:
            return [name for _, body in self.requests for name in _called(body)]

    def results(self) -> list[str]:
        """The texts of the tool results the agent sent back."""
        with self.lock:
            return [text for _, body in self.requests for text in _tool_results(body)]


def _blocks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            yield from (b for b in content if isinstance(b, dict))


def _called(body: dict[str, Any]) -> list[str]:
    return [str(b.get("name")) for b in _blocks(body) if b.get("type") == "tool_use"]


def _tool_results(body: dict[str, Any]) -> list[str]:
    texts = []
    for block in _blocks(body):
        if block.get("type") != "tool_result":
            continue
        content = block.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.append("".join(str(c.get("text", "")) for c in content if isinstance(c, dict)))
    return texts


def _insert_tool(body: dict[str, Any]) -> str | None:
    for tool in body.get("tools") or []:
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str) and name.endswith("insert_cell"):
            return name
    return None


def answer(script: Script, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The Messages API events of the reply to one request."""
    tool = _insert_tool(body)
    message = {
        "id": f"msg_fake_{len(script.requests)}",
        "type": "message",
        "role": "assistant",
        "model": str(body.get("model", "fake")),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message})
    ]
    if tool is not None and not _tool_results(body):
        block: dict[str, Any] = {"type": "tool_use", "id": "toolu_fake_1", "name": tool}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(script.arguments)}
        stop = "tool_use"
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {**block, "input": {}},
                },
            )
        )
    else:
        delta = {"type": "text_delta", "text": script.final}
        stop = "end_turn"
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
    events += [
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
    return events


def _as_message(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
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


@contextmanager
def fake_model(
    arguments: dict[str, Any], final: str = "Done: I inserted the cell."
) -> Iterator[Script]:
    """Serve the script on 127.0.0.1 in a thread; `.url` is the base URL to give the agent."""
    script = Script(arguments, final)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = min(int(self.headers.get("Content-Length") or 0), 64 << 20)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            body = body if isinstance(body, dict) else {}
            path = self.path.split("?", 1)[0]
            with script.lock:
                script.requests.append((path, body))
            if path.endswith("/count_tokens"):
                self._json({"input_tokens": 10})
            elif path.endswith("/messages"):
                events = answer(script, body)
                if body.get("stream"):
                    self._sse(events)
                else:
                    self._json(_as_message(events))
            else:
                self._json({"type": "error", "error": {"type": "not_found_error"}}, 404)

        def do_GET(self) -> None:
            self._json({"type": "error", "error": {"type": "not_found_error"}}, 404)

        def _json(self, value: Any, status: int = 200) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
            data = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:  # quiet
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    script.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
