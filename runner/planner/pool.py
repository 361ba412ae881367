"""Shared GPUs: each GPU's memory, who holds it whole, and what shared runs promised.

A shared run asks for ``gpu_share`` bytes on each of ``gpu_count`` distinct GPUs per
worker. It is placed on GPUs no run holds whole, best fit (the GPU left with the least
free memory first, so large asks later find room); a run asking whole GPUs takes only
GPUs with nothing on them. The walk keeps one pool while any GPU is shared
(``plan._Walk``); a queue without shared runs never builds one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

from runner.model import Resources
from runner.planner.shadow import take_gpus
from runner.planner.types import RunningUnit, Snapshot, WaitingRun

# what a unit or a start holds: its whole GPUs, and (GPU, bytes) it shares
Hold = tuple[tuple[int, ...], tuple[tuple[int, int], ...]]
Placement = tuple[tuple[int, ...], ...]  # one tuple of GPU indices per worker


def unit_hold(unit: RunningUnit) -> Hold:
    if unit.gpu_share:
        return (), tuple((g, unit.gpu_share) for g in unit.gpus)
    return unit.gpus, ()


def start_hold(run: WaitingRun, placement: Placement) -> Hold:
    flat = tuple(g for gpus in placement for g in gpus)
    if run.gpu_share:
        return (), tuple((g, run.gpu_share) for g in flat)
    return flat, ()


class GpuPool:
    """Each GPU's memory (``size``), the bytes shared runs promised on it, and the GPUs
    held whole."""

    __slots__ = ("_never", "size", "used", "whole")

    def __init__(self, size: Mapping[int, int]) -> None:
        self.size = dict(size)
        self.used = dict.fromkeys(self.size, 0)
        self.whole: set[int] = set()
        # never_fits's answers by ask (share, GPUs a worker, workers): the sizes never
        # change, so a pool and its copies keep them (a queue asks a few shapes)
        self._never: dict[tuple[int, int, int], bool] = {}

    def copy(self) -> GpuPool:
        other = GpuPool.__new__(GpuPool)
        other.size, other.used, other.whole = self.size, dict(self.used), set(self.whole)
        other._never = self._never
        return other

    def take(self, hold: Hold) -> None:
        whole, shares = hold
        self.whole.update(whole)
        for g, n in shares:
            self.used[g] = self.used.get(g, 0) + n

    def release(self, hold: Hold) -> None:
        whole, shares = hold
        self.whole.difference_update(whole)
        for g, n in shares:
            self.used[g] = max(0, self.used.get(g, 0) - n)

    def empty(self) -> list[int]:
        """The GPUs with nothing on them, sorted."""
        return [g for g in sorted(self.size) if g not in self.whole and not self.used[g]]

    def free_on(self, g: int) -> int:
        # held for an in-quota preemptor, a GPU may be promised more than it has
        return 0 if g in self.whole else max(0, self.size[g] - self.used[g])

    def most_free(self) -> int:
        return max((self.free_on(g) for g in self.size), default=0)

    def place(self, run: WaitingRun) -> Placement | None:
        """Place every worker of ``run`` (the pool changed), or None (unchanged)."""
        trial = self.copy()
        placement: list[tuple[int, ...]] = []
        for _ in run.workers:
            if run.gpu_share:
                fitting = [g for g in trial.size if trial.free_on(g) >= run.gpu_share]
                if len(fitting) < run.gpu_count:
                    return None
                fitting.sort(key=lambda g: (trial.free_on(g) - run.gpu_share, g))
                gpus = tuple(sorted(fitting[: run.gpu_count]))
                trial.take(((), tuple((g, run.gpu_share) for g in gpus)))
            else:
                empty = trial.empty()
                if len(empty) < run.worker.gpus:
                    return None
                gpus = take_gpus(empty, run.worker.gpus)
                trial.take((gpus, ()))
            placement.append(gpus)
        self.used, self.whole = trial.used, trial.whole
        return tuple(placement)

    def fits(self, run: WaitingRun) -> bool:
        return self.copy().place(run) is not None

    def never_fits(self, run: WaitingRun) -> bool:
        """A shared ask no GPUs of this machine could hold even when all are free: one
        worker's on no GPU that large, or all its workers' together."""
        if not run.gpu_share:
            return False
        key = (run.gpu_share, run.gpu_count, len(run.workers))
        found = self._never.get(key)
        if found is None:
            found = self._never[key] = GpuPool(self.size).place(run) is None
        return found


def without_gpus(need: Resources) -> Resources:
    """``need`` but its whole GPUs, which the pool places (and counts) GPU by GPU."""
    return Resources(0, need.cpu_milli, need.memory, need.workers, need.gpu_memory, need.held_gpus)


def replay_pool(
    pool: GpuPool,
    free: Resources,
    run: WaitingRun,
    ends: list[tuple[float, Resources, Hold]],
    now: float,
) -> float | None:
    """As ``shadow.replay_shadow``, GPU by GPU: release work as it ends, earliest first,
    until ``run`` fits in the room and can be placed. None when that depends on work
    without a time limit."""
    need = without_gpus(run.ask())
    if need.fits_in(free) and pool.fits(run):
        return now
    pool = pool.copy()
    room = free
    for end, freed, hold in sorted(ends, key=lambda e: e[0]):
        if math.isinf(end):
            return None
        room = room + freed
        pool.release(hold)
        if need.fits_in(room) and pool.fits(run):
            return max(end, now)
    return None


def choose_victims_pool(
    head: WaitingRun,
    pool: GpuPool,
    room: Resources,
    candidates: list[RunningUnit],
) -> list[RunningUnit] | None:
    """As ``shadow.choose_victims`` (lowest priority first, among equals the newest;
    then every victim not needed dropped), with the head placed GPU by GPU."""
    need = without_gpus(head.ask())

    def fits(chosen: list[RunningUnit]) -> bool:
        trial, r = pool.copy(), room
        for unit in chosen:
            trial.release(unit_hold(unit))
            r = r + unit.resources
        return need.fits_in(r) and trial.fits(head)

    return fewest_victims(candidates, fits)


def fewest_victims(
    candidates: list[RunningUnit], fits: Callable[[list[RunningUnit]], bool]
) -> list[RunningUnit] | None:
    """The fewest, lowest-priority, most recently started ``candidates`` with which
    ``fits`` holds (taken in that order, then each one not needed dropped); None if
    even all of them are not enough."""
    order = sorted(candidates, key=lambda u: (u.priority, -u.started_at, u.unit_id))
    chosen: list[RunningUnit] = []
    for unit in order:
        if fits(chosen):
            break
        chosen.append(unit)
    if not fits(chosen):
        return None
    for unit in list(chosen):
        rest = [u for u in chosen if u is not unit]
        if fits(rest):
            chosen = rest
    return chosen


# ------------------------------------------------ whole GPUs as full shares
# The pool twin of a whole-GPU queue: tests/unit/test_planner_twins.py binds the whole-GPU
# rules to it, and bench/bench_planner.py --as-shares measures what planning every queue
# through the pool would cost.


def as_shared_run(run: WaitingRun, share: int) -> WaitingRun:
    """``run``'s whole-GPU ask as ``share`` bytes on as many GPUs (0: kept whole)."""
    n = run.worker.gpus
    if not (n and share) or run.gpu_share:
        return run
    worker = replace(run.worker, gpus=0, gpu_memory=share * n)  # still holds n for a quota
    return replace(run, worker=worker, gpu_share=share, gpu_count=n)


def as_shared_unit(unit: RunningUnit, share: int) -> RunningUnit:
    """``unit``'s whole GPUs held as ``share`` bytes on each (0: kept whole)."""
    if not (unit.gpus and share) or unit.gpu_share:
        return unit
    held_now = replace(unit.resources, gpus=0, gpu_memory=share * len(unit.gpus))
    return replace(unit, resources=held_now, gpu_share=share)


def as_full_shares(snapshot: Snapshot) -> Snapshot:
    """Every whole-GPU ask and hold as a whole GPU's memory on as many GPUs."""
    whole = snapshot.machine.whole_gpu
    return replace(
        snapshot,
        running=tuple(as_shared_unit(u, whole) for u in snapshot.running),
        waiting=tuple(as_shared_run(w, whole) for w in snapshot.waiting),
    )
