"""`astra dash` and `astra up` ask the socket whether a daemon is there
(astraeus_tui/cli/daemon.py ``_answers``): one that took the request and is still busy
with it (a queue of 100,000 runs) is there; a socket no one listens on is not."""

from __future__ import annotations

import socket
from pathlib import Path

from astraeus_tui.cli.daemon import _answers
from astraeus_tui.client import Client


def test_a_busy_daemon_is_there_and_a_dead_socket_is_not(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)  # takes the connection, never answers
    try:
        assert _answers(Client(path, timeout=0.2))
    finally:
        server.close()
    assert not _answers(Client(path, timeout=0.2))  # the file is left, no one listens
    assert not _answers(Client(tmp_path / "none.sock", timeout=0.2))
