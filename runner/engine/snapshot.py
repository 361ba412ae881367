"""From the store's rows to the planner's snapshot (and the parsed specs it needs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from runner.clock import Now
from runner.engine.dependencies import Dependencies, check_dependencies
from runner.engine.drain import NO_DRAIN, Drain, drained_snapshot
from runner.engine.holds import kept_out
from runner.engine.revocation import held_back, revoked
from runner.engine.settings import LoopSettings
from runner.model import Resources, RunSpec, RunState, TaskTemplate, WorkerState
from runner.planner.plan import Machine, RunningUnit, Snapshot, WaitingRun
from runner.reasons import Reason
from runner.runspec.parse import parse_spec
from runner.store.db import RunRow, Store, WorkerRow, latest_workers

FINISHED_KEPT = 64  # parsed specs of finished runs kept (the last asked for)


def _lean(spec: RunSpec) -> RunSpec:
    """``spec`` without the environment its submit carried: kilobytes a run that no plan
    reads (a start reads it from the store: runner/engine/starts.py)."""
    if not spec.task.submit_env:
        return spec
    return dataclasses.replace(spec, task=dataclasses.replace(spec.task, submit_env=()))


class SpecCache:
    """Parsed run specs by run name: a spec changes only when edited (astra update).
    They keep no submit environment (``_lean``).

    A name may be used again once its run is forgotten: the submit time tells them apart;
    an edit changes the stored text. Only unfinished runs' specs are kept for good (the
    planner's, bounded by max_submit_per_user); a finished run's is parsed from the store
    when asked, the last :data:`FINISHED_KEPT` of them kept, so finished runs kept for
    days cost the daemon no memory (a 60 KB argument each once did).
    """

    def __init__(self) -> None:
        self._specs: dict[str, RunSpec] = {}
        self._submitted: dict[str, tuple[float, str]] = {}
        # the row each spec was last asked for by: the store's queue cache hands out the
        # rows it kept, so the same row object is the same spec (told without comparing)
        self._rows: dict[str, tuple[RunRow, RunSpec]] = {}
        # a waiting gang's planner entry, made from its row and spec: the same row object
        # (the store's queue cache hands out the rows it kept) and spec give the same entry
        self._entries: dict[str, tuple[RunRow, RunSpec, tuple[int, int], WaitingRun]] = {}
        # runs whose stored spec could not be read as this tick planned: why (set aside)
        self.broken: dict[str, str] = {}
        self._finished: dict[str, tuple[tuple[float, str], RunSpec]] = {}  # oldest first

    def readable(self, run: RunRow) -> bool:
        """Its spec parsed (into the cache); False, with why in ``broken``, if it cannot be.
        A run whose spec cannot be read is set aside: never planned to start, its running
        workers still counted as holding what they hold."""
        try:
            self.get(run)
        except Exception as exc:
            self.broken[run.name] = f"{type(exc).__name__}: {exc}"
            return False
        self.broken.pop(run.name, None)
        return True

    def get(self, run: RunRow) -> RunSpec:
        if run.state in RunState.FINISHED:
            return self._finished_spec(run)
        kept = self._rows.get(run.name)
        if kept is not None and kept[0] is run:
            return kept[1]
        spec = self._specs.get(run.name)
        if spec is None or self._submitted[run.name] != (run.submitted_at, run.spec_text):
            spec = self._specs[run.name] = _lean(parse_spec(run.spec(), stored=True))
            self._submitted[run.name] = (run.submitted_at, run.spec_text)
        self._rows[run.name] = (run, spec)
        return spec

    def shown(self, run: RunRow) -> RunSpec:
        """The run's spec for what the API shows of it: one that cannot be read shows as
        asking for nothing (the planner sets the run aside: ``readable``), so one damaged
        row never fails a list of every run."""
        try:
            return self.get(run)
        except Exception:
            return RunSpec(run.name, TaskTemplate(image=None), run.workspace)

    def _finished_spec(self, run: RunRow) -> RunSpec:
        if run.name in self._specs:
            self.forget([run.name])  # it finished: out of the planner's cache
        key = (run.submitted_at, run.spec_text)
        kept = self._finished.pop(run.name, None)
        spec = kept[1] if kept is not None and kept[0] == key else None
        if spec is None:
            spec = _lean(parse_spec(run.spec(), stored=True))
        self._finished[run.name] = (key, spec)  # the newest last
        while len(self._finished) > FINISHED_KEPT:
            del self._finished[next(iter(self._finished))]
        return spec

    def gang(self, name: str) -> bool:
        spec = self._specs.get(name)
        return spec is None or spec.gang or spec.workers == 1

    def kept_entry(self, run: RunRow, sizes: tuple[int, int]) -> WaitingRun | None:
        """The entry made for this very row (so of its spec, a gang's), or None."""
        kept = self._entries.get(run.name)
        if kept is not None and kept[0] is run and kept[2] == sizes:
            return kept[3]
        return None

    def waiting_entry(
        self, run: RunRow, spec: RunSpec, machine: Machine, sizes: tuple[int, int]
    ) -> WaitingRun:
        """The planner's entry of a gang waiting whole (every worker to start); ``sizes``:
        the machine's (whole GPU, shard) memory, which a shared request is counted in."""
        kept = self._entries.get(run.name)
        if kept is not None and kept[0] is run and kept[1] is spec and kept[2] == sizes:
            return kept[3]
        entry = waiting_run(spec, run, machine, tuple(range(spec.workers)), sizes=sizes)
        self._entries[run.name] = (run, spec, sizes, entry)
        return entry

    def forget(self, names: Iterable[str]) -> None:
        for name in names:
            self._specs.pop(name, None)
            self._submitted.pop(name, None)
            self._rows.pop(name, None)
            self._entries.pop(name, None)
            self._finished.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        """Runs whose spec the planner's cache holds (the finished runs' not counted)."""
        return max(len(self._specs), len(self._rows), len(self._entries))

    def keep_only(self, names: Collection[str]) -> None:
        """Drop the planner's specs of runs not in ``names`` (the unfinished ones: a run
        that finished, was deleted or forgotten): the cache is as large as the queue,
        never as large as every run kept or ever submitted. (Copies of the keys are read:
        the API's threads add to the cache meanwhile.)"""
        for cache in (self._specs, self._entries, self._rows, self._submitted):
            for name in [n for n in list(cache) if n not in names]:
                cache.pop(name, None)


def unit_id(run: str, worker: int, gang: bool) -> str:
    return run if gang else f"{run}/{worker}"


def _started(w: WorkerRow, now: Now | None) -> float:
    """When it started, on today's wall clock (the monotonic reading moved onto it)."""
    return w.started_at if now is None else now.as_wall(w.started_at, w.started_mono, w.boot_id)


def _deadline(w: WorkerRow, now: Now | None) -> float:
    wall = w.stop_deadline or 0.0
    return wall if now is None else now.as_wall(wall, w.stop_deadline_mono, w.boot_id)


def _units(
    runs: dict[str, RunRow],
    live: list[WorkerRow],
    specs: SpecCache,
    now: Now | None,
    machine: Machine,
) -> list[RunningUnit]:
    whole, shard = machine.whole_gpu, machine.shard_bytes
    groups: dict[str, list[WorkerRow]] = {}
    for w in live:
        if w.run in runs:
            specs.readable(runs[w.run])  # parsed before it is asked whether it is a gang
            groups.setdefault(unit_id(w.run, w.worker, specs.gang(w.run)), []).append(w)
    units = []
    for uid, workers in sorted(groups.items()):
        run = runs[workers[0].run]
        spec = specs.get(run) if run.name not in specs.broken else None
        stopping = [w for w in workers if w.state == WorkerState.STOPPING]
        deadline = max(_deadline(w, now) for w in stopping) if stopping else None
        for_run = next((w.stopping_for for w in stopping if w.stopping_for), None)
        # a shared run holds its memory on each GPU its workers were given (the spec's
        # request); a whole GPU counts as the machine's smallest GPU's memory
        share = spec.task.share_bytes(shard) if spec is not None else 0  # unread: whole GPUs
        used = Resources()
        for w in workers:
            n = len(w.gpus)
            used = used + (
                Resources(0, w.cpu_milli, w.memory, 1, share * n, held_gpus=n)
                if share
                else Resources(n, w.cpu_milli, w.memory, 1, whole * n)
            )
        units.append(
            RunningUnit(
                uid, run.name, run.workspace, run.priority, used,
                tuple(g for w in workers for g in w.gpus),
                min(_started(w, now) for w in workers),
                spec.task.time_limit_seconds if spec is not None else None,
                len(workers), deadline, for_run.name if for_run else None, share,
            )
        )  # fmt: skip
    return units


def pending_workers(spec: RunSpec, workers: list[WorkerRow]) -> tuple[int, ...]:
    """Worker indices still to start: none live and not done.

    A gang starts whole: all of it, or nothing while any worker still lives.
    """
    latest = latest_workers(workers)
    live = {i for i, w in latest.items() if w.state in WorkerState.LIVE}
    if spec.gang or spec.workers == 1:
        return () if live else tuple(range(spec.workers))
    done = {i for i, w in latest.items() if w.state == WorkerState.DONE}
    return tuple(i for i in range(spec.workers) if i not in live and i not in done)


def waiting_run(
    spec: RunSpec,
    run: RunRow | None,
    machine: Machine,
    indices: tuple[int, ...],
    *,
    workspace: str = "",
    submitted_at: float = 0.0,
    sizes: tuple[int, int] | None = None,
) -> WaitingRun:
    """The planner's view of ``spec`` waiting (``run``'s, or one not yet submitted): what
    a worker asks, a whole GPU counted as the machine's smallest GPU's memory, a shared
    request with its memory on each of its GPUs. ``sizes``: the machine's (whole GPU,
    shard) memory, when the caller has them already."""
    whole, shard = sizes or (machine.whole_gpu, machine.shard_bytes)
    return WaitingRun(
        spec.name if run is None else run.name,
        workspace if run is None else run.workspace,
        spec.priority if run is None else run.priority,
        submitted_at if run is None else run.submitted_at,
        spec.worker_resources(whole, shard), indices, spec.task.time_limit_seconds,
        None if run is None else run.preempted_by, spec.task.share_bytes(shard),
        spec.task.gpus if spec.task.shared else 0,
    )  # fmt: skip


def _waiting(
    runs: list[RunRow],
    live: list[WorkerRow],
    specs: SpecCache,
    workers_of: dict[str, list[WorkerRow]],
    machine: Machine,
    resting: frozenset[str],
) -> list[WaitingRun]:
    has_live = {w.run for w in live}
    sizes = (machine.whole_gpu, machine.shard_bytes)
    waiting = []
    for run in runs:
        if run.stop_request is not None or run.name in specs.broken or run.name in resting:
            continue
        entry = specs.kept_entry(run, sizes)  # most of a long queue: made before, as below
        if entry is not None:
            if run.name not in has_live and run.state == RunState.QUEUED:
                waiting.append(entry)
            continue
        spec = specs.get(run)
        if specs.gang(run.name):
            if run.name in has_live or run.state != RunState.QUEUED:
                continue  # a gang starts whole, once nothing of it lives
            if spec.workers > 0:
                waiting.append(specs.waiting_entry(run, spec, machine, sizes))
            continue
        indices = pending_workers(spec, workers_of.get(run.name, []))
        if not indices:
            continue
        waiting.append(waiting_run(spec, run, machine, indices, sizes=sizes))
    return waiting


def build_snapshot(
    settings: LoopSettings,
    runs: list[RunRow],
    live: list[WorkerRow],
    specs: SpecCache,
    workers_of: dict[str, list[WorkerRow]] | None = None,
    now: Now | None = None,
    resting: frozenset[str] = frozenset(),
) -> Snapshot:
    """The planner's view: ``runs`` are the active runs, ``live`` their live workers;
    none of the ``resting`` runs' workers waits (a back-off: runner/engine/holds.py).

    With ``now``, running work's start and stop times are placed on the wall clock as it
    reads now, from their monotonic readings: a stepped wall clock moves them along.
    """
    by_name = {r.name: r for r in runs}
    return Snapshot(
        settings.machine,
        settings.workspaces,
        tuple(_units(by_name, live, specs, now, settings.machine)),
        tuple(_waiting(runs, live, specs, workers_of or {}, settings.machine, resting)),
    )


@dataclass(frozen=True)
class Plannable:
    """The store's active runs, sorted for the planner (the loop's snapshot phase)."""

    active: list[RunRow]  # every active run
    deps: Dependencies  # who waits for or fails on a dependency, and whose were met
    held: dict[str, Reason]  # queued runs kept out (owner revoked, held, begin time), with why
    runs: list[RunRow]  # the runs the planner sees: active, neither waiting nor held
    independent: dict[str, list[WorkerRow]]  # every worker row of each non-gang run of runs
    drain: Drain = NO_DRAIN  # the machine's drains (runner/engine/drain.py)
    next_begin: float | None = None  # the earliest begin time ahead (runner/engine/holds.py)
    resting: frozenset[str] = frozenset()  # running runs whose failed worker backs off
    wake_in: float | None = None  # seconds until the first back-off ends


def plannable(store: Store, settings: LoopSettings, specs: SpecCache, now: Now) -> Plannable:
    """What the planner is given of the store's runs now (their specs parsed into ``specs``);
    ``now``: both clocks, for begin times (calendar times) and back-offs (intervals)."""
    active = store.runs.all(active_only=True)
    if len(specs) > len(active):  # runs finished since: out of the planner's cache
        specs.keep_only({run.name for run in active})
    specs.broken.clear()
    readable = [run for run in active if specs.readable(run)]  # the others: set aside
    deps = check_dependencies(readable, specs.get, store.runs.states)
    held = revoked(readable, settings.authorise)
    kept = kept_out(readable, specs.get, now)
    held = {**held, **kept.reasons}  # held, or before its begin time: out of the order too
    runs = held_back(deps.plannable(active), held)  # a set-aside run's workers still hold
    independent = {r.name: store.workers.of(r.name) for r in runs if not specs.gang(r.name)}
    return Plannable(
        active, deps, held, runs, independent, Drain.of(store.drains.all()), kept.next_begin,
        kept.resting, kept.wake_in,
    )  # fmt: skip


def snapshot_now(store: Store, settings: LoopSettings, specs: SpecCache, now: Now) -> Snapshot:
    """The planner's view of the store right now, as the loop builds it (the API's
    explanations and estimates plan on it)."""
    return snapshot_and_owners(store, settings, specs, now)[0]


def snapshot_and_owners(
    store: Store, settings: LoopSettings, specs: SpecCache, now: Now
) -> tuple[Snapshot, dict[str, str]]:
    """``snapshot_now``, and the owner of each run in it, by name."""
    found = plannable(store, settings, specs, now)
    live = store.workers.live()
    snapshot = build_snapshot(
        settings, found.runs, live, specs, found.independent, now, found.resting
    )
    return drained_snapshot(snapshot, found.drain), {r.name: r.owner for r in found.runs}
