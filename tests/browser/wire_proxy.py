"""A TCP proxy between a page and the JupyterLab server that counts what each connection carries
to the page as it is on the wire.

The page's websocket events cannot tell that: Chromium hands Playwright each frame decompressed
(permessage-deflate). The page loads JupyterLab from `WireProxy.base` and every request and
websocket of it goes through here, byte for byte: the server sees the page's own `Host` and
`Origin`, so it answers as it would the page itself.
"""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit

#: The start of each direction of a connection kept: its request line and its response's head.
HEAD = 4096


class Connection:
    """One connection of the page's: its first bytes each way, and the bytes sent to the page."""

    def __init__(self) -> None:
        self.request = b""  # the first bytes from the page: an HTTP request line and headers
        self.response = b""  # the first bytes to the page: the status line and headers
        self.down = 0  # the bytes sent to the page so far, on the wire

    @property
    def kernel_channels(self) -> bool:
        """A kernel's websocket (`/api/kernels/<id>/channels`)."""
        line = self.request.split(b"\r\n", 1)[0]
        return line.startswith(b"GET /api/kernels/") and b"/channels" in line

    def negotiated(self, extension: bytes) -> bool:
        """The server's handshake answer accepted `extension` (`permessage-deflate`)."""
        head = self.response.split(b"\r\n\r\n", 1)[0].lower()
        return head.startswith(b"http/1.1 101") and extension.lower() in head


class WireProxy:
    """Listens on a free local port, relays each connection to `upstream` (http://host:port)."""

    def __init__(self, upstream: str) -> None:
        address = urlsplit(upstream)
        self._upstream = (address.hostname or "127.0.0.1", address.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections: list[Connection] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True, name="wire-proxy").start()

    def kernel_socket(self) -> Connection | None:
        """The latest kernel websocket the page opened, if any."""
        with self._lock:
            found = [c for c in self.connections if c.kernel_channels]
        return found[-1] if found else None

    def close(self) -> None:
        """No new connections; those open end with the page's (its context is closed)."""
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                page, _ = self._listener.accept()
            except OSError:  # closed
                return
            try:
                server = socket.create_connection(self._upstream, timeout=10)
            except OSError:
                page.close()
                continue
            server.settimeout(None)
            connection = Connection()
            with self._lock:
                self.connections.append(connection)
            for source, sink, down in ((page, server, False), (server, page, True)):
                threading.Thread(
                    target=self._pump, args=(source, sink, connection, down), daemon=True
                ).start()

    @staticmethod
    def _pump(
        source: socket.socket, sink: socket.socket, connection: Connection, down: bool
    ) -> None:
        try:
            while data := source.recv(65536):
                if down:
                    if len(connection.response) < HEAD:
                        connection.response += data[: HEAD - len(connection.response)]
                    connection.down += len(data)
                elif len(connection.request) < HEAD:
                    connection.request += data[: HEAD - len(connection.request)]
                sink.sendall(data)
        except OSError:
            pass
        finally:
            # The other direction ends too: its recv returns once both are shut.
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            source.close()
