"""Start overhead and preemption latency on the real Docker engine.

Run by hand, as root, with the engine up (``bash tests/docker/setup.sh``):
``.venv/bin/python bench/bench_start.py [N]``.

1. From a run becoming startable (its submit is acknowledged) to its container
   running, against creating and starting the same container directly with the
   docker SDK: target overhead <= 100 ms (medians of N each).
2. From the preemption decision (the victim's "Preempted" event) to SIGTERM
   reaching the program (the docker timestamp of the line its trap prints):
   target <= 1 s.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker

from runner.daemon.daemon import Daemon
from runner.service.runs import caller_for

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
        run = daemon.store.get_run(name)
        return run is not None and run.state == state

    return check


def preempted(daemon: Daemon, name: str) -> Callable[[], bool]:
    return lambda: any(e.kind == "Preempted" for e in daemon.store.events(name))


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
        decided = next(e.time for e in daemon.store.events(victim) if e.kind == "Preempted")
        wait(state_is(daemon, urgent, "Running"))
        log = daemon.home / "logs" / victim_uid / "1-0.log"
        wait(lambda log=log: "got-term" in log.read_text())  # type: ignore[misc]
        line = next(t for t in log.read_text().splitlines() if t.startswith("got-term"))
        lat.append(float(line.split()[1]) + uptime_offset() - decided)
        daemon.service.delete(urgent, root)
        daemon.service.delete(victim, root)
        wait(state_is(daemon, urgent, "Cancelled"))
    return lat


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
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
