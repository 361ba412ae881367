"""Planner snapshots with shared GPUs: 80 GiB GPUs (``shared_machine``), runs that ask for
a share of a GPU's memory (``shared``) or whole GPUs (``whole``), and running work on
GPUs by number (``held``)."""

from __future__ import annotations

from runner.model import GIB, Resources
from runner.planner.plan import Machine, RunningUnit, WaitingRun
from tests.unit.planner_builders import HOUR, NOW

SIZE = 80 * GIB


def shared_machine(gpus: int = 2, grace: float = 30) -> Machine:
    return Machine(tuple(range(gpus)), 64_000, 512 * GIB, stop_grace=grace,
                   gpu_memory=(SIZE,) * gpus)  # fmt: skip


def shared(name: str, gib: int, *, count: int = 1, priority: int = 0, at: float = 0,
           limit: float | None = None, workers: int = 1) -> WaitingRun:  # fmt: skip
    ws = "default"
    worker = Resources(0, 0, 0, 1, gib * GIB * count, held_gpus=count)  # as the snapshot
    return WaitingRun(name, ws, priority, NOW - 1000 + at, worker, tuple(range(workers)),
                      limit, gpu_share=gib * GIB, gpu_count=count)  # fmt: skip


def whole(name: str, gpus: int, *, priority: int = 0, at: float = 0,
          limit: float | None = None, ws: str = "default") -> WaitingRun:  # fmt: skip
    worker = Resources(gpus, 0, 0, 1, SIZE * gpus)
    return WaitingRun(name, ws, priority, NOW - 1000 + at, worker, (0,), limit)


def held(name: str, gpus: tuple[int, ...], gib: int = 0, *, priority: int = 0,
         limit: float | None = None, started: float = -HOUR, ws: str = "default",
         stop_deadline: float | None = None) -> RunningUnit:  # fmt: skip
    """Running: ``gib`` on each of ``gpus`` (shared), or ``gpus`` whole when 0."""
    res = (Resources(0, 0, 0, 1, gib * GIB * len(gpus), held_gpus=len(gpus)) if gib
           else Resources(len(gpus), 0, 0, 1, SIZE * len(gpus)))  # fmt: skip
    deadline = None if stop_deadline is None else NOW + stop_deadline
    return RunningUnit(name, name, ws, priority, res, gpus, NOW + started, limit,
                       stop_deadline=deadline, gpu_share=gib * GIB)  # fmt: skip
