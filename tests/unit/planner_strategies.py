"""Random planner snapshots (hypothesis) as users make them, for the planner's invariants and
the reason codes' checks: snapshots(), what the planner is given, drains applied;
``drawn()``, a snapshot with the machine as it really is beside it."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from runner.engine.drain import Drain, drained_snapshot
from runner.model import GIB, Quota, Resources, Workspace
from runner.planner.plan import RunningUnit, Snapshot, WaitingRun
from runner.planner.types import SIMULATED_GPU_MEMORY
from runner.rows import DrainRow
from tests.unit.planner_builders import NOW, machine

WORKSPACES = ("a", "b", "c")
LIMITS = st.one_of(st.none(), st.sampled_from([60.0, 600.0, 3600.0, 7200.0]))
GPU = SIMULATED_GPU_MEMORY  # what a whole GPU counts as in GPU memory, as the engine counts it


def _maybe(values: st.SearchStrategy[int]) -> st.SearchStrategy[int | None]:
    return st.one_of(st.none(), values)


QUOTAS = st.builds(
    Quota,
    gpus=_maybe(st.integers(1, 6)),
    cpu_milli=_maybe(st.integers(0, 32).map(lambda n: n * 1000)),
    memory=_maybe(st.integers(0, 256).map(lambda n: n * GIB)),
    workers=_maybe(st.integers(0, 6)),
    gpu_memory=_maybe(st.integers(0, 8).map(lambda n: n * GPU)),
)


@dataclass(frozen=True)
class Drawn:
    """A drawn machine: ``truth`` as it is, with the drained GPUs' work holding only what
    it holds on the GPUs left (worked out here); ``given``, what the planner is given
    (``drained_snapshot`` of the whole snapshot)."""

    truth: Snapshot
    given: Snapshot
    drained: frozenset[int]


def _truth(snapshot: Snapshot, drained: frozenset[int]) -> Snapshot:
    kept = tuple(g for g in snapshot.machine.gpus if g not in drained)
    units = []
    for u in snapshot.running:
        on = tuple(g for g in u.gpus if g not in drained)
        r = u.resources
        held = Resources(0 if u.gpu_share else len(on), r.cpu_milli, r.memory, r.workers,
                         (u.gpu_share or GPU) * len(on))  # fmt: skip
        units.append(replace(u, gpus=on, resources=held))
    machine = replace(snapshot.machine, gpus=kept, gpu_memory=(GPU,) * len(kept))
    return Snapshot(machine, snapshot.workspaces, tuple(units), snapshot.waiting)


@st.composite
def drawn(draw: st.DrawFn) -> Drawn:
    whole = draw(_snapshots())
    drained = frozenset(draw(st.one_of(st.just(set()), st.sets(st.integers(0, 7), max_size=4))))
    drain = Drain.of(
        [DrainRow(target=str(g), reason="drawn", by="root", at=NOW) for g in sorted(drained)]
    )
    return Drawn(_truth(whole, drained), drained_snapshot(whole, drain), drained)


def snapshots() -> st.SearchStrategy[Snapshot]:
    """What the planner is given, drains applied."""
    return drawn().map(lambda d: d.given)


@st.composite
def _snapshots(draw: st.DrawFn) -> Snapshot:
    m = machine(gpus=8, cpus=32, memory_gib=256, grace=30)
    free_gpus = list(range(8))
    random.Random(draw(st.integers(0, 1000))).shuffle(free_gpus)
    running: list[RunningUnit] = []
    cpu_left, mem_left = 32_000, 256 * GIB
    for i in range(draw(st.integers(0, 6))):
        # one worker; a gang of two, each worker on its own GPUs (stopped as one); or the
        # next worker of the run before it when that run's workers are independent
        kind = draw(st.sampled_from(["one", "one", "gang", "independent"]))
        alone = running[-1] if running and "/" in running[-1].unit_id else None
        if kind == "independent" and alone is None:
            kind = "one"
        workers = 2 if kind == "gang" else 1
        gpus = draw(st.integers(0, min(4, len(free_gpus)) // workers)) * workers
        cpu = draw(st.integers(0, cpu_left // 1000)) * 1000
        mem = draw(st.integers(0, mem_left // GIB)) * GIB
        taken = tuple(sorted(free_gpus[:gpus]))
        del free_gpus[:gpus]
        cpu_left, mem_left = cpu_left - cpu, mem_left - mem
        stopping = draw(st.booleans()) and draw(st.booleans())
        stopping_for = draw(st.sampled_from([None, "w0", "w1"])) if stopping else None
        run, unit = f"r{i}", f"r{i}" if kind == "gang" else f"r{i}/0"
        workspace = draw(st.sampled_from(WORKSPACES))
        priority, started = draw(st.integers(-3, 3)), NOW - draw(st.integers(0, 7200))
        limit = draw(LIMITS)
        if kind == "independent" and alone is not None:
            run, workspace, priority, started, limit = (
                alone.run,
                alone.workspace,
                alone.priority,
                alone.started_at,
                alone.time_limit,
            )
            unit = f"{run}/{sum(u.run == run for u in running)}"
        running.append(
            RunningUnit(
                unit_id=unit,
                run=run,
                workspace=workspace,
                priority=priority,
                resources=Resources(gpus, cpu, mem, workers, gpus * GPU),
                gpus=taken,
                started_at=started,
                time_limit=limit,
                workers=workers,
                stop_deadline=NOW + 10 if stopping else None,
                stopping_for=stopping_for,
            )
        )
    waiting = [
        WaitingRun(
            name=f"w{i}",
            workspace=draw(st.sampled_from(WORKSPACES)),
            priority=draw(st.integers(-3, 3)),
            submitted_at=NOW - draw(st.integers(0, 1000)),
            worker=Resources(
                (gpus := draw(st.integers(0, 8))),
                draw(st.integers(0, 16)) * 1000,
                draw(st.integers(0, 64)) * GIB,
                1,
                gpus * GPU,
            ),
            workers=tuple(range(draw(st.integers(1, 2)))),
            time_limit=draw(LIMITS),
        )
        for i in range(draw(st.integers(0, 12)))
    ]
    # a run of independent workers some of which run: its other workers wait (preempted
    # or not started yet), asking what the running ones hold each
    for u in {u.run: u for u in running if "/" in u.unit_id}.values():
        if draw(st.booleans()):
            k = sum(v.run == u.run for v in running)
            per = Resources(u.resources.gpus, u.resources.cpu_milli, u.resources.memory, 1,
                            u.resources.gpu_memory)  # fmt: skip
            waiting.append(
                WaitingRun(
                    name=u.run, workspace=u.workspace, priority=u.priority,
                    submitted_at=u.started_at - draw(st.integers(0, 1000)), worker=per,
                    workers=(k,), time_limit=u.time_limit,
                )
            )  # fmt: skip
    used = {
        name: sum(u.resources.gpus for u in running if u.workspace == name) for name in WORKSPACES
    }
    workspaces = {
        name: Workspace(
            name,
            # any dimension; or just full of the workspace's own running work (in-quota
            # preemption)
            draw(st.one_of(st.none(), QUOTAS, st.just(Quota(gpus=used[name])))),
            weight=draw(st.sampled_from([0.5, 1.0, 2.0])),
            preempt_within_quota=draw(st.booleans()),
        )
        for name in WORKSPACES
    }
    return Snapshot(m, workspaces, tuple(running), tuple(waiting))


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
