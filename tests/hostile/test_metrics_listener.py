"""The metrics address as a hostile client sees it: a real `astra serve` with `[api]
metrics_address` set, reached over TCP with raw bytes.

Anyone who reaches the address may connect, so nothing they send may hold the door: idle
connections are pushed out by new ones, a request that trickles in is cut, a big one refused,
and nothing but GET /metrics is answered there.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runner.api.metrics_site import MAX_CONNECTIONS, MAX_REQUEST_BYTES
from tests.support.served import Served, free_port

Start = Callable[..., Served]
WAIT = 30  # seconds a test waits for the daemon to close a connection before failing
LATE = "408 REQUEST_TIMEOUT: the request did not arrive within 2 s (api.request_timeout_seconds)"
TOO_LARGE = (
    f"413 REQUEST_ENTITY_TOO_LARGE: a request to the metrics address is at most "
    f"{MAX_REQUEST_BYTES} bytes and has no body: GET /metrics"
)
ONLY = "only GET /metrics is served on the metrics address"
SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: astraeus\r\nConnection: close\r\n\r\n"


def listening(config: str = "", host: str = "127.0.0.1") -> tuple[str, int]:
    port = free_port()
    return f'[api]\nmetrics_address = "{host}:{port}"\n{config}', port


def connect(port: int, host: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection((host, port), timeout=WAIT)


def until_closed(conn: socket.socket) -> bytes:
    """What the daemon sends until it closes the connection (TimeoutError if it never does)."""
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    conn.close()
    return b"".join(chunks)


def error_of(answer: bytes) -> str:
    """``STATUS CODE: message`` of a JSON error answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    error = json.loads(body)["error"]
    assert error["status"] == status
    return f"{status} {error['code']}: {error['message']}"


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT) as answer:
        text: str = answer.read().decode()
    assert any(f.name == "astraeus_gpus" for f in text_string_to_metric_families(text))
    return text


def closed(conn: socket.socket) -> bool:
    """Whether the daemon has closed ``conn`` (it sends nothing on an idle one)."""
    if not select.select([conn], [], [], 0)[0]:
        return False
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True


@contextlib.contextmanager
def opened(port: int, count: int) -> Iterator[list[socket.socket]]:
    conns = [connect(port) for _ in range(count)]
    try:
        yield conns
    finally:
        for conn in conns:
            conn.close()


def test_idle_connections_never_lock_out_a_scrape(served: Start) -> None:
    config, port = listening("idle_timeout_seconds = 120\n")  # they would stay for minutes
    served(config, gpus=1)
    with opened(port, 3 * MAX_CONNECTIONS) as idle:
        started = time.monotonic()
        scrape(port)  # at once, though every place was taken
        assert time.monotonic() - started < 5
        time.sleep(0.5)  # the pushed-out ones' ends reach us
        still = [c for c in idle if not closed(c)]
        assert len(still) < MAX_CONNECTIONS  # never more than the cap held open
        assert not closed(idle[-1])  # the newest stay; the oldest went first
        assert all(closed(c) for c in idle[: MAX_CONNECTIONS + 1])
        for _ in range(3):  # and again, every time
            scrape(port)


def test_a_trickling_request_is_cut_and_an_idle_connection_closed(served: Start) -> None:
    config, port = listening("request_timeout_seconds = 2\nidle_timeout_seconds = 1\n")
    served(config, gpus=1)
    loris = connect(port)
    loris.sendall(b"GET /metrics HTTP/1.1\r\nHost: astraeus\r\n")
    started = time.monotonic()
    answer = b""
    for _ in range(WAIT * 5):  # a header line every 0.2 s, until cut
        if select.select([loris], [], [], 0.2)[0]:
            answer = until_closed(loris)
            break
        try:
            loris.sendall(b"X-Slow: 1\r\n")
        except (BrokenPipeError, ConnectionResetError):
            break
    else:
        raise AssertionError(f"the daemon still read a trickling request after {WAIT} s")
    assert error_of(answer) == LATE
    assert time.monotonic() - started < 2 + 5
    silent = connect(port)
    assert until_closed(silent) == b""  # closed after a second without a request
    scrape(port)


def test_a_big_request_is_refused_and_closed(served: Start) -> None:
    config, port = listening()
    served(config, gpus=1)
    big = connect(port)
    big.sendall(b"GET /metrics HTTP/1.1\r\nHost: astraeus\r\nX-Big: " + b"x" * 65536)
    assert error_of(until_closed(big)) == TOO_LARGE
    many = connect(port)  # many small header lines, never a line too long
    many.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-A: 1\r\n" * 1000)
    assert error_of(until_closed(many)) == TOO_LARGE
    body = connect(port)  # a body, small as it is, is never read
    body.sendall(b"GET /metrics HTTP/1.1\r\nHost: astraeus\r\nContent-Length: 5\r\n\r\nhello")
    assert error_of(until_closed(body)) == TOO_LARGE
    chunked = connect(port)
    chunked.sendall(
        b"GET /metrics HTTP/1.1\r\nHost: astraeus\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n"
    )
    assert error_of(until_closed(chunked)) == TOO_LARGE
    scrape(port)


