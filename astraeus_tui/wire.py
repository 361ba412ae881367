"""The client's transport: one HTTP/1.1 request over the daemon's Unix socket, stdlib only.

``astraeus_tui/client.py`` is the one way to talk to the daemon and sends every answered
request (not the streams) through ``exchange``; the fast commands (cli/fast/) call it
directly with JSON's plain values (runner/plainjson.py), so a command people run
often loads neither http.client (email, ssl), json, msgspec nor runner.schema before its
request is on the wire.
"""

from __future__ import annotations

import _socket  # socket.py's base class (socket.py adds enums and selectors, unused here)
import os

from runner import plainjson

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


class ApiError(Exception):
    """A refusal from the daemon, or no daemon at all; ``str`` is one line."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def __str__(self) -> str:
        if self.status == 0:
            return self.message
        return f"{self.status} {self.code}: {self.message}"


def socket_path() -> str:
    """``ASTRAEUS_SOCKET``, else ``astraeus.sock`` in ``ASTRAEUS_HOME`` (``~/.astraeus``)."""
    if "ASTRAEUS_SOCKET" in os.environ:
        return os.environ["ASTRAEUS_SOCKET"]
    home = os.environ.get("ASTRAEUS_HOME")
    if home is None:
        home = os.path.join(os.path.expanduser("~"), ".astraeus")
    return os.path.join(home, "astraeus.sock")


def unreachable(path: object, e: OSError) -> ApiError:
    """The one line for a socket no daemon answers on, or one the caller may not use."""
    if isinstance(e, PermissionError):
        return ApiError(0, "NO_ACCESS", f"no permission to use {path}")
    return ApiError(
        0, "NO_DAEMON",
        f"no daemon answers on {path} (start it with `astra up` "
        f"or `astra serve`): {e.strerror}",
    )  # fmt: skip


def dechunk(body: bytes) -> bytes:
    """A ``Transfer-Encoding: chunked`` body, joined."""
    out: list[bytes] = []
    at = 0
    while True:
        end = body.index(b"\r\n", at)
        size = int(body[at:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2 : end + 2 + size])
        at = end + 2 + size + 2


def target(path: str, query: dict[str, Any] | None) -> str:
    """``path`` with ``query``'s set values (None and False left out, True as ``1``)."""
    if query:
        clean = {k: v for k, v in query.items() if v is not None and v is not False}
        clean = {k: ("1" if v is True else v) for k, v in clean.items()}
        if clean:
            return f"{path}?{_urlencode(clean)}"
    return path


_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def _urlencode(query: dict[str, Any]) -> str:
    """``urllib.parse.urlencode(query)`` of strings and numbers, without importing urllib."""
    if not all(isinstance(v, str | int) for v in query.values()):
        from urllib.parse import urlencode

        return urlencode(query)

    def plus(text: str) -> str:
        if all(c in _PLAIN for c in text):
            return text
        return "".join(
            chr(b) if chr(b) in _PLAIN else "+" if b == 32 else f"%{b:02X}" for b in text.encode()
        )

    return "&".join(f"{plus(str(k))}={plus(str(v))}" for k, v in query.items())


def quoted(name: str, safe: str = "/") -> str:
    """``urllib.parse.quote(name, safe)``: a run's or group's name in a path."""
    if name.isascii() and name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        return name  # what quote() leaves as it is, without importing urllib
    from urllib.parse import quote

    return quote(name, safe=safe)


def raise_for(status: int, body: bytes) -> None:
    try:
        error = plainjson.loads(body)["error"]
        raise ApiError(status, error["code"], error["message"])
    except (ValueError, KeyError, TypeError):
        raise ApiError(status, "ERROR", body.decode(errors="replace").strip()[:300]) from None


def _connected(path: object, timeout: float | None) -> _socket.socket:
    """A connection to the daemon's socket at ``path``; ApiError when nobody answers."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError, PermissionError) as e:
        sock.close()
        raise unreachable(path, e) from None
    return sock


def _head(head: bytes, path: object) -> tuple[int, dict[bytes, bytes]]:
    """An answer's status and its header fields (names in lower case)."""
    status_line, *lines = head.split(b"\r\n")
    try:
        status = int(status_line.split()[1])
    except (IndexError, ValueError):
        raise ApiError(0, "ERROR", f"not an HTTP answer from {path}") from None
    return status, dict(line.lower().split(b":", 1) for line in lines if b":" in line)


def exchange(
    path: object, method: str, target: str, body: bytes | None = None,
    content_type: str = "application/json", timeout: float | None = 30,
) -> bytes:  # fmt: skip
    """The answer's body to one request on the socket at ``path`` (the connection closed
    after it); a status of 400 or more raises its ApiError."""
    sock = _connected(path, timeout)
    try:
        head = f"{method} {target} HTTP/1.1\r\nHost: localhost\r\n"
        if body is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        request = head.encode() + b"Connection: close\r\n\r\n"
        sock.sendall(request + body if body is not None else request)
        chunks = []
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
    finally:
        sock.close()
    answer = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    head_bytes, _, data = answer.partition(b"\r\n\r\n")
    status, fields = _head(head_bytes, path)
    if b"chunked" in fields.get(b"transfer-encoding", b""):
        data = dechunk(data)
    if status >= 400:
        raise_for(status, data)
    return data


def request(method: str, target: str, body: object = None, timeout: float | None = 30) -> Any:
    """One call's JSON answer as plain values (None for an empty body)."""
    raw = None if body is None else plainjson.dumps(body).encode()
    data = exchange(socket_path(), method, target, raw, timeout=timeout)
    return plainjson.loads(data) if data else None


def stream(path: object, target: str, timeout: float | None = 30) -> Iterator[bytes]:
    """A GET's body line by line as it arrives (each line with its newline; the last may
    lack one): logs and events followed. The connection is closed when the body ends or
    the caller stops reading."""
    sock = _connected(path, timeout)
    try:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                     .encode())  # fmt: skip
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise ApiError(0, "ERROR", f"not an HTTP answer from {path}")
            buffer += chunk
        head, _, rest = buffer.partition(b"\r\n\r\n")
        status, fields = _head(head, path)
        chunked = b"chunked" in fields.get(b"transfer-encoding", b"")
        body = _chunks(sock, rest) if chunked else _until_closed(sock, rest)
        if status >= 400:
            raise_for(status, b"".join(body))
        pending = b""
        for data in body:
            pending += data
            start = 0
            while (end := pending.find(b"\n", start)) >= 0:
                yield pending[start : end + 1]
                start = end + 1
            pending = pending[start:]
        if pending:
            yield pending
    finally:
        sock.close()


def _until_closed(sock: _socket.socket, first: bytes) -> Iterator[bytes]:
    if first:
        yield first
    while chunk := sock.recv(1 << 20):
        yield chunk


def _chunks(sock: _socket.socket, buffer: bytes) -> Iterator[bytes]:
    """A ``Transfer-Encoding: chunked`` body's data as its chunks arrive."""

    def more() -> bytes:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ApiError(0, "ERROR", "the daemon closed the stream mid-chunk")
        return chunk

    while True:
        while b"\r\n" not in buffer:
            buffer += more()
        end = buffer.index(b"\r\n")
        size = int(buffer[:end].split(b";")[0], 16)
        if size == 0:
            return
        while len(buffer) < end + 2 + size + 2:
            buffer += more()
        yield buffer[end + 2 : end + 2 + size]
        buffer = buffer[end + 2 + size + 2 :]
