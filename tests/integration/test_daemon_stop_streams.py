"""SIGTERM ends every open stream at once: followers of a silent run do not hold the
daemon's exit (aiohttp would wait for them up to its shutdown timeout)."""

from __future__ import annotations

import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from tests.support.harness import wait_for
from tests.support.served import Served

Start = Callable[..., Served]
STOPPED = "the daemon stopped: following ends"


def _follower(d: Served, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "astraeus_tui.cli.main", *args],
        env=d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _first_line(follower: subprocess.Popen[str], timeout: float = 30) -> str:
    """The follower's first line: it is connected (up to ``timeout`` s)."""
    assert follower.stdout is not None
    ready, _, _ = select.select([follower.stdout], [], [], timeout)
    assert ready, f"no line from {follower.args} in {timeout} s"
    return follower.stdout.readline()


def _sse(d: Served) -> socket.socket:
    """``GET /v1/stream`` open, its snapshot read."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(str(d.socket))
    sock.sendall(b"GET /v1/stream HTTP/1.1\r\nHost: astraeus\r\n\r\n")
    seen = b""
    while b"event: snapshot" not in seen:
        seen += sock.recv(1 << 16)
    return sock


def _read_to_end(sock: socket.socket) -> bytes:
    rest = b""
    while chunk := sock.recv(1 << 16):
        rest += chunk
    return rest


def test_sigterm_ends_followers_of_a_silent_run(served: Start) -> None:
    d = served(gpus=1)
    out = d.astra("run", "--name", "quiet", "--", sys.executable, "-c",
                  "import time; print('up', flush=True); time.sleep(600)")  # fmt: skip
    assert out.returncode == 0, out.stderr
    wait_for(lambda: d.json("show", "quiet")["state"] == "Running", 20, "quiet running")
    logs = _follower(d, "logs", "-f", "quiet")
    events = _follower(d, "events", "-f", "quiet")
    stream = _sse(d)
    assert _first_line(logs) == "up\n"  # the followers are connected and polling
    assert _first_line(events).strip()  # the run's events so far
    assert logs.poll() is None and events.poll() is None
    assert d.proc is not None
    began = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    status = d.proc.wait(30)
    took = time.monotonic() - began
    assert status == 0, (d.home / "serve.log").read_text()
    assert took < 10, f"the daemon took {took:.1f} s to exit"
    stream.settimeout(10)
    _read_to_end(stream)  # the stream ended (a timeout here: it is still open)
    stream.close()
    for follower, again in ((logs, "astra logs -f quiet"), (events, "astra events -f")):
        _, err = follower.communicate(timeout=10)
        assert follower.returncode == 1, err
        assert err.strip() == f"{STOPPED} (runs go on; {again} once it is back)"
    # the run goes on, adopted by the next daemon
    d.restart()
    assert d.json("show", "quiet")["state"] == "Running"


def test_follow_of_a_finished_run_still_ends_quietly(served: Start) -> None:
    d = served(gpus=1)
    d.astra("run", "--name", "said", "--", sys.executable, "-c", "print('said it')")
    assert d.astra("wait", "said").returncode == 0
    followed = d.astra("logs", "-f", "said")
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout == "said it\n" and followed.stderr == ""
