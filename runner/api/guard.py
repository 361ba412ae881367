"""Connections to the socket, bounded: time, count per user, file descriptors.

The API's own accept loop (a site of aiohttp's runner) admits each connection
by its peer's uid (SO_PEERCRED) and wraps aiohttp's protocol in a
:class:`Guarded` one that keeps two clocks (``[api]`` in the config):

- a connection with no request in progress (just opened, or answered) is
  closed after ``idle_timeout_seconds``; one still taking a response is not idle;
- a request's head and body must arrive within ``request_timeout_seconds`` of
  its first byte, else ``408 REQUEST_TIMEOUT`` and the connection is closed.
  A handler that runs (a stream, a long answer) is not timed.

One user may hold ``max_connections_per_user`` connections; one more is
answered ``429 TOO_MANY_CONNECTIONS`` and closed. When the daemon runs out of
file descriptors, accepting pauses briefly and is retried: one warning per
episode (at most one a minute), never a log line per attempt.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any

from aiohttp import web

from runner.config.load import ApiLimits

log = logging.getLogger("astraeus.api")
ACCEPT_BATCH = 64  # connections accepted per wake-up
ACCEPT_BACKOFF = 0.5  # seconds without accepting after running out of descriptors
LOG_EVERY = 60.0  # seconds: at most one warning of a kind this often
REFUSE_WAIT = 1.0  # seconds a refused connection may take to send its request
MAX_REFUSING = 64  # refused connections answered at once; more are just closed
CLOSE_AFTER = 0.5  # seconds for a refused request's answer to be written before closing
_IDLE, _REQUEST, _HANDLING, _CLOSING = "idle", "request", "handling", "closing"


class SocketInUse(Exception):
    """Another daemon answers on the socket's path: one line saying so."""


