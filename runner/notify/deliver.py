"""The Apprise adapter: one notification to one URL, and why it was not delivered.

Apprise's Python API, without its command line's plugin folders or config files: only
the URL's own service is loaded. Whatever the URL asks (``cto``, ``rto``, ``retry``),
a send gives up after :data:`CONNECT_TIMEOUT` s to connect and :data:`READ_TIMEOUT` s
to read, and is not retried by Apprise: the sender retries, with its back-off.

A read timeout bounds each read, not the answer: a receiver that trickles one byte a
second would hold a send for ever. So each send has an overall deadline
(:data:`SEND_DEADLINE`, connect + send + answer) that the sender keeps
(runner/notify/sender.py): past it, :func:`cut` shuts down the connections the send's
thread opened (each HTTP service's, through urllib3; mail's, through the standard
library), and its read ends at once.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import socket
import threading
from collections.abc import Callable
from typing import Any

from runner.notify.outbox import Notice
from runner.notify.targets import label

log = logging.getLogger(__name__)
_STATUS = re.compile(r"\berror=(\d{3})\b")  # Apprise: "Failed to send …: Bad Request error=400."

MAX_ERROR = 300  # characters of Apprise's complaint kept in an event
CONNECT_TIMEOUT = 15.0  # Apprise's own default for mail; 4 s for the HTTP services
READ_TIMEOUT = 15.0
SEND_DEADLINE = 10.0  # seconds a send may take in all, connect + send + answer

_open: dict[int, list[socket.socket]] = {}  # a send's thread -> its connections (dups)
_open_lock = threading.Lock()
_watching = False


def deliver(url: str, notice: Notice) -> str | None:
    """Send ``notice`` to ``url``: None when delivered, else one line saying why not."""
    import apprise  # lazy: the sender's thread loads it, the CLI never does

    service = apprise.Apprise.instantiate(url)
    if service is None:
        return "Apprise cannot use this URL"
    _watch_connections()
    with _complaints() as said, _connections():  # the service's notify sends in this thread
        delivered = bounded(service).notify(
            title=notice.title(), body=notice.body(url), notify_type=notice.kind
        )
    if delivered:
        return None
    lines = [" ".join(line.split()) for line in said.getvalue().splitlines() if line.strip()]
    if lines:  # the whole complaint for the daemon's log (admins); the event says less
        log.info("notification to %s not delivered: %s", label(url), lines[-1][:MAX_ERROR])
    return why_not(lines)


def why_not(complaints: list[str]) -> str:
    """What a run's event says of a send that failed: the HTTP status, or a fixed phrase.
    Never Apprise's own words, which may say what the daemon found at a path the URL
    named (whether it exists, is readable, is JSON)."""
    for line in reversed(complaints):
        if found := _STATUS.search(line):
            return f"HTTP {found.group(1)}"
    said = " ".join(complaints).lower()
    if "timed out" in said or "timeout" in said:
        return "timed out"
    if "connect" in said:
        return "could not connect"
    return "the service did not accept it"


def bounded(service: Any) -> Any:
    """An Apprise service held to this module's timeouts, without retries of its own."""
    service.socket_connect_timeout = min(service.socket_connect_timeout, CONNECT_TIMEOUT)
    service.socket_read_timeout = min(service.socket_read_timeout, READ_TIMEOUT)
    if hasattr(service, "retry"):
        service.retry = 0
    return service


def cut(thread: int) -> None:
    """End the send running in ``thread`` now: its connections are shut down, so what
    it waits for (an answer trickling in) fails at once. Any thread may call it."""
    with _open_lock:
        connections = list(_open.get(thread, ()))
    for sock in connections:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def _connections() -> Any:
    """Keep the connections this thread's send opens, for :func:`cut`; close them after."""
    me = threading.get_ident()
    with _open_lock:
        _open[me] = []
    try:
        yield
    finally:
        with _open_lock:
            kept = _open.pop(me, [])
        for sock in kept:
            sock.close()  # the duplicate only: the service closed its own


def _watch_connections() -> None:
    """Have every connection a send opens told to :func:`_connections`: urllib3's
    (requests, so every HTTP service of Apprise) and the standard library's
    ``socket.create_connection`` (smtplib: mail). A duplicate of each is kept, so that a
    shutdown reaches the connection also once TLS wraps (and detaches) the socket. Other
    threads' connections pass through untouched."""
    global _watching
    from urllib3.util import connection

    with _open_lock:
        if _watching:
            return
        _watching = True
        connection.create_connection = _kept(connection.create_connection)
        socket.create_connection = _kept(socket.create_connection)


def _kept(opened: Callable[..., socket.socket]) -> Callable[..., socket.socket]:
    """``opened`` (a function that returns a connected socket), its sockets kept for the
    send of the thread that opened them."""

    def create_connection(*args: Any, **kwargs: Any) -> socket.socket:
        sock = opened(*args, **kwargs)
        with _open_lock:
            kept = _open.get(threading.get_ident())
            if kept is not None:
                kept.append(sock.dup())
        return sock

    return create_connection


class _complaints:
    """Apprise's warnings of this thread's send only (several sends run at once)."""

    def __enter__(self) -> io.StringIO:
        self.text = io.StringIO()
        self.handler = logging.StreamHandler(self.text)
        self.handler.setLevel(logging.WARNING)
        self.handler.setFormatter(logging.Formatter("%(message)s"))
        me = threading.get_ident()
        self.handler.addFilter(lambda record: record.thread == me)
        self.logger = logging.getLogger("apprise")
        if self.logger.getEffectiveLevel() > logging.WARNING:
            self.logger.setLevel(logging.WARNING)
        self.logger.addHandler(self.handler)
        return self.text

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
