"""``[api] metrics_address``: the TCP listener that serves ``GET /metrics``, and nothing else,
bounded as the socket is.

Whoever reaches the address may connect (no SO_PEERCRED on TCP), so its door is bounded
for all of them together:

- at most ``MAX_CONNECTIONS`` open at once; one more pushes out a connection that is not
  being answered: of the peer address holding the most, the one in its state longest, one
  that sends nothing before one whose request is arriving. Idle connections never lock a
  scrape out; when every connection is being answered, the new one is closed;
- a request arrives whole (its head; a scrape has no body) within ``[api]
  request_timeout_seconds`` of its first byte, else ``408 REQUEST_TIMEOUT`` and closed; a
  connection with nothing in progress is closed after ``[api] idle_timeout_seconds`` (the
  socket's clocks: runner/api/guard.py);
- at most ``MAX_REQUEST_BYTES`` arrive between two answers, else ``413
  REQUEST_ENTITY_TOO_LARGE`` and closed; a request with a body is refused the same way,
  its body never read;
- ``GET`` (or ``HEAD``) ``/metrics`` is answered (the socket's registry and its kept text,
  runner/api/metrics.py); any other path is ``404 NOT_FOUND``, another method on
  ``/metrics`` ``405``. No route of the API is reachable there.

The address is bound as written (``127.0.0.1`` is loopback only; a host name, each of its
addresses), never a wider one.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiohttp import web

from runner.api.context import error_response, guarded
from runner.api.guard import (
    _CLOSING,
    _HANDLING,
    _REQUEST,
    CLOSE_AFTER,
    Acceptor,
    Guarded,
    error_bytes,
)
from runner.api.metrics import METRICS, metrics
from runner.api.served import Daemon
from runner.config.load import ApiLimits

__all__ = ["MAX_CONNECTIONS", "MAX_REQUEST_BYTES", "start_metrics_site"]

MAX_CONNECTIONS = 32  # open at once, from every peer together
MAX_REQUEST_BYTES = 4096  # received between two answers: a scrape's head is a few hundred
TOO_LARGE = (
    f"a request to the metrics address is at most {MAX_REQUEST_BYTES} bytes "
    "and has no body: GET /metrics"
)
ONLY = "only GET /metrics is served on the metrics address"


class _Scrape(Guarded):
    """One TCP connection: the socket's clocks, a bound on the bytes it sends, and its
    place in the door's count."""

    def __init__(
        self,
        inner: asyncio.Protocol,
        limits: ApiLimits,
        release: Callable[[], None],
        place: _Place,
    ) -> None:
        super().__init__(inner, limits, release)
        self.place = place
        self._taken = 0  # bytes received since the last answer
        self._refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if not self.place.made(self):  # pushed out while it was being connected
            assert self.transport is not None
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._refused:  # answered and closing: whatever else comes is dropped
            return
        self._taken += len(data)
        if self._taken > MAX_REQUEST_BYTES:
            self._refuse()
            return
        super().data_received(data)

    def handled(self, close: bool = False) -> None:
        self._taken = 0
        super().handled(close)

    def _arm(self, state: str, seconds: float | None) -> None:
        self.place.since = asyncio.get_running_loop().time()
        super()._arm(state, seconds)

    def _refuse(self) -> None:
        """413 at once, then closed: the rest of what it sends is read and dropped for
        CLOSE_AFTER seconds, so that the answer is not lost to a reset."""
        self._refused = True
        assert self.transport is not None
        self.transport.write(
            error_bytes(413, "Request Entity Too Large", "REQUEST_ENTITY_TOO_LARGE", TOO_LARGE)
        )
        self._arm(_CLOSING, CLOSE_AFTER)

    def connection_lost(self, exc: Exception | None) -> None:
        self.place.gone()
        super().connection_lost(exc)


