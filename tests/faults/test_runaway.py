"""Programs that fight back: children that ignore SIGTERM or leave the process group, a
log flood, exits at once.

(A program that ignores SIGTERM itself is tests/integration/test_lifecycle.py's.)
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from runner.executors.logcap import read_cut
from tests.docker.helpers import IMAGE, SKIP_REASON, engine_client
from tests.faults.conftest import MakeDaemon
from tests.faults.daemon import PY, DaemonProcess, document, group_members, pids_alive, rss_kib
from tests.faults.daemon import wait_for as wait
from tests.faults.storm import restart_storm

FAMILY = """
import os, signal, sys, time
pids, parent_ignores = sys.argv[1], sys.argv[2] == "1"
def mark():
    with open(pids, "a") as f:
        f.write(f"{os.getpid()}\\n")
for i in range(3):
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if i == 0 and os.fork() == 0:  # a grandchild, too
            mark()
            time.sleep(600)
            os._exit(0)
        mark()
        time.sleep(600)
        os._exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN if parent_ignores else signal.SIG_DFL)
mark()
time.sleep(600)
"""


@pytest.mark.parametrize("parent_ignores", [True, False], ids=["all-ignore", "parent-exits"])
def test_children_that_ignore_sigterm_all_die(
    make_daemon: MakeDaemon, tmp_path: Path, parent_ignores: bool
) -> None:
    pids = tmp_path / "pids"
    d = make_daemon(gpus=1, grace=1).start()
    argv = [PY, "-c", FAMILY, str(pids), "1" if parent_ignores else "0"]
    d.submit(document("family", argv, gpus=1))
    family = wait(lambda: len(p := pids.read_text().split()) == 5 and p if pids.exists() else 0)
    family = [int(p) for p in family]
    group = os.getpgid(family[0])  # the command leads its own process group
    assert group in family and sorted(group_members(group)) == sorted(family)
    d.client().request("DELETE", "/v1/runs/family")
    run = d.wait_state("family", "Cancelled", timeout=30)
    wait(lambda: not pids_alive(family), 10, "every process of the run to end")
    assert group_members(group) == []
    # every process of the worker has the grace, also once its parent has exited: those
    # that ignore SIGTERM get SIGKILL when it ends
    killed = [e["message"] for e in run["events"] if e["message"].startswith("Sent SIGKILL")]
    assert len(killed) == 1 and killed[0].startswith(f"Sent SIGKILL to worker 0: {Path(PY).name}")


# Three processes in three sessions: the command, a child that calls setsid() and a
# double-forked daemon (orphaned, so reparented). Each notes its pid, and notes SIGTERM
# without obeying it.
ESCAPES = """
import os, signal, sys, time
pids, terms = sys.argv[1], sys.argv[2]
def note(path):
    with open(path, "a") as f:
        f.write(f"{os.getpid()}\\n")
signal.signal(signal.SIGTERM, lambda *a: note(terms))
def stay():
    note(pids)
    for _ in range(300):
        time.sleep(1)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    stay()
middle = os.fork()
if middle == 0:
    if os.fork() == 0:
        os.setsid()
        stay()
    os._exit(0)
os.waitpid(middle, 0)  # gone before the stop: a signal can no longer reach it
stay()
"""
MARGIN = 3.0  # seconds past the grace by which every process of a stopped run is gone
LIMIT = 3  # the time limit of the "time-limit" case
ENDS_AS = {
    "delete": "Cancelled",
    "delete-after-kill-9": "Cancelled",  # by a daemon that adopted the run
    "preempt": "Queued",
    "time-limit": "Failed",
}


def noted(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.mark.parametrize("how", list(ENDS_AS))
def test_processes_that_leave_the_group_are_stopped_with_it(
    make_daemon: MakeDaemon, tmp_path: Path, how: str
) -> None:
    pids, terms, grace = tmp_path / "pids", tmp_path / "terms", 1
    d = make_daemon(gpus=1, grace=grace).start()
    limit = LIMIT if how == "time-limit" else None
    argv = [PY, "-c", ESCAPES, str(pids), str(terms)]
    d.submit(document("escapes", argv, gpus=1, limit=limit))
    family = wait(lambda: len(p := noted(pids)) == 3 and p)
    try:
        assert len({os.getsid(pid) for pid in family}) == 3
        if how == "delete-after-kill-9":
            d.kill9()
            d.start()
        stop_at = time.monotonic()  # the time limit, later: it ran before the family noted
        if how.startswith("delete"):
            d.client().request("DELETE", "/v1/runs/escapes")
        elif how == "preempt":
            d.submit(document("urgent", [PY, "-c", "import time; time.sleep(600)"], gpus=1,
                              priority=5))  # fmt: skip
        else:
            stop_at += LIMIT
        left = stop_at + grace + MARGIN - time.monotonic()
        wait(lambda: not pids_alive(family), left, "every process of the run to end")
        assert sorted(noted(terms)) == sorted(family)  # SIGTERM at the stop, once each
        run = d.wait_state("escapes", ENDS_AS[how])
        assert any(e["message"].startswith("Sent SIGKILL") for e in run["events"])
        assert run["restarts"] == 0  # adopted after the kill -9, not started again
    finally:
        for pid in pids_alive(family):
            os.kill(pid, signal.SIGKILL)


@contextmanager
def probing(d: DaemonProcess) -> Iterator[list[float]]:
    """Ask the daemon's status every 0.1 s meanwhile; yields the answer times."""
    times: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        client = d.client(timeout=60)
        while not stop.is_set():
            t = time.monotonic()
            client.request("GET", "/v1/status")
            times.append(time.monotonic() - t)
            stop.wait(0.1)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        yield times
    finally:
        stop.set()
        thread.join(60)


