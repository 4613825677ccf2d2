"""A local HTTP server for tests that stand in for a service (a model's API, the ACP registry):
a request handler's base with a quiet log and one way to answer, served on 127.0.0.1 in a thread
for the length of a `with` block."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Handler(http.server.BaseHTTPRequestHandler):
    """A handler that answers with `reply` and logs nothing (the tests' output stays theirs)."""

    def reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@contextmanager
def serving(handler: type[Handler]) -> Iterator[str]:
    """Serves `handler` until the block ends; yields the base URL (http://127.0.0.1:port)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
