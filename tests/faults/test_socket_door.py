"""The daemon's socket under pressure: out of file descriptors, and a second daemon.

Before these fixes a daemon out of file descriptors logged the failed accept over
and over (tens of MB in a minute) and, since no connection ever timed out, never
served anyone again; and a second daemon (another ASTRAEUS_HOME, the same
ASTRAEUS_SOCKET) unlinked the first one's live socket and took its place.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.faults.conftest import MakeDaemon
from tests.faults.daemon import PY, DaemonProcess, write_config
from tests.support.harness import wait_for

FILES = 48  # the daemon's RLIMIT_NOFILE: some 15 in use at rest, the rest for connections


class Limited(DaemonProcess):
    """A daemon started with RLIMIT_NOFILE ``files`` (soft and hard)."""

    files = FILES

    def spawn(self, **env: str) -> subprocess.Popen[bytes]:
        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.files, self.files))

        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [PY, "-m", "astraeus_tui.cli.main", "serve"],
                env={**self.env, **env}, stdout=out, stderr=out, preexec_fn=limit,
            )  # fmt: skip
        return self.proc


@contextlib.contextmanager
def flood(path: Path, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections that never send anything (as many as the backlog takes)."""
    conns: list[socket.socket] = []
    try:
        for _ in range(count):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.setblocking(False)
            try:
                conn.connect(str(path))
            except BlockingIOError:  # the backlog is full
                conn.close()
                break
            conns.append(conn)
        yield conns
    finally:
        for conn in conns:
            conn.close()


def test_out_of_descriptors_it_logs_once_and_serves_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    with (home / "config.toml").open("a") as config:
        config.write("[api]\nidle_timeout_seconds = 2\nmax_connections_per_user = 10000\n")
    daemon = Limited(home, tmp_path / "serve.log").start()
    try:
        # the socket answers before the loop's first round (which reads the workers' and
        # logs' folders) ends: flooded before, that round fails for want of descriptors too
        wait_for(lambda: daemon.status()["ticks"] > 0, 30, "the loop's first round")
        with flood(daemon.socket, 2 * FILES) as held:
            assert len(held) > FILES
            wait_for(lambda: "Too many open files" in daemon.log.read_text(), 30, "EMFILE")
            wait_for(daemon.socket_answers, 90, "the daemon to serve again")
        text = daemon.log.read_text()
        assert text.count("Too many open files") == 1, daemon.tail()
        assert len(text) < 10_000
    finally:
        daemon.stop()


def test_a_second_daemon_leaves_a_live_socket_alone(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    first = make_daemon(home=tmp_path / "a").start()
    second = make_daemon(home=tmp_path / "b")
    second.socket, second.log = first.socket, tmp_path / "second.log"
    second.env["ASTRAEUS_SOCKET"] = str(first.socket)
    inode = os.stat(first.socket).st_ino
    assert second.spawn().wait(60) == 1
    assert second.tail(1) == f"error: another daemon answers on {first.socket}"
    assert os.stat(first.socket).st_ino == inode and first.socket_answers()
    first.kill9()  # its socket file stays behind, answered by no one: that one may go
    assert first.socket.exists()
    second.start()
    assert second.status()["caller"]["user"] == "root"