class _Place:
    """A connection's place at the door, from its accept (before its protocol exists) until
    it is closed or pushed out."""

    def __init__(self, door: _Door, conn: socket.socket, peer: str) -> None:
        self.door, self.conn, self.peer = door, conn, peer
        self.since = asyncio.get_running_loop().time()  # when it entered its state
        self.scrape: _Scrape | None = None
        self.out = False
        self._counted = True
        door.count += 1
        door.places[self] = None

    @property
    def pushable(self) -> bool:
        """Whether it may be pushed out for a new connection: not while being answered."""
        return self.scrape is None or self.scrape._state != _HANDLING

    @property
    def unsent(self) -> int:
        transport = self.scrape.transport if self.scrape is not None else None
        return transport.get_write_buffer_size() if transport is not None else 0

    def asking(self) -> bool:
        """Whether a request is arriving: begun, or its bytes waiting to be read (a
        connection accepted in the same batch as many others is read after them)."""
        if self.scrape is not None and self.scrape._state == _REQUEST:
            return True
        try:
            return bool(self.conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:  # nothing waiting, or closed
            return False

    def made(self, scrape: _Scrape) -> bool:
        """Its protocol is connected; False when it was pushed out meanwhile."""
        self.scrape = scrape
        return not self.out

    def gone(self) -> None:
        """Closed, or pushed out: its place is free (once)."""
        self.door.places.pop(self, None)
        if self._counted:
            self._counted = False
            self.door.count -= 1

    def push_out(self) -> None:
        self.out = True
        self.gone()  # its place is the new connection's at once
        if self.scrape is not None and self.scrape.transport is not None:
            self.scrape.transport.abort()
        else:  # still being connected: ended now, its transport aborted once made
            with contextlib.suppress(OSError):
                self.conn.shutdown(socket.SHUT_RDWR)


class _Door:
    """The listener's connections, counted together for every address it listens on."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.count = 0  # admitted and not yet closed (or pushed out)
        self.places: dict[_Place, None] = {}  # in the order they came

    def room(self) -> bool:
        """Whether one more may come in, pushing one out if need be."""
        if self.count < self.cap:
            return True
        pushable = [p for p in self.places if p.pushable]
        if not pushable:
            return False
        held = Counter(p.peer for p in self.places)
        order = sorted(pushable, key=lambda p: (-held[p.peer], p.unsent > 0, p.since))
        next((p for p in order if not p.asking()), order[0]).push_out()
        return self.count < self.cap


class _Acceptor(Acceptor):
    """runner/api/guard.py's accept loop (batches, running out of descriptors) admitting by
    the door's count instead of the peer's uid."""

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], Any],
        limits: Callable[[], ApiLimits],
        door: _Door,
    ) -> None:
        super().__init__(sock, factory, limits)
        self.door = door

    def _admit(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        try:
            peer = str(conn.getpeername()[0])
        except OSError:
            conn.close()
            return
        door = self.door
        if not door.room():
            self._warnings.warn(
                "full", "the metrics address has %d connections being answered: refusing more",
                door.cap,
            )  # fmt: skip
            conn.close()
            return
        place = _Place(door, conn, peer)
        limits = self._limits()

        def protocol() -> _Scrape:
            return _Scrape(self._factory(), limits, place.gone, place)

        self._connect(conn, protocol, place.gone)


class _Site(web.BaseSite):
    """aiohttp's runner serving on one bound TCP socket through an :class:`_Acceptor`."""

    __slots__ = ("_door", "_limits", "_sock")

    def __init__(
        self,
        runner: web.BaseRunner,
        sock: socket.socket,
        limits: Callable[[], ApiLimits],
        door: _Door,
    ) -> None:
        super().__init__(runner)
        self._sock, self._limits, self._door = sock, limits, door

    @property
    def name(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = _Acceptor(self._sock, server, self._limits, self._door)


@web.middleware
async def _only_metrics(request: web.Request, handler: Any) -> web.StreamResponse:
    """Nothing but a GET of /metrics without a body reaches the handler."""
    if request.path != "/metrics":
        return error_response(404, "NOT_FOUND", ONLY)
    if request.method not in ("GET", "HEAD"):
        response = error_response(405, "METHOD_NOT_ALLOWED", ONLY)
        response.headers["Allow"] = "GET, HEAD"
        return response
    if request.body_exists:  # never read: the connection closes with the answer
        response = error_response(413, "REQUEST_ENTITY_TOO_LARGE", TOO_LARGE)
        response.force_close()
        return response
    result: web.StreamResponse = await handler(request)
    return result


async def _bound(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for each address of ``host`` (an IP literal: that one)."""
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise OSError(f"cannot resolve {host}: {e.strerror}") from None
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, address in dict.fromkeys(
            (f, k, p, a) for f, k, p, _name, a in found
        ):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(128)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


async def start_metrics_site(app: web.Application, daemon: Daemon) -> web.AppRunner | None:
    """``[api] metrics_address``: a TCP listener serving only ``GET /metrics`` (the socket's
    registry), read-only; None when unset. OSError when the address cannot be bound."""
    address = daemon.config.metrics.address
    if address is None:
        return None
    scraped = web.Application(middlewares=[guarded, _only_metrics], client_max_size=1024)
    scraped[METRICS] = app[METRICS]
    scraped.router.add_route("*", "/{path:.*}", metrics)  # the middleware lets only a scrape by
    runner = web.AppRunner(scraped, access_log=None, keepalive_timeout=5)
    await runner.setup()
    door = _Door(MAX_CONNECTIONS)
    try:
        for sock in await _bound(*address):
            await _Site(runner, sock, lambda: daemon.config.api, door).start()
    except OSError:
        await runner.cleanup()
        raise
    return runner
