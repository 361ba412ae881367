"""What finished runs cost the daemon: memory and state.db under a churn of short runs.

A real daemon (process executor, simulated GPUs) takes ``--runs`` runs of ``true`` with
one ``--arg-kib`` KiB argument, ``--batch`` at a time, each waited out; the daemon's RSS
and the size of ``state.db`` (with its WAL) are printed every ``--every`` runs. Also
``astra ls --all`` and a dashboard's stream are asked once per report, as people do.

    .venv/bin/python bench/bench_churn.py --runs 600 [--machine 'max_kept_per_user = 100']
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_list import rss_mb  # the daemon's RSS, as the list bench reads it

from astraeus_tui.client import Client
from tests.support.served import Served


def db_mib(home: Path) -> float:
    return sum(p.stat().st_size for p in home.glob("state.db*")) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=600)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--arg-kib", type=int, default=60)
    parser.add_argument(
        "--machine", default="", help='[machine] lines, e.g. "max_kept_per_user = 100"'
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="astra-churn-"))
    daemon = Served(root / "home", root / "astraeus.sock")
    daemon.start("", gpus=1, machine=args.machine.replace("\\n", "\n"))
    assert daemon.proc is not None
    client = Client(daemon.socket)
    arg = "x" * (args.arg_kib * 1024)
    started = time.monotonic()
    print(f"{'runs':>6} {'rss MiB':>8} {'db MiB':>7} {'refused':>7}")
    print(f"{0:>6} {rss_mb(daemon.proc.pid):>8.1f} {db_mib(daemon.home):>7.1f}")
    refused, done = 0, 0
    try:
        while done < args.runs:
            names = []
            for i in range(args.batch):
                doc = {"metadata": {"name": f"c-{done + i}"},
                       "spec": {"restart_limit": 0, "task_template": {
                           "image": "local", "command": "true", "args": [arg]}}}  # fmt: skip
                try:
                    names.append(client.submit(doc).name)
                except Exception:
                    refused += 1
            deadline = time.monotonic() + 120
            while names and time.monotonic() < deadline:
                states = {r.name: r.state for r in client.runs(all=True)}
                if all(states.get(n) in ("Succeeded", "Failed", "Cancelled", None) for n in names):
                    break
                time.sleep(0.2)
            done += args.batch
            if done % args.every == 0:
                client.runs(all=True)
                print(f"{done:>6} {rss_mb(daemon.proc.pid):>8.1f} {db_mib(daemon.home):>7.1f}"
                      f" {refused:>7}", flush=True)  # fmt: skip
    finally:
        print(f"{time.monotonic() - started:.0f} s; {os.cpu_count()} cores")
        daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
