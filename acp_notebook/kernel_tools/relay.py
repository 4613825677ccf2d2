"""The relay an agent starts to reach its kernel's MCP tools.

`python -m acp_notebook.kernel_tools.relay --socket PATH`.

The MCP server itself runs inside the kernel, on the kernel's event loop, where the user's variables
live (`server.py` beside this file). An agent can only start MCP servers as commands (stdio), so the
session's `mcpServers` names this relay: it connects to the kernel's Unix socket (`--socket PATH`,
mode 0600 in a private 0700 directory), proves itself with the token in its environment
(`ACP_NOTEBOOK_KERNEL_TOKEN`, never in argv, which other users can read in `ps`; at its start it
blanks the token in its environment block, which processes of the same user read in
`/proc/<pid>/environ`, see `scrub_environ`), and then copies bytes both ways: the agent's stdin to
the kernel, the kernel's answers to its stdout. It exits when stdin closes (the agent is done or
gone) or when the kernel closes the socket (the kernel ended, or the session the token belongs to
did): no process stays behind. Standard library only, so it starts in tens of milliseconds and needs
nothing the kernel does not have: this module imports nothing of the package (tests/test_layers.py
checks it), and `kernel_tools/__init__.py`, which `python -m` runs first, imports nothing at all.

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

#: The environment variable that carries the token; the relay blanks it in its environment.
TOKEN_ENV = "ACP_NOTEBOOK_KERNEL_TOKEN"
#: The first line the relay sends: this, a space, the token, a newline.
HELLO = b"ACPNB-KERNEL-MCP/1"
#: The kernel's answer to a good token; anything else is a refusal, its reason after "ERR ".
OK = b"OK"
#: The longest handshake line either side accepts.
MAX_HELLO = 512

CHUNK = 65536
CONNECT_TIMEOUT = 10.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m acp_notebook.kernel_tools.relay",
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
    sys.stderr.write(f"acp_notebook.kernel_tools.relay: {message}\n")
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


if __name__ == "__main__":
    sys.exit(main())
