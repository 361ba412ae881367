"""The work of higher priority that arrives while a run waits, and how far it moves the
run's start.

A replay of the queue as it stands forecasts a waiting run's start from the work already
submitted; the runs of higher priority submitted after the forecast pass it, and the
replay cannot see them. A priority queue's busy period says by how much: a run waits what
is ahead of it stretched by ``1 / (1 − ρ)``, ρ the share of the machine that work of
higher priority arriving meanwhile takes. ρ is read from the last day: the GPU-seconds of
the runs of higher priority submitted in it (finished: what they used; running or
waiting: their time limit, or their learned length where they have none), over the day
times the machine's GPUs. Measured on a replay of the shared cluster trace (the README,
"Start forecasts"): the 90 % start of a run behind more urgent work was passed too often
without it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from runner.planner.types import RunningUnit, Snapshot, WaitingRun

# how long a run takes, where it has no time limit: (workspace, run, limit) -> seconds
# (None: not known; the run counts nothing)
Length = Callable[[str, str, float | None], float | None]

WINDOW = 86400.0  # seconds of arrivals that say how loaded the machine is
# ρ at most: a wait is at most doubled. Past the machine's rate the busy period has no
# end, and at a cap of 0.9 (0.75) the 90 % start of the trace's 50 % sample was passed
# in 5.0 % (5.6 %) of forecasts, not 10 %; at 0.5, 11.5 % (the README, "Start forecasts")
MAX_LOAD = 0.5


class Arrivals:
    """The finished runs submitted within ``window``: their priority and GPU-seconds."""

    def __init__(self, window: float = WINDOW) -> None:
        self.window = window
        self._done: list[tuple[float, int, float]] = []  # a heap by submit time

    def finished(self, submitted_at: float, priority: int, gpu_seconds: float) -> None:
        """A run finished, having used ``gpu_seconds``."""
        if gpu_seconds > 0:
            heapq.heappush(self._done, (submitted_at, priority, gpu_seconds))

    def stretches(self, snapshot: Snapshot, now: float, length: Length) -> dict[int, float]:
        """Each waiting run's priority -> the factor its forecast wait is stretched by.
        ``length``: how long a running or waiting run takes."""
        since = now - self.window
        while self._done and self._done[0][0] < since:
            heapq.heappop(self._done)
        work: dict[int, float] = {}
        for _, priority, seconds in self._done:
            work[priority] = work.get(priority, 0.0) + seconds
        for priority, seconds in _current(snapshot, since, length):
            work[priority] = work.get(priority, 0.0) + seconds
        room = self.window * max(1, len(snapshot.machine.gpus))
        out = {}
        for priority in {w.priority for w in snapshot.waiting}:
            above = sum(s for p, s in work.items() if p > priority)
            out[priority] = 1.0 / (1.0 - min(MAX_LOAD, above / room))
        return out


def _current(snapshot: Snapshot, since: float, length: Length) -> Iterable[tuple[int, float]]:
    """The running (started since ``since``) and waiting (submitted since) runs' work."""
    whole = snapshot.machine.whole_gpu or 1
    for unit in snapshot.running:
        took = (
            length(unit.workspace, unit.run, unit.time_limit) if unit.started_at >= since else None
        )
        if took is not None:
            yield unit.priority, took * _gpus(unit, whole)
    for run in snapshot.waiting:
        took = (
            length(run.workspace, run.name, run.time_limit) if run.submitted_at >= since else None
        )
        if took is not None:
            yield run.priority, took * _gpus(run, whole)


def _gpus(run: RunningUnit | WaitingRun, whole: int) -> float:
    """The GPUs a run holds, a shared one's as its share of a whole GPU's memory."""
    if isinstance(run, RunningUnit):
        return run.resources.gpus + run.gpu_share * len(run.gpus) / whole
    return run.total.gpus + run.gpu_share * run.gpu_count * len(run.workers) / whole