def test_nothing_but_get_metrics_is_answered(served: Start) -> None:
    config, port = listening()
    d = served(config, gpus=1)
    for path in ("/", "/v1/runs", "/v1/status", "/v1/machine", "/metrics/", "/v1/events",
                 "/metricsx", "//metrics", "/v1/shutdown"):  # fmt: skip
        for method in ("GET", "POST", "DELETE"):
            conn = connect(port)
            conn.sendall(
                f"{method} {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode()
            )
            answer = until_closed(conn)
            assert answer.startswith(b"HTTP/1.1 404 "), (method, path, answer[:80])
            assert error_of(answer) == f"404 NOT_FOUND: {ONLY}"
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        conn = connect(port)
        conn.sendall(f"{method} /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".encode())
        answer = until_closed(conn)
        assert error_of(answer) == f"405 METHOD_NOT_ALLOWED: {ONLY}"
        assert b"\r\nAllow: GET, HEAD\r\n" in answer
    conn = connect(port)  # a scrape kept alive answers again on the same connection
    conn.sendall(SCRAPE.replace(b"Connection: close", b"Connection: keep-alive") + SCRAPE)
    answer = until_closed(conn)
    assert answer.count(b"HTTP/1.1 200 OK") == 2 and answer.count(b"# TYPE astraeus_gpus ") == 2
    assert d.proc is not None and d.proc.poll() is None  # /v1/shutdown did nothing
    assert d.json("ls", "--all") == []


def _listening_sockets(pid: int) -> list[tuple[str, int]]:
    """The TCP addresses the process listens on, from /proc (its sockets' inodes)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = fd.readlink().name
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = []
    for table, size in (("tcp", 4), ("tcp6", 16)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            hexaddr, hexport = local.split(":")
            raw = bytes.fromhex(hexaddr)
            if size == 4:
                host = socket.inet_ntop(socket.AF_INET, raw[::-1])
            else:  # four 32-bit words, each in the host's order
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                host = socket.inet_ntop(socket.AF_INET6, words)
            found.append((host, int(hexport, 16)))
    return found


def test_the_listener_is_on_the_configured_address_only(served: Start) -> None:
    d = served(gpus=1)  # unset: no TCP listener at all
    assert d.proc is not None and _listening_sockets(d.proc.pid) == []
    assert "metrics on" not in (d.home / "serve.log").read_text()
    d.stop()
    config, port = listening()
    d = served(config, gpus=1)
    assert d.proc is not None and _listening_sockets(d.proc.pid) == [("127.0.0.1", port)]
    assert f"; metrics on http://127.0.0.1:{port}/metrics\n" in (d.home / "serve.log").read_text()
    with pytest.raises(ConnectionRefusedError):  # loopback, but not the address bound
        socket.create_connection(("127.0.0.2", port), timeout=WAIT)
    scrape(port)


def test_an_address_the_admin_widens_is_served_there(served: Start) -> None:
    config, port = listening(host="0.0.0.0")
    d = served(config, gpus=1)
    assert d.proc is not None and _listening_sockets(d.proc.pid) == [("0.0.0.0", port)]
    conn = connect(port, host="127.0.0.2")
    conn.sendall(SCRAPE)
    assert until_closed(conn).startswith(b"HTTP/1.1 200 OK")


@pytest.mark.parametrize("host", ["[::1]"])
def test_an_ipv6_address_is_bound_as_written(served: Start, host: str) -> None:
    if not socket.has_ipv6 or not Path("/proc/net/tcp6").exists():
        pytest.skip("no IPv6 on this machine")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    config, port = listening(host=host)
    d = served(config, gpus=1)
    assert d.proc is not None and _listening_sockets(d.proc.pid) == [("::1", port)]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    conn = connect(port, host="::1")
    conn.sendall(SCRAPE)
    assert until_closed(conn).startswith(b"HTTP/1.1 200 OK")


def test_the_peer_holding_the_most_is_pushed_out_first(served: Start) -> None:
    config, port = listening("idle_timeout_seconds = 120\n", host="0.0.0.0")
    served(config, gpus=1)
    scraper = connect(port)  # the oldest connection, kept alive between scrapes
    scraper.sendall(SCRAPE.replace(b"Connection: close", b"Connection: keep-alive"))
    first = scraper.recv(65536)
    assert first.startswith(b"HTTP/1.1 200 OK")
    flood = []
    try:
        for _ in range(2 * MAX_CONNECTIONS):  # another peer address takes every place
            conn = socket.socket()
            conn.settimeout(WAIT)
            conn.bind(("127.0.0.2", 0))
            conn.connect(("127.0.0.1", port))
            flood.append(conn)
        time.sleep(0.5)
        assert sum(not closed(c) for c in flood) < MAX_CONNECTIONS
        with contextlib.suppress(TimeoutError):  # the rest of the first answer, if any
            scraper.settimeout(0.5)
            while scraper.recv(65536):
                pass
        scraper.settimeout(WAIT)
        scraper.sendall(SCRAPE)  # still there: the flood's own connections went instead
        assert until_closed(scraper).startswith(b"HTTP/1.1 200 OK")
    finally:
        for conn in flood:
            conn.close()
