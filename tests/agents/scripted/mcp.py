"""The `mcp` step: start an MCP server of the session's `mcpServers`, as an agent does, and call
its tools. A minimal MCP client over stdio (initialize, tools/call), standard library only."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from typing import Any

from .wire import JsonObj

PROTOCOL_VERSION = "2025-06-18"


def call_tools(entry: JsonObj, calls: list[JsonObj], timeout: float = 60.0) -> list[JsonObj]:
    """Start the stdio server `entry` (ACP's shape: command, args, env as name/value pairs),
    run each `{"name", "arguments"}` call, close its stdin and wait for it to exit. Returns per
    call `{"name", "text", "isError", "images"}` (or `{"name", "error"}`), and a last item
    `{"exit": code}`."""
    env = dict(os.environ)
    env.update({str(e["name"]): str(e["value"]) for e in entry.get("env", [])})
    proc = subprocess.Popen(
        [entry["command"], *entry.get("args", [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    watchdog = threading.Timer(timeout, proc.kill)  # a server that hangs must not hang the turn
    watchdog.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        rpc = _Rpc(proc.stdin, proc.stdout)
        rpc.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "scripted-agent", "version": "1"},
            },
        )
        rpc.notify("notifications/initialized", {})
        results: list[JsonObj] = []
        for call in calls:
            answer = rpc.request(
                "tools/call", {"name": call["name"], "arguments": call.get("arguments", {})}
            )
            results.append({"name": call["name"], **_summary(answer)})
        proc.stdin.close()
        results.append({"exit": proc.wait(timeout)})
        return results
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _summary(answer: JsonObj) -> JsonObj:
    if "error" in answer:
        return {"error": answer["error"]}
    result = answer.get("result") or {}
    content = result.get("content") or []
    return {
        "text": "\n".join(c.get("text", "") for c in content if c.get("type") == "text"),
        "isError": bool(result.get("isError")),
        "images": [c.get("mimeType") for c in content if c.get("type") == "image"],
    }


class _Rpc:
    def __init__(self, stdin: Any, stdout: Any) -> None:
        self.stdin, self.stdout, self.next_id = stdin, stdout, 1

    def _send(self, message: JsonObj) -> None:
        self.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.stdin.flush()

    def notify(self, method: str, params: JsonObj) -> None:
        self._send({"method": method, "params": params})

    def request(self, method: str, params: JsonObj) -> JsonObj:
        request_id, self.next_id = self.next_id, self.next_id + 1
        self._send({"id": request_id, "method": method, "params": params})
        while True:
            line = self.stdout.readline()
            if not line:
                return {"error": {"message": "the server closed its output"}}
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return dict(message)
