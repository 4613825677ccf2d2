#!/usr/bin/env python3
"""A minimal ACP agent for benchmarks: stdlib only, newline-delimited JSON-RPC on stdio.

    python bench/stream_agent.py [N] [S]

Answers `initialize` (protocol version 1), `session/new`, and `session/prompt`. A prompt streams
N `session/update` notifications of kind `agent_message_chunk`, each carrying S bytes of ASCII
text, then answers `{"stopReason": "end_turn"}`. N and S default to argv (20000 and 20); a prompt
whose text is "N S" (two integers) overrides them for that turn. Any number of prompts, in any
number of sessions, per process. The concatenated text of a turn is `expected_text(N, S)`.

A prompt "N S R" (three integers) streams at R characters a second, a chunk at a time, as a real
agent does (a few hundred characters a second): the pace of a slow answer, not a flood.

A prompt "N C md" streams N chunks of Markdown at C chunks a second, each stamped with the time
it was written and numbered (`` `t<ms since the epoch, 13 digits>i<i>` ``, inline code), in
paragraphs with emphasis and, every 40 chunks, a list and a fenced block: what a page measures
its delay by.

The agent must not be the bottleneck: each distinct (session, S) chunk line is encoded once, and a
turn is written in large buffered writes (about 256 KiB each) straight to the stdout file.
"""

from __future__ import annotations

import json
import sys
import time

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
WRITE_BATCH = 256 * 1024


def chunk_text(size: int) -> str:
    """S bytes of JSON-safe ASCII text (the same for every chunk of a turn)."""
    return (ALPHABET * (size // len(ALPHABET) + 1))[:size]


def expected_text(n: int, size: int) -> str:
    return chunk_text(size) * n


def _line(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def _parse_counts(params: dict, default: tuple[int, int]) -> tuple[int, int, int]:
    """(N, S, R): R characters a second, 0 for as fast as it can."""
    text = " ".join(
        b.get("text", "")
        for b in params.get("prompt") or []
        if isinstance(b, dict) and b.get("type") == "text"
    )
    words = text.split()
    if len(words) in (2, 3) and all(w.isdigit() for w in words):
        return int(words[0]), int(words[1]), int(words[2]) if len(words) == 3 else 0
    return (*default, 0)


def _paced(out, line: bytes, n: int, size: int, rate: int) -> None:
    """N chunk lines at `rate` characters a second, on a schedule (no drift from the writes)."""
    start = time.monotonic()
    for i in range(n):
        out.write(line)
        out.flush()
        time.sleep(max(0.0, start + (i + 1) * size / rate - time.monotonic()))


def _stamped(out, sid: str, n: int, per_second: int) -> None:
    """N stamped Markdown chunks at `per_second` chunks a second, on a schedule."""
    start = time.monotonic()
    for i in range(n):
        text = f"`t{time.time() * 1000:013.0f}i{i}` **bold {i}** words "
        if i % 8 == 7:
            text += "\n\n"
        if i % 40 == 39:
            text += "- a list item\n- another\n\n```python\ndef f(x):\n    return x\n```\n\n"
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        out.write(
            _line(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {"sessionId": sid, "update": update},
                }
            )
        )
        out.flush()
        time.sleep(max(0.0, start + (i + 1) / per_second - time.monotonic()))


def main() -> None:
    default = (
        int(sys.argv[1]) if len(sys.argv) > 1 else 20000,
        int(sys.argv[2]) if len(sys.argv) > 2 else 20,
    )
    out = sys.stdout.buffer
    stdin = sys.stdin.buffer
    chunk_lines: dict[tuple[str, int], bytes] = {}
    sessions = 0

    def reply(rid, result=None, error=None) -> None:
        msg = {"jsonrpc": "2.0", "id": rid}
        if error is not None:
            msg["error"] = error
        else:
            msg["result"] = result
        out.write(_line(msg))
        out.flush()

    for raw in stdin:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "method" not in msg:
            continue  # responses and junk: nothing to do
        method, rid, params = msg["method"], msg.get("id"), msg.get("params") or {}
        if rid is None:
            continue  # notifications (session/cancel...): nothing to cancel, turns are instant
        if method == "initialize":
            reply(
                rid,
                {
                    "protocolVersion": 1,
                    "agentCapabilities": {
                        "loadSession": False,
                        "promptCapabilities": {
                            "image": False,
                            "audio": False,
                            "embeddedContext": False,
                        },
                    },
                    "agentInfo": {"name": "stream-agent", "version": "1"},
                    "authMethods": [],
                },
            )
        elif method == "session/new":
            sessions += 1
            reply(rid, {"sessionId": f"bench-{sessions}"})
        elif method == "session/prompt":
            sid = str(params.get("sessionId"))
            words = " ".join(
                b.get("text", "") for b in params.get("prompt") or [] if isinstance(b, dict)
            ).split()
            if len(words) == 3 and words[2] == "md" and words[0].isdigit() and words[1].isdigit():
                _stamped(out, sid, int(words[0]), int(words[1]))
                out.write(
                    _line({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
                )
                out.flush()
                continue
            n, size, rate = _parse_counts(params, default)
            line = chunk_lines.get((sid, size))
            if line is None:
                line = chunk_lines[(sid, size)] = _line(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {
                            "sessionId": sid,
                            "update": {
                                "sessionUpdate": "agent_message_chunk",
                                "content": {"type": "text", "text": chunk_text(size)},
                            },
                        },
                    }
                )
            if rate:
                _paced(out, line, n, size, rate)
            else:
                per_batch = max(1, WRITE_BATCH // len(line))
                batch = line * per_batch
                full, rest = divmod(n, per_batch)
                for _ in range(full):
                    out.write(batch)
                out.write(line * rest)
            out.write(_line({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}))
            out.flush()
        else:
            reply(rid, error={"code": -32601, "message": f"method not found: {method}"})


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
