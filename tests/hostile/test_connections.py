"""Connections that hold the daemon's door open, on the real socket.

Before these fixes no connection ever timed out: an idle one, or one sending a
header line now and then, stayed open for an hour, and one user could open as
many as the daemon had file descriptors, locking everyone else out.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import select
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from astraeus_tui.client import Client
from tests.hostile.helpers import error_of, request_bytes
from tests.support.harness import spec
from tests.support.served import Served
from tests.support.tenants import as_user, users_fixture
from tests.support.users import fork_as

QUICK = """
[api]
idle_timeout_seconds = 1
request_timeout_seconds = 2
"""
LATE = "408 REQUEST_TIMEOUT: the request did not arrive within 2 s (api.request_timeout_seconds)"
WAIT = 30  # seconds a test waits for the daemon to close a connection before failing


def connect(lab: Served) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(WAIT)
    conn.connect(str(lab.socket))
    return conn


def until_closed(conn: socket.socket) -> bytes:
    """What the daemon sends until it closes the connection (TimeoutError if it never does)."""
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    conn.close()
    return b"".join(chunks)


def trickle(conn: socket.socket, piece: bytes, every: float = 0.2) -> bytes:
    """Send ``piece`` every ``every`` seconds until the daemon answers or closes."""
    for _ in range(int(WAIT / every)):
        if select.select([conn], [], [], every)[0]:
            break
        try:
            conn.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            break
    else:
        raise AssertionError(f"the daemon still read a trickling request after {WAIT} s")
    return until_closed(conn)


@pytest.fixture
def quick(served: Callable[..., Served]) -> Served:
    return served(QUICK, gpus=2)


def test_an_idle_connection_is_closed(quick: Served) -> None:
    assert until_closed(connect(quick)) == b""


def test_a_kept_alive_connection_is_closed_once_idle(quick: Served) -> None:
    conn = connect(quick)
    conn.sendall(b"GET /v1/status HTTP/1.1\r\nHost: astraeus\r\n\r\n")
    answer = until_closed(conn)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.count(b"HTTP/1.1") == 1


def test_a_slow_request_head_is_408_and_closed(quick: Served) -> None:
    conn = connect(quick)
    conn.sendall(b"GET /v1/status HTTP/1.1\r\nHost: astraeus\r\n")
    assert error_of(trickle(conn, b"X-Slow: 1\r\n")) == LATE


def test_a_slow_request_body_is_408_and_closed(quick: Served) -> None:
    conn = connect(quick)
    head = request_bytes("POST", "/v1/runs", b"{" * 1000).split(b"\r\n\r\n")[0]
    conn.sendall(head + b"\r\n\r\n{")
    answer = trickle(conn, b" ")
    assert error_of(answer) == LATE and answer.count(b"HTTP/1.1") == 1
    assert quick.json("ls", "--all") == []


def test_a_stream_is_not_idle(quick: Served) -> None:
    client = Client(quick.socket, timeout=WAIT)
    client.submit(spec("before", ["true"], gpus=5))  # 5 GPUs of 2: it never starts
    events = client.events(follow=True)
    assert next(events).run == "before"
    assert until_closed(connect(quick)) == b""  # an idle connection's time has passed
    client.submit(spec("after", ["true"], gpus=5))
    assert any(e.run == "after" for e in events)


# ------------------------------------------------- one user's connections

GROUP, HOSTILE, OTHER = "astra-h4", "astra-h4-a", "astra-h4-b"
CAPPED = f"""
[api]
socket_group = "{GROUP}"
max_connections_per_user = 4
idle_timeout_seconds = 120

[workspaces.vision]
members = ["{OTHER}"]
"""
TOO_MANY = (
    "429 TOO_MANY_CONNECTIONS: you already have 4 connections open to the daemon "
    "(api.max_connections_per_user): close some and try again"
)


users = users_fixture(GROUP, HOSTILE, OTHER)


@contextlib.contextmanager
def holding(entry: pwd.struct_passwd, lab: Served, count: int) -> Iterator[list[Any]]:
    """A child that is really ``entry`` opens ``count`` connections and keeps them open.

    Yields what each connection was answered to a status request sent on it, or None for
    the connections left silent: the first ones, as many as the daemon admitted.
    """
    report_r, report_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = fork_as(entry)
    if pid == 0:  # the child: the user, opens the connections, reports, holds on
        os.close(report_r)
        os.close(hold_w)
        conns = [connect(lab) for _ in range(count)]
        answers: list[Any] = []
        for conn in conns:
            if not select.select([conn], [], [], 0.5)[0]:  # admitted: says nothing
                answers.append(None)
                continue
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                conn.sendall(request_bytes("GET", "/v1/status", content_type=None))
            answers.append(error_of(until_closed(conn)))
        os.write(report_w, json.dumps(answers).encode())
        os.close(report_w)
        os.read(hold_r, 1)  # until the parent is done
        os._exit(0)
    os.close(report_w)
    os.close(hold_r)
    try:
        with os.fdopen(report_r) as report:
            yield json.loads(report.read() or "null")
    finally:
        os.close(hold_w)
        os.waitpid(pid, 0)


def test_one_users_connections_past_the_cap_do_not_stop_the_others(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    lab = served(CAPPED, gpus=2)
    with holding(users[HOSTILE], lab, 10) as answers:
        assert answers == [None] * 4 + [TOO_MANY] * 6
        assert "ok" in as_user(users[OTHER], lab.socket, lambda c: c.status())
        assert Client(lab.socket).status()["caller"]["user"] == "root"
    assert as_user(users[HOSTILE], lab.socket, lambda c: c.status())["ok"]["caller"]["user"] == (
        HOSTILE
    )
