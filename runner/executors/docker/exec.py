"""``astra exec`` on Docker: ``docker exec`` in the worker's container, as the worker's user.

The container was created as the member's uid:gid with no-new-privileges; the exec is
made with the same user and inherits the container's environment, so it sees what
the worker sees. Without a terminal Docker multiplexes stdout and stderr on one
socket in frames (an 8-byte header: the stream, then the length); with one the
socket carries the terminal's bytes alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import time
from typing import Any

from runner.executors.docker.errors import docker_errors
from runner.sessions import STDERR, STDOUT, EnterRequest

READ = 65536
STARTING_WAIT = 5.0  # s a kill waits for a started exec's process to be made


class DockerSession:
    """One ``docker exec``: its id and its attached socket."""

    def __init__(self, api: Any, exec_id: str, sock: socket.socket, tty: bool) -> None:
        self._api, self._id, self._sock, self._tty = api, exec_id, sock, tty
        self._buffer = b""

    def read(self) -> tuple[int, bytes]:
        if self._tty:
            return STDOUT, self._recv()
        while True:  # frames: stream (1 byte), 3 bytes of padding, length (4 bytes)
            header = self._exactly(8)
            if header is None:
                return STDOUT, b""
            stream, length = header[0], struct.unpack(">I", header[4:])[0]
            data = self._exactly(length)
            if data is None:
                return STDOUT, b""
            if data:
                return (STDERR if stream == 2 else STDOUT), data

    def _recv(self) -> bytes:
        try:
            return self._sock.recv(READ)
        except OSError:
            return b""

    def _exactly(self, count: int) -> bytes | None:
        while len(self._buffer) < count:
            data = self._recv()
            if not data:
                return None
            self._buffer += data
        head, self._buffer = self._buffer[:count], self._buffer[count:]
        return head

    def write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            self._sock.sendall(data)

    def close_stdin(self) -> None:
        if not self._tty:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_WR)

    def resize(self, rows: int, cols: int) -> None:
        if self._tty:
            with contextlib.suppress(Exception):
                self._api.exec_resize(self._id, height=max(rows, 1), width=max(cols, 1))

    def wait(self) -> int:
        while True:  # the output has ended; Docker notes the exit a moment later
            with docker_errors("cannot read the exec's exit code"):
                info = self._api.exec_inspect(self._id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                with contextlib.suppress(OSError):
                    self._sock.close()
                return code if isinstance(code, int) else 1
            time.sleep(0.05)

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self._kill_running()
        with contextlib.suppress(OSError):
            self._sock.close()

    def _kill_running(self) -> None:
        """Docker keeps an ended exec's pid, which may since be any process's: the pid is
        held by a pidfd, then signalled only if Docker still says the exec runs as it. An
        exec whose process Docker has not made yet (running, pid 0) is waited for: a
        session ended that early still ends its command."""
        pid = self._running_pid(STARTING_WAIT)
        if pid is None:
            return
        pidfd = os.pidfd_open(pid)
        try:
            if self._running_pid() == pid:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            os.close(pidfd)

    def _running_pid(self, starting: float = 0.0) -> int | None:
        """The exec's pid while it runs; None once it ended. Up to ``starting`` s are spent
        waiting for a process Docker has not made yet (no exit code, no pid)."""
        deadline = time.monotonic() + starting
        while True:
            info = self._api.exec_inspect(self._id)
            pid = info.get("Pid")
            if info.get("Running") and isinstance(pid, int) and pid > 0:
                return pid
            if info.get("ExitCode") is not None or time.monotonic() >= deadline:
                return None
            time.sleep(0.02)


def docker_enter(api: Any, container: str, user: str, request: EnterRequest) -> DockerSession:
    """Start ``request.argv`` in ``container`` as ``user``; its session."""
    with docker_errors(f"cannot exec in container {container}"):
        made = api.exec_create(
            container, list(request.argv), stdin=True, tty=request.tty, user=user
        )
        exec_id = made["Id"]
        attached = api.exec_start(exec_id, socket=True, tty=request.tty)
    sock = getattr(attached, "_sock", attached)
    session = DockerSession(api, exec_id, sock, request.tty)
    session.resize(request.rows, request.cols)
    return session
