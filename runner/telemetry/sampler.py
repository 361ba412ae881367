"""The telemetry thread: every ``interval`` seconds (monotonic) one sample of every GPU
and every live run, kept in ring buffers holding the last hour.

Runs are keyed by their uid; a run's ring is dropped once it has no live worker. Given a
:class:`runner.telemetry.history.Recorder`, every sample is also written to the store
(in batches), and the rings start from the store's last hour: they survive a restart.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from runner.store.telemetry import GpuSample, RunSample
from runner.telemetry.gpus import GpuProcess, GpuReading, read_nvml, share_used, simulate
from runner.telemetry.history import Recorder
from runner.telemetry.idle import IdleTracker, gpu_use
from runner.telemetry.procs import TreeMeter, TreeUsage
from runner.telemetry.workers import LiveWorker

log = logging.getLogger("astraeus.telemetry")

HISTORY_SECONDS = 3600.0  # what the rings hold, at full rate


@dataclass(frozen=True, slots=True)
class RunReading:
    """One run's use, summed over its live workers; None where it was not measured."""

    run: str
    run_uid: str
    workspace: str
    gpus: tuple[int, ...]
    cpu_percent: float | None
    memory_bytes: int | None
    gpu_memory_bytes: int | None
    gpu_util: float | None  # the mean utilisation of the GPUs it holds


@dataclass(frozen=True, slots=True)
class Sample:
    time: float  # wall clock, for people
    gpus: tuple[GpuReading, ...]
    runs: tuple[RunReading, ...]


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def measure_trees(workers: list[LiveWorker], meter: TreeMeter) -> dict[str, TreeUsage]:
    """The workers' process trees, keyed by each worker's index in ``workers``."""
    roots = {f"{i}": w.root for i, w in enumerate(workers) if w.root is not None}
    groups = {f"{i}": w.cgroup for i, w in enumerate(workers) if w.cgroup is not None}
    return meter.measure(roots, groups)


def run_readings(
    workers: list[LiveWorker],
    gpus: list[GpuReading],
    processes: list[GpuProcess] | None,
    meter: TreeMeter,
    trees: dict[str, TreeUsage] | None = None,
    second: int | None = None,
) -> list[RunReading]:
    """Each run's reading. ``processes``: NVML's per-process GPU memory (None: simulated
    GPUs, where a run's GPU memory is what its GPUs have in use, or on GPUs it shares, what
    it uses of its shares at the whole second ``second``). ``trees``: the workers'
    trees as :func:`measure_trees` gave them this sample; None: measured here."""
    if trees is None:
        trees = measure_trees(workers, meter)
    by_index = {g.index: g for g in gpus}
    runs: dict[str, list[tuple[LiveWorker, Any]]] = {}
    for i, w in enumerate(workers):
        runs.setdefault(w.run_uid, []).append((w, trees.get(f"{i}")))
    found = []
    for uid, parts in runs.items():
        first = parts[0][0]
        held = tuple(sorted({g for w, _ in parts for g in w.gpus}))
        measured = [t for _, t in parts if t is not None]
        cpu = round(sum(t.cpu_percent for t in measured), 1) if measured else None
        memory = sum(t.memory_bytes for t in measured) if measured else None
        gpu_memory: int | None
        if processes is None and first.gpu_share and second is not None:
            gpu_memory = sum(share_used(uid, g, second, first.gpu_share) for g in held)
        elif processes is None:
            gpu_memory = _sum([by_index[g].memory_used for g in held if g in by_index])
        elif measured:
            pids = frozenset().union(*(t.pids for t in measured))
            gpu_memory = _sum([p.memory_used for p in processes if p.pid in pids]) or 0
        else:
            gpu_memory = None
        utils = [by_index[g].utilization for g in held if g in by_index]
        known = [u for u in utils if u is not None]
        util = round(sum(known) / len(known), 1) if known else None
        found.append(
            RunReading(first.run, uid, first.workspace, held, cpu, memory, gpu_memory, util)
        )
    return found


def rows_of(sample: Sample) -> tuple[list[GpuSample], list[RunSample]]:
    """A sample as the store's history keeps it."""
    gpus = [
        GpuSample(sample.time, g.index, None if g.utilization is None else float(g.utilization),
               g.memory_used, None if g.temperature is None else float(g.temperature),
               g.power_watts)
        for g in sample.gpus
    ]  # fmt: skip
    runs = [
        RunSample(sample.time, r.run_uid, r.workspace, r.gpus, r.cpu_percent, r.memory_bytes,
               r.gpu_memory_bytes, r.gpu_util)
        for r in sample.runs
    ]  # fmt: skip
    return gpus, runs


def _activity(workers: list[LiveWorker], trees: dict[str, TreeUsage]) -> dict[str, float | None]:
    """Run uid -> its CPU percent over its workers' trees; None when one was not measured."""
    found: dict[str, float | None] = {}
    for i, w in enumerate(workers):
        tree = trees.get(f"{i}")
        was = found.get(w.run_uid, 0.0)
        found[w.run_uid] = None if tree is None or was is None else was + tree.cpu_percent
    return found


