"""Start overhead and preemption latency on the real Docker engine; the process
executor's idle submit -> first line.

Run by hand, as root, with the engine up (``bash tests/docker/setup.sh``):
``.venv/bin/python bench/bench_start.py [N]``; ``--process`` measures only 3.

1. From a run becoming startable (its submit is acknowledged) to its container
   running, against creating and starting the same container directly with the
   docker SDK: target overhead <= 100 ms (medians of N each).
2. From the preemption decision (the victim's "Preempted" event) to SIGTERM
   reaching the program (the docker timestamp of the line its trap prints):
   target <= 1 s.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from runner.daemon.daemon import Daemon
from runner.service.runs import caller_for

if TYPE_CHECKING:
    import docker

CONFIG = """
[machine]
executor = "docker"
gpus = 2
stop_grace_seconds = 5
[workspaces.default]
members = ["*"]
max_priority = 10
"""
IMAGE = "astraeus-test:busybox"  # built by tests/docker/setup.sh
# On SIGTERM the program prints the kernel's uptime (10 ms steps) when it got it.
LOOP = (
    "trap 'echo got-term $(cut -d\" \" -f1 /proc/uptime); exit 0' TERM; "
    "while true; do sleep 0.05; done"
)


def uptime_offset() -> float:
    """Wall-clock time minus the kernel's uptime, to place an uptime on the clock."""
    with open("/proc/uptime") as f:
        return time.time() - float(f.read().split()[0])


def spec(name: str, priority: int = 0, gpus: int = 1) -> dict[str, object]:
    task = {"image": IMAGE, "command": "sh", "args": ["-c", LOOP],
            "requested_resources": {"gpu_requests": {"count": gpus}}}  # fmt: skip
    return {"metadata": {"name": name}, "spec": {"priority": priority, "task_template": task}}


def wait(predicate: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(0.002)


def state_is(daemon: Daemon, name: str, state: str) -> Callable[[], bool]:
    def check() -> bool:
        run = daemon.store.runs.get(name)
        return run is not None and run.state == state

    return check


def preempted(daemon: Daemon, name: str) -> Callable[[], bool]:
    return lambda: any(e.kind == "Preempted" for e in daemon.store.events.all(name))


def through_daemon(daemon: Daemon, n: int) -> list[float]:
    root = caller_for(0, 0, daemon.config)
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        daemon.service.submit(spec(f"s{i}"), root)
        wait(state_is(daemon, f"s{i}", "Running"))
        times.append(time.perf_counter() - t0)
        daemon.service.delete(f"s{i}", root)
        wait(state_is(daemon, f"s{i}", "Cancelled"))
    return times


def direct(client: docker.DockerClient, n: int) -> list[float]:
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        c = client.containers.create(IMAGE, ["sh", "-c", LOOP], name=f"bench-direct-{i}",
                                     detach=True)  # fmt: skip
        c.start()
        times.append(time.perf_counter() - t0)
        c.remove(force=True)
    return times


def preemption_latency(daemon: Daemon, n: int) -> list[float]:
    root = caller_for(0, 0, daemon.config)
    lat = []
    for i in range(n):
        victim, urgent = f"low{i}", f"urgent{i}"
        victim_uid = daemon.service.submit(spec(victim, priority=-5, gpus=2), root).run_uid
        wait(state_is(daemon, victim, "Running"))
        time.sleep(0.3)
        daemon.service.submit(spec(urgent, priority=5, gpus=2), root)
        wait(preempted(daemon, victim))
        decided = next(e.time for e in daemon.store.events.all(victim) if e.kind == "Preempted")
        wait(state_is(daemon, urgent, "Running"))
        log = daemon.home / "logs" / victim_uid / "1-0.log"
        wait(lambda log=log: "got-term" in log.read_text())  # type: ignore[misc]
        line = next(t for t in log.read_text().splitlines() if t.startswith("got-term"))
        lat.append(float(line.split()[1]) + uptime_offset() - decided)
        daemon.service.delete(urgent, root)
        daemon.service.delete(victim, root)
        wait(state_is(daemon, urgent, "Cancelled"))
    return lat


PROCESS_CONFIG = """
[machine]
executor = "process"
gpus = 8
[workspaces.default]
members = ["*"]
"""


def first_line(submit: Callable[[str], None], mark: Path) -> float:
    """Seconds from the submit to the clock reading the program wrote first."""
    t0 = time.time()
    submit(f"date +%s.%N > {mark}.tmp && mv {mark}.tmp {mark}")
    wait(mark.exists)
    return float(mark.read_text()) - t0


def process_first_line(n: int) -> None:
    astra = str(Path(sys.executable).with_name("astra"))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "config.toml").write_text(PROCESS_CONFIG)
        daemon = Daemon(home).start()
        root = caller_for(0, 0, daemon.config)

        def service(i: int) -> Callable[[str], None]:
            def submit(sh: str) -> None:
                task = {"command": "sh", "args": ["-c", sh]}
                daemon.service.submit(
                    {"metadata": {"name": f"p{i}"}, "spec": {"task_template": task}}, root
                )

            return submit

        try:
            inside = []
            for i in range(n):
                inside.append(first_line(service(i), home / f"in-{i}"))
                time.sleep(0.2)  # idle again: the worker has ended
        finally:
            daemon.stop()
        env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_LOG": "WARNING"}
        serve = [sys.executable, "-m", "astraeus_tui.cli.main", "serve"]
        proc = subprocess.Popen(serve, env=env, stderr=subprocess.DEVNULL)
        try:
            wait(lambda: (home / "astraeus.sock").exists())
            time.sleep(0.5)

            def command(sh: str) -> None:
                run = [astra, "run", "--", "sh", "-c", sh]
                subprocess.run(run, env=env, check=True, capture_output=True)

            whole = []
            for i in range(n):
                whole.append(first_line(command, home / f"cli-{i}"))
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(30)
    load = os.getloadavg()[0]
    print(f"idle submit -> first line, process executor (median of {n}, load {load:.2f}):")
    print(f"  through the service: {statistics.median(inside) * 1000:.0f} ms")
    print(f"  through astra run (the command included): {statistics.median(whole) * 1000:.0f} ms")


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--process"]
    n = int(args[0]) if args else 15
    if "--process" in sys.argv[1:]:
        process_first_line(n)
        return
    import docker

    client = docker.from_env()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "config.toml").write_text(CONFIG)
        daemon = Daemon(home).start()
        try:
            ours = statistics.median(through_daemon(daemon, n)) * 1000
            sdk = statistics.median(direct(client, n)) * 1000
            print(f"submit -> container running: {ours:.0f} ms; SDK create+start: {sdk:.0f} ms;"
                  f" overhead {ours - sdk:.0f} ms")  # fmt: skip
            lat = statistics.median(preemption_latency(daemon, max(3, n // 3)))
            print(f"preemption decision -> SIGTERM in the program: {lat * 1000:.0f} ms")
        finally:
            daemon.stop()


if __name__ == "__main__":
    main()
