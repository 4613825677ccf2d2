"""The relay: a token handshake on the kernel's socket, then a byte pipe both ways.

Why a thin pipe and not an MCP server of its own: the tools need the kernel's namespace and
its event loop, so the MCP protocol is spoken in the kernel; the relay only proves who it is and
copies bytes, so it cannot disagree with the kernel about MCP and has nothing to keep in sync.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import selectors
import socket
import sys

from . import HELLO, MAX_HELLO, OK, TOKEN_ENV

CHUNK = 65536
CONNECT_TIMEOUT = 10.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m acp_notebook.kernel_mcp",
        description="Relay MCP on stdin/stdout to the kernel's tools (the token comes in "
        f"${TOKEN_ENV}).",
    )
    parser.add_argument("--socket", required=True, help="the kernel's Unix socket")
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_ENV, "")
    scrub_environ(TOKEN_ENV)  # before the pop: unsetenv drops the pointer to where it is
    os.environ.pop(TOKEN_ENV, None)
    if not token:
        return _fail(f"no token: ${TOKEN_ENV} is not set")
    try:
        sock = _connect(args.socket, token)
    except PermissionError as exc:  # refused: a wrong or revoked token
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot reach the kernel at {args.socket}: {exc}")
    with sock:
        _pipe(sock)
    return 0


def scrub_environ(name: str) -> None:
    """Blank `name`'s value in this process's environment block, which the same user reads in
    `/proc/<pid>/environ`: `os.environ.pop` (unsetenv) only drops the pointer to it, the bytes
    stay where the kernel shows them. Overwritten in place with NULs, where the C `environ`
    points (Linux; elsewhere nothing to read it by, and nothing done). Python's own copies
    (`posix.environ`) go too; what stays is in this process's memory, which only a debugger
    (ptrace) reads."""
    import posix

    posix.environ.pop(name.encode(), None)
    if not sys.platform.startswith("linux"):
        return
    try:
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), "environ")
    except (OSError, ValueError):
        return
    prefix = name.encode() + b"="
    index = 0
    while environ[index]:
        address = environ[index]
        entry = ctypes.string_at(address)
        if entry.startswith(prefix):
            ctypes.memset(address + len(prefix), 0, len(entry) - len(prefix))
        index += 1


def _fail(message: str) -> int:
    sys.stderr.write(f"acp_notebook.kernel_mcp: {message}\n")
    return 1


def _connect(path: str, token: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(path)
        sock.sendall(HELLO + b" " + token.encode() + b"\n")
        answer = _line(sock)
        if answer != OK:
            reason = answer.removeprefix(b"ERR ").decode("utf-8", "replace")
            raise PermissionError(f"the kernel refused the connection: {reason}")
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return sock


def _line(sock: socket.socket) -> bytes:
    """The kernel's one-line answer, read a byte at a time: nothing after it is consumed."""
    data = b""
    while not data.endswith(b"\n"):
        byte = sock.recv(1)
        if not byte or len(data) > MAX_HELLO:
            break
        data += byte
    return data.strip()


def _pipe(sock: socket.socket) -> None:
    """stdin to the socket, the socket to stdout, until either side closes."""
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(stdin, selectors.EVENT_READ, "stdin")
    selector.register(sock, selectors.EVENT_READ, "socket")
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "stdin":
                    data = os.read(stdin, CHUNK)
                    if not data:
                        return  # the agent closed our stdin: it is done with the tools
                    sock.sendall(data)
                else:
                    data = sock.recv(CHUNK)
                    if not data:
                        return  # the kernel closed the socket: its session or itself ended
                    _write_all(stdout, data)
    except (BrokenPipeError, ConnectionError, KeyboardInterrupt):
        return
    finally:
        selector.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
