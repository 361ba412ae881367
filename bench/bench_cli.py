"""`astra ls` end to end: a new process, the socket round trip, the table.

Run by hand: ``.venv/bin/python bench/bench_cli.py``. Starts a daemon with 50
queued runs and prints the median wall time of ``astra ls`` over 21 runs.
Target: <= 150 ms.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_api import document, start_daemon

from astraeus_tui.client import Client


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        proc = start_daemon(home)
        try:
            client = Client(home / "astraeus.sock")
            for i in range(50):
                client.submit(document(f"run-{i}"))
            env = {**os.environ, "ASTRAEUS_HOME": str(home), "COLUMNS": "80"}
            astra = [str(Path(sys.executable).with_name("astra")), "ls"]
            times = []
            for _ in range(21):
                t0 = time.perf_counter()
                subprocess.run(astra, env=env, check=True, capture_output=True)
                times.append((time.perf_counter() - t0) * 1000)
            print(f"astra ls (50 queued runs): median {statistics.median(times):.0f} ms")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)


if __name__ == "__main__":
    main()
