"""The queue at size: `astra ls`, `GET /v1/runs`, the daemon's memory and its time per submit.

Run by hand, never as a test: ``.venv/bin/python bench/bench_list.py [--sizes 2000,10000]``.
Starts a daemon (process executor, 8 simulated GPUs) in a temporary ASTRAEUS_HOME, one
blocker holding every GPU, then fills the queue with one-GPU runs up to each size and
measures, at each:

* the daemon's resident memory (VmRSS) once the queue is planned, and after the reads;
* ``GET /v1/runs``: wall ms (median), and the daemon's CPU ms for a list it must make
  again (a change between two lists) and for a list it kept;
* ``astra ls`` and ``astra ls --json``: wall ms (median) and CPU ms of the process;
* serial submits through the socket: per second, and the daemon's CPU ms per submit
  (its handler and the re-planning each one causes, read from /proc).

CPU milliseconds are read from /proc and from the children's rusage: on a busy machine
they move less than the wall clock. Targets (issue #16): ls <= 50 ms at 2,000 and
<= 150 ms at 10,000; the list <= 50 ms at 10,000; memory <= 60 MB at 2,000 and
<= 120 MB at 10,000.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from astraeus_tui.client import ApiError, Client

CONFIG = '[machine]\nexecutor = "process"\ngpus = 8\nmax_submit_per_user = 1000000\n'


def document(name: str, gpus: int = 1, command: str = "true") -> dict[str, object]:
    task = {"command": command, "args": ["3600"] if command == "sleep" else [],
            "requested_resources": {"gpu_requests": {"count": gpus}}}  # fmt: skip
    return {"metadata": {"name": name}, "spec": {"task_template": task}}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_ms(pid: int) -> float:
    """The process's user + system CPU time so far, in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def children_cpu_ms() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1000


def median_ms(work: Callable[[], object], repeat: int) -> float:
    work()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        work()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def fill(sock: Path, start: int, end: int, threads: int = 4) -> None:
    def part(k: int) -> None:
        client = Client(sock)
        for i in range(start + k, end, threads):
            client.submit(document(f"w-{i}"))

    pool = [threading.Thread(target=part, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def settle(pid: int, seconds: float = 2.0) -> None:
    """Until the daemon has been idle for a while (the fill planned, estimates made)."""
    last = cpu_ms(pid)
    for _ in range(60):
        time.sleep(seconds)
        now = cpu_ms(pid)
        if now - last < seconds * 1000 * 0.05:
            return
        last = now


def measure(size: int, pid: int, sock: Path, env: dict[str, str], repeat: int) -> None:
    client = Client(sock)
    astra = str(Path(sys.executable).with_name("astra"))
    settle(pid)
    print(f"--- {size:,} waiting")
    print(f"daemon RSS, planned:            {rss_mb(pid):7.1f} MB")
    wall = median_ms(lambda: client.answer("GET", "/v1/runs"), repeat)
    print(f"GET /v1/runs:                   {wall:7.1f} ms")
    before = cpu_ms(pid)
    for _ in range(repeat):
        client.answer("GET", "/v1/runs")
    kept = (cpu_ms(pid) - before) / repeat
    made = []
    for i in range(repeat):
        client.set_priority("w-0", -(i % 2))  # a change: the next list is made again
        before = cpu_ms(pid)
        client.answer("GET", "/v1/runs")
        made.append(cpu_ms(pid) - before)
    print(f"  daemon CPU, list kept / made: {kept:7.1f} / {statistics.median(made):.1f} ms")
    for args in (["ls"], ["ls", "--json"]):
        run = lambda a=args: subprocess.run([astra, *a], env=env, check=True,  # noqa: E731
                                            stdout=subprocess.DEVNULL)  # fmt: skip
        wall = median_ms(run, repeat)
        before = children_cpu_ms()
        for _ in range(repeat):
            run()
        cpu = (children_cpu_ms() - before) / repeat
        print(f"astra {' '.join(args):22s}    {wall:7.1f} ms wall, {cpu:.1f} ms CPU")
    settle(pid)
    n = 30
    before, t0 = cpu_ms(pid), time.perf_counter()
    for i in range(n):
        client.submit(document(f"s{size}-{i}"))
    rate = n / (time.perf_counter() - t0)
    time.sleep(1.0)  # the last re-planning
    per = (cpu_ms(pid) - before) / n
    print(f"serial submits:                 {rate:7.1f} /s, daemon CPU {per:.1f} ms each")
    print(f"daemon RSS, after the reads:    {rss_mb(pid):7.1f} MB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="2000,10000", help="queue sizes (2000,10000)")
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="astraeus-bench-list-") as tmp:
        home = Path(tmp)
        (home / "config.toml").write_text(CONFIG)
        env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_LOG": "WARNING",
               "COLUMNS": "160"}  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "astraeus_tui.cli.main", "serve"], env=env)
        sock = home / "astraeus.sock"
        try:
            for _ in range(400):
                try:
                    Client(sock).status()
                    break
                except ApiError:
                    time.sleep(0.05)
            settle(proc.pid, 1.0)
            print(f"daemon RSS, idle:               {rss_mb(proc.pid):7.1f} MB")
            Client(sock).submit(document("blocker", 8, "sleep"))
            have = 0
            for size in sizes:
                fill(sock, have, size)
                have = size
                measure(size, proc.pid, sock, env, args.repeat)
            Client(sock).delete("blocker")
            time.sleep(1)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
