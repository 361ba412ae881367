"""An interactive worker's terminal (``astra run -it``): the supervisor's end and the daemon's.

The supervisor gives the command a pseudo-terminal and keeps its master end. What the
command writes goes to the worker's log, as any worker's output does, to a backlog of
the last :data:`BACKLOG` bytes, and to the one client attached, if any. The daemon
attaches through ``tty.sock`` in the worker's folder (the folder is root's only, mode
0700, so no member reaches the socket): a new attach first gets the backlog (the
prompt the command printed before anyone was there), then the live output, and sends
frames: ``d`` + length + bytes for the terminal's input, ``r`` + rows + cols for a
resize. A second attach replaces the first. Detaching never stops the command.

Only the standard library: the supervisor imports this module on its start path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from runner.executors.logcap import CappedLog
from runner.sessions import BACKLOG

SOCKET = "tty.sock"
CHUNK = 1 << 16
_HEADER = struct.Struct(">cI")
_SIZE = struct.Struct(">HH")


class TerminalRelay:
    """The supervisor's side: the master end, the log, the backlog and the attached client."""

    def __init__(self, master: int, log: CappedLog | None, folder: Path) -> None:
        self.master, self.log = master, log
        self._backlog = bytearray()
        self._client: socket.socket | None = None
        self._lock = threading.Lock()
        self._listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with _short_path(folder) as path:
            self._listening.bind(path)
        self._listening.listen(2)

    def start(self) -> threading.Thread:
        threading.Thread(target=self._accept, name="tty-accept", daemon=True).start()
        thread = threading.Thread(target=self._output, name="tty-output", daemon=True)
        thread.start()
        return thread

    def _output(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self.master, CHUNK)
                except OSError:  # EIO: the command and all that held the terminal are gone
                    chunk = b""
                if not chunk:
                    return
                if self.log is not None:
                    self.log.write(chunk)
                with self._lock:
                    self._backlog += chunk
                    del self._backlog[:-BACKLOG]
                    client = self._client
                if client is not None:
                    try:
                        client.sendall(chunk)
                    except OSError:
                        self._drop(client)
        finally:
            with self._lock:
                client, self._client = self._client, None
            if client is not None:
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RDWR)
                client.close()
            self._listening.close()
            if self.log is not None:
                self.log.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listening.accept()
            except OSError:
                return
            with self._lock:
                old, self._client = self._client, client
                backlog = bytes(self._backlog)
            if old is not None:
                old.close()
            with contextlib.suppress(OSError):
                client.sendall(backlog)
            threading.Thread(target=self._input, args=(client,), daemon=True).start()

    def _input(self, client: socket.socket) -> None:
        try:
            read_frames(client, self._typed, self._resized)
        finally:
            self._drop(client)

    def _typed(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.master, view) :]

    def _resized(self, rows: int, cols: int) -> None:
        size = struct.pack("HHHH", max(rows, 1), max(cols, 1), 0, 0)
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, size)

    def _drop(self, client: socket.socket) -> None:
        with self._lock:
            if self._client is client:
                self._client = None
        client.close()


@contextlib.contextmanager
def _short_path(folder: Path) -> Iterator[str]:
    """The socket's path through the folder's descriptor: a socket's path may hold at most
    108 bytes, and a worker's folder can be deeper than that."""
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        yield f"/proc/self/fd/{fd}/{SOCKET}"
    finally:
        os.close(fd)


def read_frames(
    sock: socket.socket, typed: Callable[[bytes], None], resized: Callable[[int, int], None]
) -> None:
    """Read ``d``/``r`` frames until the socket ends; a malformed frame ends it too."""
    stream = sock.makefile("rb")
    while True:
        header = stream.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        kind, length = _HEADER.unpack(header)
        if length > CHUNK:
            return
        body = stream.read(length)
        if len(body) < length:
            return
        with contextlib.suppress(OSError):
            if kind == b"d":
                typed(body)
            elif kind == b"r" and length == _SIZE.size:
                resized(*_SIZE.unpack(body))


class TerminalSession:
    """The daemon's side: attached to a worker's terminal (a Session; see sessions.py)."""

    def __init__(self, folder: Path, exited: Callable[[], int | None]) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with _short_path(folder) as path:
            self._sock.connect(path)
        self._exited = exited

    def read(self) -> tuple[int, bytes]:
        try:
            return 1, self._sock.recv(CHUNK)
        except OSError:
            return 1, b""

    def write(self, data: bytes) -> None:
        for start in range(0, len(data), CHUNK):
            part = data[start : start + CHUNK]
            self._send(_HEADER.pack(b"d", len(part)) + part)

    def close_stdin(self) -> None:
        pass  # a terminal's end of input is ^D, which the person types

    def resize(self, rows: int, cols: int) -> None:
        self._send(_HEADER.pack(b"r", _SIZE.size) + _SIZE.pack(max(rows, 1), max(cols, 1)))

    def wait(self) -> int:
        """The command's exit code, once the worker has exited."""
        while (code := self._exited()) is None:
            time.sleep(0.1)
        return code

    def kill(self) -> None:
        """Detach: the command goes on."""
        with contextlib.suppress(OSError):
            self._sock.close()

    def _send(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            self._sock.sendall(data)