FLOOD_BYTES = 300_000_000


def written(log: Path) -> int:
    """Bytes written to ``log`` in all, also those a log_limit cut since."""
    if not log.exists():
        return 0
    with log.open("rb") as f:
        cut, header = read_cut(f)
        return cut + log.stat().st_size - header


FLOOD = f"yes astraeus-flood-{'x' * 200} | head -c {FLOOD_BYTES}; sleep 60"


def test_a_log_flood_leaves_the_daemon_responsive_and_small(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = make_daemon(gpus=1).start()
    assert d.proc is not None
    before = rss_kib(d.proc.pid)
    with probing(d) as answers:
        uid = d.submit(document("flood", ["sh", "-c", FLOOD], gpus=1))["uid"]
        log = d.home / "logs" / uid / "1-0.log"
        wait(lambda: written(log) >= FLOOD_BYTES, 60, "the flood")
        time.sleep(1)
    assert d.run("flood")["state"] == "Running"
    assert log.stat().st_size <= 64 << 20  # the default log_limit: the newest part kept
    assert len(answers) >= 5 and max(answers) < 1.0, answers
    grown = rss_kib(d.proc.pid, "VmHWM") - before
    assert grown < 50_000, f"the daemon grew by {grown} KiB"
    d.client().request("DELETE", "/v1/runs/flood")
    d.wait_state("flood", "Cancelled")


CI_RUNS, CI_RESTARTS = 4, 50  # 200 restarts in CI; bench/chaos.py restarts does 1000


def test_exits_at_once_spend_the_restart_budget_exactly(tmp_path: Path) -> None:
    report = restart_storm(tmp_path, CI_RUNS, CI_RESTARTS, timeout=300)
    said = report.summary()
    print(said)
    assert report.states == ["Failed"] * CI_RUNS, said
    assert report.restarts == [CI_RESTARTS] * CI_RUNS, said
    assert report.restarting_events == [CI_RESTARTS] * CI_RUNS, said
    assert report.canaries_started >= 3, said  # other work still started meanwhile
    assert report.slowest_answer < 1.0, said  # the API answered within a second throughout


DOCKER_FLOOD_BYTES = 100_000_000


@pytest.mark.skipif(engine_client() is None, reason=SKIP_REASON)
def test_a_container_log_flood_is_copied_without_the_daemon_growing(
    make_daemon: MakeDaemon,
) -> None:
    """With Docker the daemon itself copies the output (a log follower thread)."""
    d = make_daemon(gpus=1, executor="docker").start()
    assert d.proc is not None
    before = rss_kib(d.proc.pid)
    script = f"yes astraeus-flood-{'x' * 200} | head -c {DOCKER_FLOOD_BYTES}; sleep 60"
    with probing(d) as answers:
        uid = d.submit(document("flood", ["sh", "-c", script], gpus=1, image=IMAGE))["uid"]
        log = d.home / "logs" / uid / "1-0.log"
        # all but the last, unfinished line: Docker passes on whole lines
        copied = DOCKER_FLOOD_BYTES - 1000
        wait(lambda: written(log) >= copied, 120, "the copy")
    assert d.run("flood")["state"] == "Running"
    assert log.stat().st_size <= 64 << 20  # the default log_limit: the newest part kept
    assert len(answers) >= 5 and max(answers) < 1.0, max(answers)
    grown = rss_kib(d.proc.pid, "VmHWM") - before
    assert grown < 50_000, f"the daemon grew by {grown} KiB"
    d.client().request("DELETE", "/v1/runs/flood")
    d.wait_state("flood", "Cancelled")