class Sampler:
    """Samples on its own thread (:meth:`start`, :meth:`stop`) or when asked
    (:meth:`sample_once`, for tests). ``simulated``: the GPUs ``indexes`` are simulated;
    else NVML is read (``nvml`` replaces ``import pynvml``)."""

    def __init__(
        self,
        interval: float,
        indexes: tuple[int, ...],
        simulated: bool,
        live: Callable[[], list[LiveWorker]],
        *,
        nvml: Any = None,
        wall: Callable[[], float] = time.time,
        recorder: Recorder | None = None,
        idle: IdleTracker | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.recorder = recorder
        self.indexes, self.simulated = indexes, simulated
        self._live, self._nvml, self._wall = live, nvml, wall
        self.idle, self._monotonic = idle, monotonic  # idle: fed each sample's GPU use
        self._nvml_ready = False
        self._meter = TreeMeter()
        size = math.ceil(HISTORY_SECONDS / interval) + 1
        self._size = size
        self._gpu_rings: dict[int, deque[tuple[float, GpuReading]]] = {}
        self._run_rings: dict[str, deque[tuple[float, RunReading]]] = {}
        self._latest: Sample | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if recorder is not None:
            self._reload(recorder)

    def _reload(self, recorder: Recorder) -> None:
        """The rings from the store's last hour (the runs' until their first sample)."""
        since = self._wall() - HISTORY_SECONDS
        try:
            gpus = recorder.gpu_series(since, None)  # every row: at most the rings' size
            runs = recorder.run_series(None, since, None)
        except Exception:  # a history that cannot be read must not stop the daemon
            log.exception("telemetry: history not read")
            return
        simulated = self.simulated
        for index, rows in gpus.items():
            ring = self._gpu_rings.setdefault(index, deque(maxlen=self._size))
            for g in rows:
                util = None if g.utilization is None else round(g.utilization)
                temperature = None if g.temperature is None else round(g.temperature)
                reading = GpuReading(index, "", "", util, g.memory_used, None, temperature,
                                     g.power_watts, simulated)  # fmt: skip
                ring.append((g.at, reading))
        for uid, found in runs.items():
            run_ring = self._run_rings.setdefault(uid, deque(maxlen=self._size))
            for r in found:
                reading_ = RunReading("", uid, r.workspace, r.gpus, r.cpu_percent,
                                      r.memory_bytes, r.gpu_memory_bytes, r.gpu_util)  # fmt: skip
                run_ring.append((r.at, reading_))

    # ------------------------------------------------------------------ the thread

    def start(self) -> Sampler:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="astraeus-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._shutdown_nvml()
        if self.recorder is not None:
            self.recorder.flush()  # what was sampled is kept

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception:  # one bad sample must not end telemetry
                log.exception("telemetry sample failed")
            self._stop.wait(self.interval)

    # ------------------------------------------------------------------ one sample

    def sample_once(self) -> Sample:
        now, mono = self._wall(), self._monotonic()
        workers = self._live()
        processes: list[GpuProcess] | None = None
        trees = measure_trees(workers, self._meter)
        if self.simulated:  # the simulated GPUs follow what their runs do (their CPU)
            holders = {g: w.run_uid for w in workers for g in w.gpus}
            shares: dict[int, list[tuple[str, int]]] = {}
            for w in workers:
                for index in w.gpus if w.gpu_share else ():
                    shares.setdefault(index, []).append((w.run_uid, w.gpu_share))
            gpus = simulate(self.indexes, holders, now, _activity(workers, trees), shares)
        else:
            gpus, processes = self._read_nvml()
        runs = run_readings(workers, gpus, processes, self._meter, trees, int(now))
        if self.idle is not None:
            self.idle.observe(gpu_use(workers, gpus, processes, trees), mono)
        sample = Sample(now, tuple(gpus), tuple(runs))
        with self._lock:
            self._latest = sample
            for g in gpus:
                self._gpu_rings.setdefault(g.index, deque(maxlen=self._size)).append((now, g))
            live = {r.run_uid for r in runs}
            for uid in [u for u in self._run_rings if u not in live]:
                del self._run_rings[uid]
            for r in runs:
                self._run_rings.setdefault(r.run_uid, deque(maxlen=self._size)).append((now, r))
        if self.recorder is not None:
            self.recorder.add(now, *rows_of(sample))
        return sample

    def _read_nvml(self) -> tuple[list[GpuReading], list[GpuProcess]]:
        nvml = self._nvml
        try:
            if nvml is None:
                nvml = self._nvml = importlib.import_module("pynvml")
            if not self._nvml_ready:
                nvml.nvmlInit()
                self._nvml_ready = True
            return read_nvml(nvml)
        except (ImportError, OSError, getattr(nvml, "NVMLError", OSError)) as error:
            log.warning("telemetry: NVML cannot be read: %s", error)
            self._shutdown_nvml()
            return [], []

    def _shutdown_nvml(self) -> None:
        if self._nvml_ready and self._nvml is not None:
            with suppress(Exception):  # nothing useful to do when shutdown fails
                self._nvml.nvmlShutdown()
        self._nvml_ready = False

    # ------------------------------------------------------------------ reads

    def latest(self) -> Sample | None:
        with self._lock:
            return self._latest

    def gpu_history(self, index: int) -> list[tuple[float, GpuReading]]:
        with self._lock:
            return list(self._gpu_rings.get(index, ()))

    def run_history(self, run_uid: str) -> list[tuple[float, RunReading]]:
        with self._lock:
            return list(self._run_rings.get(run_uid, ()))
