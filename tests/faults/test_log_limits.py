"""One member's output cannot stop the daemon: logs are bounded by ``[machine] log_limit``
(the newest part kept, the cut marked) and ``log_reserve`` (below it output is dropped),
on a 24 MiB ASTRAEUS_HOME; the noisy run's exit is recorded with its real exit code, and a
worker's exit is recorded even when its disk is full.

Needs root (mount); skipped otherwise.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.executors.base import Observed, WorkerLaunch
from runner.executors.process import ProcessExecutor
from tests.faults.conftest import MakeDaemon
from tests.faults.daemon import DaemonProcess, document, wait_for
from tests.faults.disk import fill

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

LINES = 5_200_000  # `seq 1 5200000` prints about 40 MB
NOISY = ["sh", "-c", f"seq 1 {LINES}; exit 7"]


def _mount(folder: Path, size: str) -> None:
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder)],
        capture_output=True, text=True,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")


def _umount(folder: Path) -> None:
    if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB ASTRAEUS_HOME."""
    folder = tmp_path / "home"
    _mount(folder, "24m")
    try:
        yield folder
    finally:  # the daemon and its workers are gone by now (make_daemon is torn down first)
        _umount(folder)


def _configure(home: Path, lines: str) -> None:
    config = home / "config.toml"
    config.write_text(config.read_text().replace("[machine]\n", f"[machine]\n{lines}", 1))


def _follow(d: DaemonProcess, name: str) -> tuple[threading.Thread, bytearray]:
    """``astra logs -f``: everything the API streams, collected in a thread."""
    got = bytearray()

    def read() -> None:
        for chunk in d.client(timeout=120).logs(name, follow=True):
            got.extend(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def _others_still_served(d: DaemonProcess, tag: str) -> None:
    """Submits and deletes by anyone still succeed: the state database has room."""
    d.submit(document(f"{tag}-ok", ["true"]))
    d.submit(document(f"{tag}-held", ["sleep", "300"], gpus=1))
    d.wait_state(f"{tag}-ok", "Succeeded")
    d.wait_state(f"{tag}-held", "Running")
    d.client().request("DELETE", f"/v1/runs/{tag}-held")
    d.wait_state(f"{tag}-held", "Cancelled")


def _numbers(text: bytes) -> list[int]:
    return [int(line) for line in text.split(b"\n") if line.isdigit()]


def test_a_worker_log_keeps_its_newest_part_within_log_limit(
    home: Path, make_daemon: MakeDaemon
) -> None:
    d = make_daemon(gpus=1, home=home)
    _configure(home, 'log_limit = "4MiB"\nlog_reserve = "2MiB"\n')
    d.start()
    uid = d.submit(document("noisy", NOISY, restart_limit=0))["uid"]
    follower, followed = _follow(d, "noisy")
    run = d.wait_state("noisy", "Failed", "Succeeded", timeout=120)
    assert run["exit_code"] == 7, run
    assert "supervisor" not in (run["reason"] or ""), run
    follower.join(60)
    _others_still_served(d, "after")

    logs = list((home / "logs" / uid).glob("*.log"))
    assert len(logs) == 1
    content = logs[0].read_bytes()
    assert len(content) <= 4 << 20
    first, _, rest = content.partition(b"\n")
    assert first.startswith(b"[astraeus: ") and b"of earlier output cut (" in first, first
    assert first.endswith(b"log_limit is 4MiB]"), first
    assert rest.endswith(f"{LINES}\n".encode())
    kept = _numbers(rest)
    assert kept == list(range(kept[0], LINES + 1))  # the newest part, whole lines, in order

    assert not follower.is_alive()
    seen = _numbers(bytes(followed))  # followed across every cut: no line twice, in order
    assert seen[-1] == LINES and all(b > a for a, b in itertools.pairwise(seen))
    whole = b"".join(d.client().logs("noisy"))
    assert whole == content


def test_below_log_reserve_output_is_dropped_and_the_exit_is_kept(
    home: Path, make_daemon: MakeDaemon
) -> None:
    """The defaults (64MiB limit, 256MiB reserve) on a 24 MiB home: output is dropped."""
    d = make_daemon(gpus=1, home=home).start()
    uid = d.submit(document("noisy", NOISY, restart_limit=0))["uid"]
    d.submit(document("during-ok", ["true"]))
    run = d.wait_state("noisy", "Failed", "Succeeded", timeout=120)
    assert run["exit_code"] == 7, run
    _others_still_served(d, "after")
    d.wait_state("during-ok", "Succeeded")

    (log,) = (home / "logs" / uid).glob("*.log")
    lines = log.read_bytes().splitlines()
    assert lines[0] == (
        b"[astraeus: output dropped from here: less than log_reserve (256MiB) is free on the"
        b" log disk]"
    )
    assert len(lines) == 1
    free = os.statvfs(home)
    assert free.f_bavail * free.f_frsize > 16 << 20  # the output never reached the disk


def test_an_exit_on_a_full_disk_is_recorded_with_its_code(tmp_path: Path) -> None:
    """The supervisor took the room for its exit record when the worker started."""
    workers = tmp_path / "workers"
    _mount(workers, "2m")
    try:
        executor = ProcessExecutor(workers)
        gate = tmp_path / "gate"
        argv = ("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 5")
        launch = WorkerLaunch("full", 1, 0, None, argv, log_path=workers / "full.log")
        handle = executor.start(launch)
        fill(workers / "filler")
        gate.touch()
        wait_for(lambda: executor.status(handle).state is not Observed.RUNNING, 30, "the exit")
        status = executor.status(handle)
        assert (status.state, status.exit_code) == (Observed.EXITED, 5), status
        executor.cleanup(handle)
    finally:
        _umount(workers)
