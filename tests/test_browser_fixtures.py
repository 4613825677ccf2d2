"""The shared browser fixtures of tests/conftest.py keep tests apart.

One Chromium and one browser context serve a whole test session (a worker); a test's page must
still start without the cookies and storage an earlier test left. Skipped like tests/test_lab.py
without a browser.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

LEAVE = """() => { localStorage.setItem('left', '1'); sessionStorage.setItem('left', '1');
  document.cookie = 'left=1; max-age=3600; path=/'; }"""
FOUND = """() => ({local: localStorage.getItem('left'), session: sessionStorage.getItem('left'),
  cookie: document.cookie})"""


class _Blank(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>blank</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Blank)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_a_page_starts_without_what_the_last_test_left(_contexts: Any, site: str) -> None:
    first = _contexts.get().new_page()
    first.goto(site)
    first.evaluate(LEAVE)
    assert first.evaluate(FOUND) == {"local": "1", "session": "1", "cookie": "left=1"}
    _contexts.forget(first)

    second = _contexts.get().new_page()
    try:
        second.goto(site)
        assert second.evaluate(FOUND) == {"local": None, "session": None, "cookie": ""}
    finally:
        _contexts.forget(second)
    assert first.is_closed()