def answers(path: str) -> bool:
    """Whether something listens on the Unix socket ``path`` (a stale file does not)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(path)
    except (BlockingIOError, TimeoutError):  # a listener whose backlog is full
        return True
    except OSError:  # none there, refused (stale), not a socket
        return False
    finally:
        probe.close()
    return True


def peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", creds)[1]
    return uid


def error_bytes(status: int, reason: str, code: str, message: str) -> bytes:
    """A whole HTTP error response, as the API's JSON errors are, that closes."""
    body = json.dumps({"error": {"status": status, "code": code, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def too_late(limits: ApiLimits) -> str:
    """Why a request that took too long to arrive is refused (408 REQUEST_TIMEOUT)."""
    seconds = f"{limits.request_timeout_seconds:g}"
    return f"the request did not arrive within {seconds} s (api.request_timeout_seconds)"


class _Warnings:
    """At most one warning of each kind per LOG_EVERY seconds."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._last: dict[str, float] = {}

    def warn(self, kind: str, message: str, *args: object) -> bool:
        now = self._loop.time()
        if now - self._last.get(kind, -LOG_EVERY) < LOG_EVERY:
            return False
        self._last[kind] = now
        log.warning(message, *args)
        return True


class Guarded(asyncio.Protocol):
    """aiohttp's protocol for one connection, with its two clocks and its user's count."""

    def __init__(
        self, inner: asyncio.Protocol, limits: ApiLimits, release: Callable[[], None]
    ) -> None:
        self.inner, self.limits, self._release = inner, limits, release
        self.transport: asyncio.Transport | None = None
        self._state = _IDLE
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._unsent = 0  # bytes still to write when the idle clock last ran out

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.inner.connection_made(transport)
        self._arm(_IDLE, self.limits.idle_timeout_seconds)

    def data_received(self, data: bytes) -> None:
        if self._state == _IDLE:  # the first bytes of a request: its clock starts
            self._arm(_REQUEST, self.limits.request_timeout_seconds)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._release()
        self.inner.connection_lost(exc)

    def handling(self) -> float:
        """A handler starts: the head has arrived. Seconds left for the body to arrive."""
        left = self.limits.request_timeout_seconds
        if self._state == _REQUEST:
            left = self._deadline - asyncio.get_running_loop().time()
        self._arm(_HANDLING, None)
        return max(left, 0.0)

    def handled(self, close: bool = False) -> None:
        """The handler returned: the connection is idle once its answer is written, or
        with ``close`` (a late body) closed then, whatever else the caller still sends."""
        if close:
            self._arm(_CLOSING, CLOSE_AFTER)
        else:
            self._arm(_IDLE, self.limits.idle_timeout_seconds)

    def _arm(self, state: str, seconds: float | None) -> None:
        self._state = state
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if seconds is not None and self.transport is not None:
            loop = asyncio.get_running_loop()
            self._deadline = loop.time() + seconds
            self._timer = loop.call_at(self._deadline, self._ran_out)

    def _ran_out(self) -> None:
        self._timer = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self._state == _REQUEST:
            message = too_late(self.limits)
            transport.write(error_bytes(408, "Request Timeout", "REQUEST_TIMEOUT", message))
        elif self._state == _CLOSING:
            pass
        elif self._state == _IDLE:
            unsent = transport.get_write_buffer_size()
            if unsent and unsent != self._unsent:  # an answer still being taken: not idle
                self._unsent = unsent
                self._arm(_IDLE, self.limits.idle_timeout_seconds)
                return
        else:
            return
        transport.close()


def guard_of(request: web.Request) -> Guarded | None:
    protocol = request.transport.get_protocol() if request.transport is not None else None
    return protocol if isinstance(protocol, Guarded) else None


class _Refused(asyncio.Protocol):
    """Over the user's cap: the answer at once, closed when the request comes (or soon)."""

    def __init__(self, answer: bytes, done: Callable[[], None]) -> None:
        self.answer, self.done = answer, done
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.answer)
        asyncio.get_running_loop().call_later(REFUSE_WAIT, transport.close)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.done()


class Acceptor(asyncio.AbstractServer):
    """The accept loop of the API's listening socket: caps per uid, survives EMFILE."""

    def __init__(
        self, sock: socket.socket, factory: Callable[[], Any], limits: Callable[[], ApiLimits]
    ) -> None:
        self._sock, self._factory, self._limits = sock, factory, limits
        self._loop = asyncio.get_running_loop()
        self._warnings = _Warnings(self._loop)
        self.held: dict[int, int] = {}  # open connections by peer uid
        self._refusing = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._retry: asyncio.TimerHandle | None = None
        self._short_since: float | None = None  # out of descriptors since (loop time)
        self._told = False  # whether this shortage was logged
        self._serving = True
        sock.setblocking(False)
        self._loop.add_reader(sock.fileno(), self._ready)

    def _ready(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _address = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as e:  # EMFILE and friends: never spin on a ready socket
                self._pause(e)
                return
            if self._short_since is not None:
                since, self._short_since = self._short_since, None
                if self._told:  # the episode's warning was logged: so is its end
                    log.info(
                        "accepting connections again (%.1f s without)", self._loop.time() - since
                    )
            self._admit(conn)

    def _pause(self, error: OSError) -> None:
        if self._short_since is None:
            self._short_since = self._loop.time()
            why = "out of file descriptors" if error.errno in (errno.EMFILE, errno.ENFILE) else ""
            self._told = self._warnings.warn(
                "accept", "cannot accept connections (%s%s): retrying every %g s",
                why and why + ": ", error.strerror or error, ACCEPT_BACKOFF,
            )  # fmt: skip
        self._loop.remove_reader(self._sock.fileno())
        self._retry = self._loop.call_later(ACCEPT_BACKOFF, self._resume)

    def _resume(self) -> None:
        self._retry = None
        if self._serving:
            self._loop.add_reader(self._sock.fileno(), self._ready)

    def _admit(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        try:
            uid = peer_uid(conn)
        except OSError:
            conn.close()
            return
        limits = self._limits()
        if self.held.get(uid, 0) >= limits.max_connections_per_user:
            self._refuse(conn, uid, limits.max_connections_per_user)
            return
        self.held[uid] = self.held.get(uid, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.held[uid] -= 1
                if not self.held[uid]:
                    del self.held[uid]

        def protocol() -> Guarded:
            return Guarded(self._factory(), limits, release)

        self._connect(conn, protocol, release)

    def _refuse(self, conn: socket.socket, uid: int, cap: int) -> None:
        self._warnings.warn("cap", "uid %d holds %d connections, its cap: refusing more", uid, cap)
        if self._refusing >= MAX_REFUSING:
            conn.close()
            return
        self._refusing += 1
        message = (
            f"you already have {cap} connections open to the daemon "
            "(api.max_connections_per_user): close some and try again"
        )
        answer = error_bytes(429, "Too Many Requests", "TOO_MANY_CONNECTIONS", message)

        finished = False

        def done() -> None:
            nonlocal finished
            if not finished:
                finished = True
                self._refusing -= 1

        self._connect(conn, lambda: _Refused(answer, done), done)

    def _connect(
        self,
        conn: socket.socket,
        protocol: Callable[[], asyncio.Protocol],
        undo: Callable[[], None],
    ) -> None:
        async def connect() -> None:
            try:
                await self._loop.connect_accepted_socket(protocol, sock=conn)
            except OSError:  # e.g. no descriptor left for the transport's needs
                conn.close()
                undo()

        task = self._loop.create_task(connect())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # asyncio.AbstractServer, as aiohttp's site stops it
    def close(self) -> None:
        if self._serving:
            self._serving = False
            if self._retry is not None:
                self._retry.cancel()
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()

    async def wait_closed(self) -> None:
        return None

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return self._serving

    async def start_serving(self) -> None:
        return None  # it serves from the start

    async def serve_forever(self) -> None:
        raise NotImplementedError("the API's runner drives this server")


class GuardedSite(web.BaseSite):
    """aiohttp's runner serving on a listening Unix socket through an :class:`Acceptor`."""

    __slots__ = ("_limits", "_path", "_sock")

    def __init__(
        self, runner: web.BaseRunner, sock: socket.socket, limits: Callable[[], ApiLimits]
    ) -> None:
        super().__init__(runner)
        self._sock, self._limits, self._path = sock, limits, sock.getsockname()

    @property
    def name(self) -> str:
        return f"http://unix:{self._path}:"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = Acceptor(self._sock, server, self._limits)
