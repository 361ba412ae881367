"""Short builders for planner snapshots: ``waiting("big", gpus=8)``, ``running("a", gpus=6)``."""

from __future__ import annotations

from datetime import UTC, datetime

from runner.model import GIB, Quota, Resources, Workspace
from runner.planner.plan import Machine, RunningUnit, Snapshot, WaitingRun
from runner.reasons import RunRef

NOW = datetime(2026, 10, 1, 12, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0


def machine(gpus: int = 8, cpus: int = 64, memory_gib: int = 512, grace: float = 30) -> Machine:
    return Machine(tuple(range(gpus)), cpus * 1000, memory_gib * GIB, stop_grace=grace)


def waiting(
    name: str,
    *,
    gpus: int = 0,
    cpus: float = 0,
    memory_gib: float = 0,
    workers: int = 1,
    priority: int = 0,
    ws: str = "default",
    at: float = 0,
    limit: float | None = None,
    preempted_by: str | None = None,
    gpu_memory_gib: float = 0,
) -> WaitingRun:
    """``gpu_memory_gib``: what one worker's GPUs count as in GPU memory (the engine
    counts a whole GPU as its memory; 0: GPU memory left out)."""
    worker = Resources(gpus, int(cpus * 1000), int(memory_gib * GIB), 1, int(gpu_memory_gib * GIB))
    ref = RunRef(preempted_by, ws) if preempted_by else None
    return WaitingRun(
        name, ws, priority, NOW - 1000 + at, worker, tuple(range(workers)), limit, ref
    )


def running(
    name: str,
    *,
    gpus: tuple[int, ...] = (),
    cpus: float = 0,
    memory_gib: float = 0,
    workers: int = 1,
    priority: int = 0,
    ws: str = "default",
    started: float = -HOUR,
    limit: float | None = None,
    unit: str | None = None,
    stop_deadline: float | None = None,
    stopping_for: str | None = None,
    gpu_memory_gib: float = 0,
) -> RunningUnit:
    res = Resources(
        len(gpus), int(cpus * 1000), int(memory_gib * GIB), workers, int(gpu_memory_gib * GIB)
    )
    return RunningUnit(
        unit or name,
        name,
        ws,
        priority,
        res,
        gpus,
        NOW + started,
        limit,
        workers,
        None if stop_deadline is None else NOW + stop_deadline,
        stopping_for,
    )


def workspace(
    name: str,
    *,
    gpus: int | None = None,
    cpus: int | None = None,
    workers: int | None = None,
    weight: float = 1.0,
    max_priority: int = 0,
    within: bool = False,
) -> Workspace:
    """``within``: its runs over the quota preempt its own lower-priority work
    (``preempt_within_quota``)."""
    quota = None
    if gpus is not None or cpus is not None or workers is not None:
        quota = Quota(gpus, None if cpus is None else cpus * 1000, None, workers)
    return Workspace(name, quota, weight, max_priority, preempt_within_quota=within)


def snap(
    *runs: WaitingRun | RunningUnit,
    m: Machine | None = None,
    workspaces: tuple[Workspace, ...] = (),
) -> Snapshot:
    return Snapshot(
        m or machine(),
        {w.name: w for w in workspaces},
        tuple(r for r in runs if isinstance(r, RunningUnit)),
        tuple(r for r in runs if isinstance(r, WaitingRun)),
    )
