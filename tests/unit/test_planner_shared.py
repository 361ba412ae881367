"""Shared GPUs in the planner: runs placed by memory on each GPU (runner/planner/pool.py),
with the planner's invariants kept GPU by GPU."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.model import GIB, Quota, Resources, Workspace
from runner.planner.plan import Machine, Plan, RunningUnit, Snapshot, WaitingRun, plan
from runner.planner.pool import GpuPool, start_hold, unit_hold
from runner.reasons import ReasonCode
from tests.unit.gpu_share_builders import SIZE, held, shared, shared_machine, whole
from tests.unit.planner_builders import HOUR, NOW


def _snap(*items: WaitingRun | RunningUnit, gpus: int = 2, quota: Quota | None = None) -> Snapshot:
    ws = {"default": Workspace("default", quota)} if quota else {}
    return Snapshot(
        shared_machine(gpus), ws,
        tuple(i for i in items if isinstance(i, RunningUnit)),
        tuple(i for i in items if isinstance(i, WaitingRun)),
    )  # fmt: skip


def _gpus(p: Plan) -> dict[str, tuple[int, ...]]:
    return {s.run: tuple(g for w in s.gpus for g in w) for s in p.starts}


def test_two_shared_runs_share_one_gpu_and_a_third_waits_for_memory() -> None:
    p = plan(_snap(shared("a", 20), shared("b", 30, at=1), shared("c", 40, at=2), gpus=1), NOW)
    assert _gpus(p) == {"a": (0,), "b": (0,)}
    assert p.reasons["c"].code == ReasonCode.GPU_MEMORY_WAIT
    assert p.reason("c") == (
        "Next to run (priority 0): waits for GPU memory: needs 40GiB on 1 GPU, the most free"
        " on one GPU is 30GiB; starts as running work ends"
    )


def test_shared_runs_pack_onto_the_gpu_already_shared() -> None:
    p = plan(_snap(held("x", (1,), 30), shared("a", 20)), NOW)
    assert _gpus(p) == {"a": (1,)}  # best fit: GPU 0 stays empty for whole runs


def test_a_whole_gpu_run_never_lands_on_a_shared_gpu_nor_the_reverse() -> None:
    p = plan(_snap(held("x", (0,), 10), whole("w", 2)), NOW)
    assert p.starts == () and p.head is not None and p.head.run == "w"
    p = plan(_snap(held("x", (0,), 10), whole("w", 1)), NOW)
    assert _gpus(p) == {"w": (1,)}
    p = plan(_snap(held("x", (0, 1)), shared("a", 1)), NOW)
    assert p.starts == () and p.reasons["a"].code == ReasonCode.GPU_MEMORY_WAIT


def test_a_shared_ask_larger_than_every_gpu_never_runs_and_blocks_nobody() -> None:
    p = plan(_snap(shared("big", 90), shared("small", 10, at=1), gpus=1), NOW)
    assert p.reasons["big"].code == ReasonCode.TOO_LARGE
    assert "asks for 90GiB on 1 GPU, the machine has no GPU that large" in (p.reason("big") or "")
    assert _gpus(p) == {"small": (0,)} and p.head is None


def test_a_shared_run_on_several_gpus_takes_its_memory_on_each() -> None:
    p = plan(_snap(held("x", (0,), 70), shared("a", 20, count=2), gpus=3), NOW)
    assert _gpus(p) == {"a": (1, 2)}


def test_the_head_preempts_the_fewest_lowest_newest_shared_runs() -> None:
    p = plan(
        _snap(
            held("old", (0,), 40, priority=-1, started=-2 * HOUR),
            held("new", (0,), 40, priority=-1, started=-HOUR),
            held("keep", (0,), 0, priority=5) if False else held("mid", (1,)),
            shared("urgent", 30, priority=1),
        ),
        NOW,
    )
    assert [v.run for v in p.preemptions] == ["new"]
    assert p.head is not None and p.head.run == "urgent"


def test_backfill_behind_a_shared_head_only_when_it_ends_before_its_shadow() -> None:
    items = (held("x", (0,), 60, limit=HOUR, started=0), shared("head", 70))
    p = plan(_snap(*items, shared("short", 20, limit=600, at=1), gpus=1), NOW)
    assert _gpus(p) == {"short": (0,)} and p.starts[0].backfill
    p = plan(_snap(*items, shared("long", 20, limit=2 * HOUR, at=1), gpus=1), NOW)
    assert p.starts == ()  # it would still hold 20 GiB when the head needs 70 of 80
    assert p.reasons["long"].code == ReasonCode.QUEUED_BEHIND
    p = plan(_snap(*items, shared("fits", 10, at=1), gpus=1), NOW)
    assert _gpus(p) == {"fits": (0,)}  # 70 + 10 fit in 80 once x has ended


def test_gpu_memory_quota_counts_a_whole_gpu_as_its_memory() -> None:
    quota = Quota(gpu_memory=100 * GIB)
    p = plan(_snap(held("x", (0,)), shared("a", 30), gpus=2, quota=quota), NOW)
    assert p.starts == () and p.reasons["a"].code == ReasonCode.QUOTA_WAIT
    assert (
        p.reason("a") == "Waits for namespace quota: gpu_memory 80GiB in use + 30GiB asked > 100GiB"
    )
    p = plan(_snap(held("x", (0,)), shared("a", 20), gpus=2, quota=quota), NOW)
    assert _gpus(p) == {"a": (1,)}


def test_queues_without_shared_runs_are_planned_as_before() -> None:
    snapshot = _snap(held("x", (0,)), whole("w", 1))
    p = plan(snapshot, NOW)
    assert _gpus(p) == {"w": (1,)} and p.starts[0].gpu_share == 0


# ------------------------------------------------------------- properties

LIMITS = st.one_of(st.none(), st.sampled_from([60.0, 600.0, 3600.0, 7200.0]))


@st.composite
def shared_snapshots(draw: st.DrawFn) -> Snapshot:
    n = 4
    m = shared_machine(n)
    pool = GpuPool(m.sizes())
    order = list(range(n))
    random.Random(draw(st.integers(0, 1000))).shuffle(order)
    running: list[RunningUnit] = []
    for i in range(draw(st.integers(0, 6))):
        prio, limit = draw(st.integers(-3, 3)), draw(LIMITS)
        stopping = draw(st.booleans()) and draw(st.booleans())
        started = -float(draw(st.integers(0, 7200)))
        deadline = 10.0 if stopping else None
        if draw(st.booleans()):
            gib = draw(st.sampled_from([10, 20, 30, 40]))
            fit = [g for g in order if pool.free_on(g) >= gib * GIB]
            if not fit:
                continue
            gpus = (fit[0],)
        else:
            empty = [g for g in order if g in pool.empty()]
            k = draw(st.integers(1, 2))
            if len(empty) < k:
                continue
            gib, gpus = 0, tuple(sorted(empty[:k]))
        unit = held(f"r{i}", gpus, gib, priority=prio, limit=limit, started=started,
                    stop_deadline=deadline)  # fmt: skip
        cores = draw(st.integers(0, 10)) * 1000  # at most 60 of the 64 cores in all
        unit = replace(unit, resources=replace(unit.resources, cpu_milli=cores))
        pool.take(unit_hold(unit))
        running.append(unit)
    waiting: list[WaitingRun] = []
    for i in range(draw(st.integers(0, 10))):
        prio, limit, at = draw(st.integers(-3, 3)), draw(LIMITS), draw(st.integers(0, 1000))
        if draw(st.booleans()):
            gib = draw(st.sampled_from([10, 20, 30, 40, 60, 80]))
            count = draw(st.integers(1, 2))
            waiting.append(shared(f"w{i}", gib, count=count, priority=prio, at=at, limit=limit,
                                  workers=draw(st.integers(1, 2))))  # fmt: skip
        else:
            waiting.append(whole(f"w{i}", draw(st.integers(0, 3)), priority=prio, at=at,
                                 limit=limit))  # fmt: skip
        w = waiting[-1]
        waiting[-1] = replace(
            w, worker=replace(w.worker, cpu_milli=draw(st.integers(0, 40)) * 1000)
        )
    quota = draw(st.one_of(st.none(), st.builds(
        Quota, gpu_memory=st.one_of(st.none(), st.sampled_from([100 * GIB, 200 * GIB])),
        gpus=st.one_of(st.none(), st.integers(0, 4)))))  # fmt: skip
    ws = {"default": Workspace("default", quota)} if quota else {}
    return Snapshot(m, ws, tuple(running), tuple(waiting))


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(shared_snapshots())
def test_no_gpu_memory_is_given_twice(snapshot: Snapshot) -> None:
    p = plan(snapshot, NOW)
    runs = {w.name: w for w in snapshot.waiting}
    pool = GpuPool(snapshot.machine.sizes())
    whole_gpus: list[int] = []
    for unit in snapshot.running:
        pool.take(unit_hold(unit))
        whole_gpus += unit_hold(unit)[0]
    for s in p.starts:
        run = runs[s.run]
        for worker in s.gpus:
            assert len(worker) == (run.gpu_count if run.gpu_share else run.worker.gpus)
            assert len(set(worker)) == len(worker)
        hold = start_hold(run, s.gpus)
        pool.take(hold)
        whole_gpus += hold[0]
    assert len(set(whole_gpus)) == len(whole_gpus)  # no GPU held whole twice
    for g, size in pool.size.items():
        assert pool.used[g] <= size  # no more memory promised on a GPU than it has
        assert not (g in pool.whole and pool.used[g])  # never whole and shared at once


@PROPERTY
@given(shared_snapshots())
def test_a_gpus_quota_counts_every_gpu_held_whole_or_shared(snapshot: Snapshot) -> None:
    """What the plan starts never takes the workspace past its ``gpus`` quota, a shared
    run counting each GPU it holds (once the GPUs were drawn without a quota, and seven
    shared runs went past ``gpus = 2``)."""
    quota = snapshot.workspaces["default"].quota if snapshot.workspaces else None
    if quota is None or quota.gpus is None:
        return
    p = plan(snapshot, NOW)
    runs = {w.name: w for w in snapshot.waiting}
    held = sum(len(u.gpus) for u in snapshot.running)
    started = sum(len(w) for s in p.starts for w in s.gpus)
    assert started == sum(runs[s.run].ask().held_gpus for s in p.starts)
    if held <= quota.gpus:
        assert held + started <= quota.gpus, (held, started, quota.gpus)
    else:
        assert started == 0


@PROPERTY
@given(shared_snapshots())
def test_nothing_started_delays_a_head_on_shared_gpus(snapshot: Snapshot) -> None:
    p = plan(snapshot, NOW)
    if p.head is None or p.head.preempting:
        return
    if any(v.for_run.name != p.head.run for v in p.preemptions):
        return  # an in-quota preemptor holds room the head alone would not see
    runs = {w.name: w for w in snapshot.waiting}
    as_running = tuple(
        RunningUnit(
            f"new-{s.run}",
            s.run,
            "default",
            runs[s.run].priority,
            runs[s.run].ask(),
            tuple(g for w in s.gpus for g in w),
            NOW,
            runs[s.run].time_limit,
            len(s.workers),
            gpu_share=runs[s.run].gpu_share,
        )
        for s in p.starts
    )
    alone = Snapshot(snapshot.machine, {}, snapshot.running + as_running, (runs[p.head.run],))
    p2 = plan(alone, NOW)
    assert p2.head is not None and p2.head.run == p.head.run
    assert p2.head.shadow == p.head.shadow


@PROPERTY
@given(shared_snapshots())
def test_shared_victims_are_strictly_lower_and_minimal(snapshot: Snapshot) -> None:
    p = plan(snapshot, NOW)
    if p.head is None or not p.preemptions:
        return
    units = {u.unit_id: u for u in snapshot.running}
    runs = {w.name: w for w in snapshot.waiting}
    head = runs[p.head.run]
    victims = [units[v.unit_id] for v in p.preemptions if v.for_run.name == head.name]
    if not victims:  # in-quota preemptions only (tests/unit/test_planner_shared_inquota.py)
        return
    assert all(v.priority < head.priority and not v.stopping for v in victims)
    pool, room = GpuPool(snapshot.machine.sizes()), snapshot.machine.capacity()
    for unit in snapshot.running:
        if not unit.stopping:
            pool.take(unit_hold(unit))
            room = room - unit.resources
    for s in p.starts:  # started ahead of the head; backfill comes after it
        if s.backfill:
            continue
        pool.take(start_hold(runs[s.run], s.gpus))
        room = room - runs[s.run].ask()

    def fits(chosen: list[RunningUnit]) -> bool:
        trial, r = pool.copy(), room
        for unit in chosen:
            trial.release(unit_hold(unit))
            r = r + unit.resources
        return head.ask().fits_in(r) and trial.fits(head)

    assert fits(victims)
    for v in victims:
        assert not fits([u for u in victims if u is not v])


def test_a_gpu_backfill_leaves_the_spare_cores_to_the_runs_behind_it() -> None:
    """Behind a head of 3 whole GPUs, a shared run takes the GPU the head will not need
    (replayed) and a CPU-only run the cores it will not need (the spare, less the shared
    run's cores): the spare counts what the replay does not."""
    x = RunningUnit("x", "x", "default", 0, Resources(2, 10_000, 0, 1, 2 * SIZE), (0, 1), NOW,
                    HOUR)  # fmt: skip
    head = WaitingRun("head", "default", 0, NOW - 1000, Resources(3, 40_000, 0, 1, 3 * SIZE),
                      (0,), None)  # fmt: skip
    g = WaitingRun("g", "default", 0, NOW - 999, Resources(0, 8_000, 0, 1, 10 * GIB), (0,),
                   None, gpu_share=10 * GIB, gpu_count=1)  # fmt: skip
    c = WaitingRun("c", "default", 0, NOW - 998, Resources(0, 4_000, 0, 1), (0,), None)
    p = plan(Snapshot(shared_machine(4), {}, (x,), (head, g, c)), NOW)
    assert p.head is not None and p.head.run == "head"
    assert {s.run for s in p.starts} == {"g", "c"} and all(s.backfill for s in p.starts)
    # the room at the shadow time: x's 10 cores back, 64 - 8 - 7 = 49 left for the head's 40
    enough = WaitingRun("c", "default", 0, NOW - 998, Resources(0, 7_000, 0, 1), (0,), None)
    p = plan(Snapshot(shared_machine(4), {}, (x,), (head, g, enough)), NOW)
    assert {s.run for s in p.starts} == {"g", "c"}
    too_many = WaitingRun("c", "default", 0, NOW - 998, Resources(0, 17_000, 0, 1), (0,), None)
    p = plan(Snapshot(shared_machine(4), {}, (x,), (head, g, too_many)), NOW)
    assert {s.run for s in p.starts} == {"g"}  # 64 - 8 - 17 would leave the head 39


def test_shared_runs_count_against_a_gpus_quota_per_gpu_held() -> None:
    """A shared run holds each of its GPUs for a ``gpus`` quota, however little memory
    it asks: seven 50 GiB runs on eight GPUs with ``gpus = 2`` start two, the others wait
    for the quota (they once started all seven)."""
    runs = [shared(f"s{i}", 50, at=i) for i in range(7)]
    p = plan(_snap(*runs, gpus=8, quota=Quota(gpus=2)), NOW)
    assert sorted(_gpus(p)) == ["s0", "s1"]
    waits = {name: r for name, r in p.reasons.items() if name.startswith("s") and name not in
             ("s0", "s1")}  # fmt: skip
    assert {r.code for r in waits.values()} == {ReasonCode.QUOTA_WAIT}
    assert "gpus 2 in use + 1 asked > 2" in str(waits["s2"])
    # held ones count too, whole or shared: one shared and one whole GPU held, quota 2
    busy = (held("a", (0,), 10), held("w", (1,)), shared("next", 10))
    p = plan(_snap(*busy, gpus=8, quota=Quota(gpus=2)), NOW)
    assert "next" not in _gpus(p) and p.reasons["next"].code is ReasonCode.QUOTA_WAIT
    # two GPUs asked shared by one run: two held
    p = plan(_snap(shared("pair", 10, count=2), gpus=8, quota=Quota(gpus=1)), NOW)
    assert p.reasons["pair"].code is ReasonCode.QUOTA_OVER


def test_behind_a_shared_head_cores_freed_by_its_shadow_time_are_room_it_does_not_need() -> None:
    """The promise is per resource, as with whole GPUs: a CPU-only run may take cores the
    head will not need at its shadow time, counting the cores that work ending by then
    gives back (the shared twin counted only the cores free now; found by
    tests/unit/test_planner_differential.py)."""
    busy = replace(held("busy", (0,), limit=60, started=0), resources=Resources(1, 40_000, 0, 1,
                   SIZE))  # fmt: skip
    notebook = held("notebook", (1,), 10)  # a shared GPU: every rule goes GPU by GPU
    head = replace(whole("head", 1, at=1), worker=Resources(1, 20_000, 0, 1, SIZE))
    cores = WaitingRun("cores", "default", 0, NOW - 1000 + 2, Resources(0, 20_000, 0, 1),
                       (0,), None)  # fmt: skip
    result = plan(_snap(busy, notebook, head, cores), NOW)
    assert result.head is not None and result.head.run == "head"
    assert result.head.shadow == NOW + 60 + 30  # busy ends, with the stop grace
    # free now: 24 of 64 cores (it takes 20); the head's 20 of the 64 free at the shadow
    # time leave 44 it never needs (counting only the cores free now left 4)
    assert [(s.run, s.backfill) for s in result.starts] == [("cores", True)]


def test_a_shared_gang_whose_workers_never_fit_together_blocks_nobody() -> None:
    machine = Machine((0, 1), 64_000, 512 * GIB, gpu_memory=(SIZE, 20 * GIB))
    gang = shared("gang", 50, workers=2)  # one worker fits on GPU 0; both never do
    small = shared("small", 10, at=1)
    p = plan(Snapshot(machine, {}, (), (gang, small)), NOW)
    assert p.reasons["gang"].code == ReasonCode.TOO_LARGE
    assert p.reason("gang") == (
        "Cannot run on this machine: its 2 workers ask for 50GiB on 1 GPU each, more than the"
        " machine's GPUs hold together. Ask for less."
    )
    assert _gpus(p) == {"small": (1,)} and p.head is None


@PROPERTY
@given(shared_snapshots(), st.data())
def test_the_head_could_start_on_the_empty_machine(snapshot: Snapshot, data: st.DataObject) -> None:
    """A run no set of this machine's GPUs could hold is never the head (it would block
    everything behind it for good), on GPUs of mixed sizes too."""
    m = snapshot.machine
    sizes = tuple(data.draw(st.sampled_from([20, 40, 80])) * GIB for _ in m.gpus)
    snapshot = replace(snapshot, machine=replace(m, gpu_memory=sizes))
    p = plan(snapshot, NOW)
    if p.head is None:
        return
    head = next(w for w in snapshot.waiting if w.name == p.head.run)
    assert GpuPool(snapshot.machine.sizes()).place(head) is not None
