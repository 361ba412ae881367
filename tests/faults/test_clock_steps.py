"""The wall clock steps (NTP, ``date -s``): time limits, graces and planning do not care.

A real daemon in-process on the process executor, with an injected clock whose wall
reading the test steps by hours; the monotonic clock runs on as it does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.clock import Clock
from runner.daemon.daemon import Daemon
from tests.support.harness import PY, Harness, sleeper, spec, wait_for, write_config

HOURS = 3600.0

IGNORES_TERM = [
    PY,
    "-c",
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ignoring SIGTERM', flush=True)\n"
    "while True: time.sleep(0.1)",
]


class SteppedClock(Clock):
    """The real clocks, with the wall reading moved by ``step``."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = 0.0

    def wall(self) -> float:
        return time.time() + self.offset

    def step(self, seconds: float) -> None:
        self.offset += seconds


Make = Callable[..., Harness]


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock()


@pytest.fixture
def make_daemon(tmp_path: Path, clock: SteppedClock) -> Iterator[Make]:
    started: list[Daemon] = []

    def make(*, grace: float = 2, configure: bool = True) -> Harness:
        home = tmp_path / "home"
        if configure:
            write_config(home, gpus=2, grace=grace)
        daemon = Daemon(home, clock=clock).start()
        started.append(daemon)
        return Harness(daemon)

    yield make
    for daemon in started:
        daemon.stop()
    for w in started[-1].store.workers.live() if started else []:
        started[-1].executor.signal(w.handle or "", 9)


def ticks_pass(h: Harness, count: int = 3) -> None:
    """Wait until the loop has gone round ``count`` more times (each one enforces)."""
    loop = h.daemon.backend
    target = loop.status.ticks + count
    wait_for(lambda: loop.status.ticks >= target, message=f"{count} more ticks")


def stopping(h: Harness) -> bool:
    return [w.state for w in h.daemon.store.workers.live()] == ["Stopping"]


def kills(h: Harness, name: str) -> list[str]:
    return [e for e in h.events(name) if e.startswith("Sent SIGKILL")]


def test_a_forward_step_does_not_end_a_time_limit_early(make_daemon: Make, clock: SteppedClock):
    h = make_daemon()
    h.submit(spec("limited", sleeper(), gpus=1, limit=3600))
    h.wait_state("limited", "Running")
    clock.step(2 * HOURS)
    ticks_pass(h)
    h.submit(spec("after", sleeper(), gpus=1))  # planned, enforced and started since the step
    h.wait_state("after", "Running")
    ticks_pass(h)
    run = h.run("limited")
    assert run.state == "Running" and run.stop_request is None, h.events("limited")
    assert "Time limit reached" not in h.events("limited")


def test_a_backward_step_does_not_stretch_a_time_limit(make_daemon: Make, clock: SteppedClock):
    h = make_daemon()
    h.submit(spec("short", sleeper(), gpus=1, limit=2))
    h.wait_state("short", "Running")
    clock.step(-2 * HOURS)
    run = h.wait_state("short", "Failed")
    assert h.reason("short") == "Time limit reached"
    assert run.finished_at is not None and run.finished_at < time.time() - HOURS  # shown: wall


def test_a_backward_step_does_not_stop_planning(make_daemon: Make, clock: SteppedClock):
    h = make_daemon()
    h.submit(spec("first", sleeper(), gpus=1))
    h.wait_state("first", "Running")
    clock.step(-2 * HOURS)
    ticks_pass(h)
    h.submit(spec("second", sleeper(), gpus=1))
    h.wait_state("second", "Running", timeout=10)  # at once, not in two hours
    h.daemon.service.delete("first", h.root)
    h.submit(spec("third", sleeper(), gpus=1))
    h.wait_state("third", "Running", timeout=10)


def test_a_grace_is_neither_cut_short_nor_stretched(make_daemon: Make, clock: SteppedClock):
    h = make_daemon(grace=8)
    h.submit(spec("stubborn", IGNORES_TERM, gpus=1))
    h.wait_state("stubborn", "Running")
    wait_for(lambda: "ignoring SIGTERM" in h.log("stubborn"))
    h.daemon.service.delete("stubborn", h.root)
    wait_for(lambda: stopping(h), message="the worker stopping")
    clock.step(2 * HOURS)
    ticks_pass(h)
    assert stopping(h) and not kills(h, "stubborn")
    clock.step(-4 * HOURS)  # now two hours behind: the grace still ends on time
    h.wait_state("stubborn", "Cancelled")
    assert len(kills(h, "stubborn")) == 1


def test_a_time_limit_is_measured_across_a_daemon_restart(make_daemon: Make, clock: SteppedClock):
    """The monotonic start is stored with the boot id: a new daemon on this boot uses it."""
    h = make_daemon()
    h.submit(spec("limited", sleeper(), gpus=1, limit=3600))
    h.wait_state("limited", "Running")
    worker = h.daemon.store.workers.live()[0]
    assert worker.started_mono is not None and worker.boot_id == clock.boot
    h.daemon.stop()  # its worker runs on, to be adopted
    clock.step(2 * HOURS)
    again = make_daemon(configure=False)
    ticks_pass(again)
    again.submit(spec("after", sleeper(), gpus=1))
    again.wait_state("after", "Running")
    run = again.run("limited")
    assert run.state == "Running" and run.stop_request is None, again.events("limited")
    assert [w.id for w in again.daemon.store.workers.of("limited")] == [worker.id]
