"""The dashboard on a real daemon at 10,000 and 100,000 runs, in tmux at 160x45.

Run by hand, never as a test: ``.venv/bin/python bench/bench_dash.py [--sizes
10000,100000] [--repeat 3]``. Starts a daemon (process executor, 8 simulated GPUs), one
blocker holding every GPU, and fills the queue with one-GPU runs up to each size
(``POST /v1/runs:batch``, the NDJSON of ``astra submit --ndjson``). At each size it opens
``astra dash`` in a detached tmux session of 160x45 and reads the screen
(``tmux capture-pane``) every 20 ms:

* first rows: from the command's start to the first run's row on screen;
* whole queue: to the header's ``N runs`` counting every run (the whole snapshot merged);
* the daemon's CPU in the 5 s after that (ms a second: back to idle is a few);
* a change end to end: ``astra hold w-3`` from its start until the row ``4  w-3`` has
  left the screen, and ``astra release w-3`` until it is back (medians).

Targets (issue #16): the whole queue on screen <= 1 s at 10,000, the daemon idle once
it is shown, a change merged <= 100 ms (here end to end, the command's own start
included); at 100,000 it connects.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_cli import end_workers, start_daemon

ASTRA = str(Path(sys.executable).with_name("astra"))
SESSION = f"astraeus-bench-dash-{os.getpid()}"
FOURTH = re.compile(r"^\s+4\s+w-3\s", re.MULTILINE)


def cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def settle(pid: int, limit: float = 120) -> None:
    """Until the daemon's CPU over a second is under 5 %."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = cpu_ms(pid)
        time.sleep(1)
        if cpu_ms(pid) - before < 50:
            return


def fill(home: Path, start: int, end: int) -> None:
    from astraeus_tui.client import Client

    client = Client(home / "astraeus.sock", timeout=600)
    task = {"command": "true", "requested_resources": {"gpu_requests": {"count": 1}}}
    for at in range(start, end, 5000):
        lines = [json.dumps({"metadata": {"name": f"w-{i}"}, "spec": {"task_template": task}})
                 for i in range(at, min(end, at + 5000))]  # fmt: skip
        client.submit_batch(("\n".join(lines) + "\n").encode())


def screen() -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", SESSION], capture_output=True,
                          text=True, check=False).stdout  # fmt: skip


def wait_for(test: object, t0: float, limit: float) -> float | None:
    """Seconds from ``t0`` until ``test(screen)`` holds, or None after ``limit``."""
    assert callable(test)
    while time.perf_counter() - t0 < limit:
        if test(screen()):
            return time.perf_counter() - t0
        time.sleep(0.02)
    return None


def one_open(home: Path, pid: int, total: int, limit: float) -> dict[str, float | None]:
    # as an installed copy runs: bytecode read and written (``env -u``: a development
    # shell's PYTHONDONTWRITEBYTECODE compiles every changed module on each start)
    env = f"-u PYTHONDONTWRITEBYTECODE ASTRAEUS_HOME={home} TERM=xterm-256color"
    t0 = time.perf_counter()
    subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", "160", "-y", "45",
                    f"env {env} {ASTRA} dash"], check=True)  # fmt: skip
    try:
        rows = wait_for(lambda s: " w-0 " in s, t0, limit)
        whole = wait_for(lambda s: f" {total} runs" in s, t0, limit)
        out: dict[str, float | None] = {"first_rows_s": rows, "whole_s": whole}
        before = cpu_ms(pid)
        time.sleep(5)
        out["daemon_cpu_ms_per_s"] = (cpu_ms(pid) - before) / 5
        changes: list[float] = []
        env_vars = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env_vars["ASTRAEUS_HOME"] = str(home)
        for _ in range(3):
            for action, shown in (("hold", False), ("release", True)):
                t1 = time.perf_counter()
                subprocess.run([ASTRA, action, "w-3"], env=env_vars, check=True,
                               capture_output=True)  # fmt: skip
                took = wait_for(lambda s, want=shown: bool(FOURTH.search(s)) == want, t1, 30)
                if took is not None:
                    changes.append(took)
        out["change_s"] = statistics.median(changes) if changes else None
        return out
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], check=False)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--limit", type=float, default=120, help="seconds to wait for a screen")
    args = p.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        proc = start_daemon(home)
        try:
            from astraeus_tui.client import Client

            task = {"command": "sleep", "args": ["36000"],
                    "requested_resources": {"gpu_requests": {"count": 8}}}  # fmt: skip
            Client(home / "astraeus.sock").submit(
                {"metadata": {"name": "blocker"}, "spec": {"task_template": task}}
            )
            filled = 0
            for size in sizes:
                t0 = time.perf_counter()
                fill(home, filled, size)
                filled = size
                print(f"{size} waiting: filled in {time.perf_counter() - t0:.1f} s", flush=True)
                settle(proc.pid)
                for _ in range(args.repeat):
                    got = one_open(home, proc.pid, size + 1, args.limit)
                    print("  " + "  ".join(
                        f"{k} {'-' if v is None else f'{v:.3f}'}" for k, v in got.items()
                    ), flush=True)  # fmt: skip
                    settle(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            end_workers(home)


if __name__ == "__main__":
    main()
