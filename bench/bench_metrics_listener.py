"""A scrape over TCP while others hold the metrics address's door.

Run by hand: ``.venv/bin/python bench/bench_metrics_listener.py [N]`` (default 200 scrapes
each). Starts a daemon in a temporary ASTRAEUS_HOME with ``[api] metrics_address`` on
127.0.0.1 (4 simulated GPUs, idle connections kept for minutes), then times N scrapes (a
fresh connection each, as Prometheus makes one per scrape interval): alone; with three times
the connection cap held idle; and while 4 threads open connections as fast as they can
(each keeping its last 32 open, never sending a request). Targets: a scrape's median
< 10 ms alone and with the idle connections, < 100 ms under the flood; none fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

from runner.api.metrics_site import MAX_CONNECTIONS

SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: astraeus\r\nConnection: close\r\n\r\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def scrape(port: int) -> float:
    """Seconds one scrape takes, connection included; raises if it is not a 200."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(SCRAPE)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    if not data.startswith(b"HTTP/1.1 200 OK"):
        raise AssertionError(data[:120])
    return time.perf_counter() - started


def timed(port: int, n: int) -> str:
    """Median and worst milliseconds of ``n`` scrapes, and how many failed."""
    times, failed = [], 0
    for _ in range(n):
        try:
            times.append(scrape(port))
        except (OSError, AssertionError):
            failed += 1
    median, worst = statistics.median(times) * 1000, max(times) * 1000
    return f"median {median:.2f} ms, worst {worst:.1f} ms, {failed} failed"


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="astra-bench-") as folder:
        home = Path(folder)
        (home / "config.toml").write_text(
            f'[machine]\nexecutor = "process"\ngpus = 4\n\n[api]\n'
            f'metrics_address = "127.0.0.1:{port}"\nidle_timeout_seconds = 300\n'
        )
        env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_LOG": "WARNING"}
        proc = subprocess.Popen([sys.executable, "-m", "astraeus_tui.cli.main", "serve"], env=env)
        try:
            for _ in range(200):
                with contextlib.suppress(OSError, AssertionError):
                    scrape(port)
                    break
                time.sleep(0.1)
            print(f"{n} scrapes each, a fresh connection per scrape; cap {MAX_CONNECTIONS}")
            print(f"alone: {timed(port, n)}")
            idle = [
                socket.create_connection(("127.0.0.1", port)) for _ in range(3 * MAX_CONNECTIONS)
            ]
            print(f"{len(idle)} connections held idle: {timed(port, n)}")
            for conn in idle:
                conn.close()
            stop = threading.Event()
            opened = [0]

            def flood() -> None:  # each thread keeps its last MAX_CONNECTIONS open
                held: deque[socket.socket] = deque()
                while not stop.is_set():
                    with contextlib.suppress(OSError):
                        held.append(socket.create_connection(("127.0.0.1", port), timeout=1))
                        opened[0] += 1
                    if len(held) > MAX_CONNECTIONS:
                        held.popleft().close()
                for conn in held:
                    conn.close()

            threads = [threading.Thread(target=flood) for _ in range(4)]
            for t in threads:
                t.start()
            started = time.perf_counter()
            result = timed(port, n)
            rate = opened[0] / (time.perf_counter() - started)
            stop.set()
            for t in threads:
                t.join()
            print(f"under a flood ({rate:.0f} connections/s): {result}")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
