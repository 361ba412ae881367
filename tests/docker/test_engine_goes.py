"""The engine going away at the moment a container's end is looked into.

A container that exits as the engine shuts down (the engine's shutdown stops it) is seen
exited through a connection that still answers; whether something other than Astraeus
stopped it is then asked of the engine's events, and the engine may be gone by then. The
executor's inspect, kill and ping go through a socket of the test's own that passes each
request to the real engine, or cuts it, as the engine's end does.
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from runner.executors.base import ExecutorError, Observed
from runner.executors.docker.executor import STOPPED_OUTSIDE, DockerExecutor
from tests.docker.helpers import LaunchFactory, wait_until

ENGINE = "/var/run/docker.sock"


class Gate:
    """A Unix socket in front of the engine's: each request goes through, one connection
    (``Connection: close``) each, unless its path has a word in ``cut``; ``away`` cuts all."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cut: tuple[bytes, ...] = ()
        self.away = False
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            line = head.split(b"\r\n", 1)[0]
            if self.away or any(word in line for word in self.cut):
                return  # the connection is cut before an answer: the engine went
            top, rest = head.split(b"\r\n", 1)
            head = top + b"\r\nConnection: close\r\n" + rest
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as engine:
                engine.connect(ENGINE)
                engine.sendall(head)
                while chunk := engine.recv(65536):
                    conn.sendall(chunk)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    g = Gate(tmp_path / "gate.sock")
    yield g
    g.close()


@pytest.fixture
def gated(docker_client: Any, gate: Gate) -> Iterator[DockerExecutor]:
    quick = docker.APIClient(
        base_url=f"unix://{gate.path}", version=docker_client.api.api_version, timeout=10
    )
    ex = DockerExecutor(docker_client, nvidia=False, quick=quick)
    yield ex
    ex.stop_following()
    quick.close()


def exited(docker_client: Any, handle: str) -> bool:
    state = docker_client.api.inspect_container(handle)["State"]
    return state["Status"] == "exited"


def test_an_end_whose_events_the_engine_cannot_tell_waits_and_counts_as_lost(
    gated: DockerExecutor, gate: Gate, docker_client: Any, make_launch: LaunchFactory
) -> None:
    handle = gated.start(make_launch("echo done"))
    assert wait_until(lambda: exited(docker_client, handle))
    gate.cut = (b"/events",)  # it answers the inspect, then goes as its events are asked
    with pytest.raises(ExecutorError, match="cannot read the events"):
        gated.status(handle)
    gate.away = True
    assert not gated.reachable()
    gate.cut, gate.away = (), False  # it answers again: a new engine, the events are gone
    assert wait_until(gated.reachable, 10)
    status = gated.status(handle)
    assert status.state is Observed.MISSING
    assert status.error is not None and status.error.startswith(STOPPED_OUTSIDE)


def test_an_end_not_yet_asked_of_an_engine_that_then_restarts_counts_as_lost(
    gated: DockerExecutor, gate: Gate, docker_client: Any, make_launch: LaunchFactory
) -> None:
    handle = gated.start(make_launch("echo done"))
    other = gated.start(make_launch("sleep 60", worker=1))
    assert wait_until(lambda: exited(docker_client, handle))
    assert gated.status(other).state is Observed.RUNNING  # answered after that end
    gate.away = True  # the engine goes before this daemon looked at the end
    with pytest.raises(ExecutorError):
        gated.status(handle)
    gate.away = False
    assert wait_until(gated.reachable, 10)
    status = gated.status(handle)
    assert status.state is Observed.MISSING, status
    gated.signal(other, signal.SIGKILL)


def test_an_end_told_before_the_engine_went_stays_the_programs_own(
    gated: DockerExecutor, gate: Gate, docker_client: Any, make_launch: LaunchFactory
) -> None:
    handle = gated.start(make_launch("echo done"))
    assert wait_until(lambda: exited(docker_client, handle))
    assert gated.status(handle).state is Observed.EXITED  # its events say: its own end
    gate.away = True
    with pytest.raises(ExecutorError):
        gated.status(handle)
    gate.away = False
    assert wait_until(gated.reachable, 10)
    status = gated.status(handle)
    assert (status.state, status.exit_code) == (Observed.EXITED, 0)


def test_an_end_told_by_an_engine_that_answers_throughout_is_the_programs_own(
    gated: DockerExecutor, docker_client: Any, make_launch: LaunchFactory
) -> None:
    handle = gated.start(make_launch("exit 3"))
    assert wait_until(lambda: exited(docker_client, handle))
    status = gated.status(handle)
    assert (status.state, status.exit_code) == (Observed.EXITED, 3)
