"""Idle GPUs: how busy each run's GPUs are, and since when a run's have done nothing.

:func:`gpu_use` reads one sample: for each run holding GPUs, the utilisation of its
busiest GPU, as the run itself uses it. Per GPU that is the run's processes' share where
NVML reports utilisation per process (the run's process tree, mapped by pid), else the
GPU's own utilisation when the run holds the GPU whole (no other run on it), else unknown.
One unknown GPU makes the run's use unknown: a run is never called idle on a guess.

:class:`IdleTracker` keeps, per run, the stretch of samples at or under the threshold:
from the first such sample (monotonic) to the last. A busy or unknown sample ends the
stretch; a run that no longer holds GPUs is dropped. The sampler's thread feeds it, the
loop reads it (runner/engine/idle.py decides what an idle run gets); it holds a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from runner.telemetry.gpus import GpuProcess, GpuReading
from runner.telemetry.procs import TreeUsage
from runner.telemetry.workers import LiveWorker

__all__ = ["IdleTracker", "Stretch", "gpu_use"]


def gpu_use(
    workers: list[LiveWorker],
    gpus: list[GpuReading],
    processes: list[GpuProcess] | None,
    trees: Mapping[str, TreeUsage],
) -> dict[str, float | None]:
    """Run uid -> the utilisation (%) of its busiest GPU, None when unknown; runs holding no
    GPU are left out. ``trees``: the workers' trees keyed by their index in ``workers``."""
    holders: dict[int, set[str]] = {}
    held: dict[str, set[int]] = {}
    pids: dict[str, set[int] | None] = {}
    for i, w in enumerate(workers):
        for g in w.gpus:
            holders.setdefault(g, set()).add(w.run_uid)
            held.setdefault(w.run_uid, set()).add(g)
        tree = trees.get(f"{i}")
        so_far = pids.get(w.run_uid, set())
        pids[w.run_uid] = None if tree is None or so_far is None else so_far | tree.pids
    whole = {g.index: g.utilization for g in gpus}
    shares: dict[int, dict[int, int]] = {}  # GPU -> pid -> its share, where NVML tells
    for p in processes or ():
        if p.utilization is not None:
            per = shares.setdefault(p.gpu, {})
            per[p.pid] = per.get(p.pid, 0) + p.utilization
    found: dict[str, float | None] = {}
    for uid, indexes in held.items():
        values: list[float | None] = []
        mine = pids.get(uid)
        for g in sorted(indexes):
            if g in shares:
                values.append(
                    None
                    if mine is None
                    else float(sum(u for p, u in shares[g].items() if p in mine))
                )
            elif holders[g] == {uid} and (util := whole.get(g)) is not None:
                values.append(float(util))
            else:  # shared with another run and no per-process share, or not read
                values.append(None)
        known = [v for v in values if v is not None]
        found[uid] = max(known) if known and len(known) == len(values) else None
    return found


@dataclass(frozen=True, slots=True)
class Stretch:
    """Samples at or under the threshold, on the monotonic clock: the first and the last."""

    since: float
    last: float

    @property
    def seconds(self) -> float:
        return self.last - self.since


class IdleTracker:
    """Each run's current stretch of idle samples. ``threshold``: percent, at or under
    which a run's busiest GPU counts as doing nothing."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._stretches: dict[str, Stretch] = {}
        self._lock = threading.Lock()

    def observe(self, use: Mapping[str, float | None], mono: float) -> None:
        """One sample at ``mono``: ``use`` as :func:`gpu_use` gives it."""
        with self._lock:
            kept: dict[str, Stretch] = {}
            for uid, value in use.items():
                if value is None or value > self.threshold:
                    continue  # busy, or not known: the stretch ends
                was = self._stretches.get(uid)
                kept[uid] = Stretch(mono if was is None else was.since, mono)
            self._stretches = kept

    def stretches(self) -> dict[str, Stretch]:
        """Run uid -> its stretch, for the runs idle at the last sample."""
        with self._lock:
            return dict(self._stretches)
