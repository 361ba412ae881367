"""Submits per second through the socket, each acknowledged durably.

Run by hand: ``.venv/bin/python bench/bench_api.py [N]``. Starts a daemon in a
temporary ASTRAEUS_HOME (process executor, one simulated GPU), submits N runs
that ask for more GPUs than the machine has (so none starts), with 1 and with
8 concurrent clients, and prints submits per second. Target: >= 500/s with 8.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from astraeus_tui.client import ApiError, Client

CONFIG = """
[machine]
executor = "process"
gpus = 1
"""


def document(name: str) -> dict[str, object]:
    task = {"image": "local", "command": "true",
            "requested_resources": {"gpu_requests": {"count": 2}}}  # fmt: skip
    return {"metadata": {"name": name}, "spec": {"task_template": task}}


def start_daemon(home: Path) -> subprocess.Popen[bytes]:
    (home / "config.toml").write_text(CONFIG)
    env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_LOG": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "astraeus_tui.cli.main", "serve"], env=env)
    client = Client(home / "astraeus.sock")
    for _ in range(200):
        try:
            client.status()
            return proc
        except ApiError:
            time.sleep(0.05)
    raise SystemExit("the daemon did not start")


def rate(sock: Path, prefix: str, total: int, clients: int) -> float:
    def work(k: int) -> None:
        client = Client(sock)
        for i in range(k, total, clients):
            client.submit(document(f"{prefix}-{i}"))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return total / (time.perf_counter() - t0)


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        proc = start_daemon(home)
        try:
            for clients in (1, 8):
                per_second = rate(home / "astraeus.sock", f"c{clients}", total, clients)
                print(f"{clients} client(s): {per_second:7.0f} submits/s ({total} submits)")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)


if __name__ == "__main__":
    main()
