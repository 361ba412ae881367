"""In-quota preemption while GPUs are shared (runner/planner/inquota.py): a namespace over
its quota only because of its own lower-priority running work preempts that work, judged
GPU by GPU (a shared run is a unit), never another namespace's, never more than needed."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.model import GIB, Quota, Resources, Workspace
from runner.planner.plan import Plan, RunningUnit, Snapshot, WaitingRun, plan
from runner.planner.pool import GpuPool, unit_hold
from runner.reasons import ReasonCode
from tests.unit.gpu_share_builders import held, shared, shared_machine, whole
from tests.unit.planner_builders import HOUR, NOW


def _snap(*items: WaitingRun | RunningUnit, gpus: int = 2, quota: Quota) -> Snapshot:
    ws = {
        "default": Workspace("default", quota, preempt_within_quota=True),
        "other": Workspace("other", None),
    }
    return Snapshot(
        shared_machine(gpus), ws,
        tuple(i for i in items if isinstance(i, RunningUnit)),
        tuple(i for i in items if isinstance(i, WaitingRun)),
    )  # fmt: skip


def _victims(p: Plan, run: str) -> list[str]:
    return [v.run for v in p.preemptions if v.for_run.name == run]


def test_a_shared_run_over_its_quota_preempts_its_newest_lowest_shared_run() -> None:
    p = plan(
        _snap(
            held("old", (0,), 30, priority=-1, started=-2 * HOUR),
            held("new", (0,), 30, priority=-1, started=-HOUR),
            held("mid", (1,), 30, priority=0),
            held("theirs", (1,), 10, priority=-5, ws="other"),
            shared("urgent", 40, priority=1),
            quota=Quota(gpu_memory=100 * GIB),
        ),
        NOW,
    )
    assert _victims(p, "urgent") == ["new"]  # 60 + 40 fit in 100; GPU 1 has 40 free
    assert p.starts == () and p.head is None
    assert p.reasons["urgent"].code == ReasonCode.PREEMPTING
    assert p.reason("urgent") == "Preempting 1 lower-priority worker(s) of new to start"
    assert "urgent" not in p.quota_waits


def test_the_victims_free_memory_where_the_run_can_be_placed() -> None:
    """Within the quota but not on one GPU: the victim is the one whose GPU then holds it,
    though another is newer."""
    p = plan(
        _snap(
            held("a", (0,), 50, priority=-1, started=-2 * HOUR),
            held("b", (1,), 20, priority=-1, started=-HOUR),
            held("c", (1,), 50, priority=-1, started=-3 * HOUR),
            shared("urgent", 50, priority=1),
            quota=Quota(gpu_memory=150 * GIB),
        ),
        NOW,
    )
    # 120 + 50 > 150: one victim frees the quota; only a 50 leaves a GPU with 50 free
    assert _victims(p, "urgent") == ["a"]


def test_a_whole_gpu_run_over_its_quota_empties_a_shared_gpu() -> None:
    p = plan(
        _snap(
            held("s1", (0,), 40, priority=-1, started=-2 * HOUR),
            held("s2", (0,), 30, priority=-1, started=-HOUR),
            held("w", (1,), priority=0),
            whole("big", 1, priority=1),
            quota=Quota(gpu_memory=160 * GIB),
        ),
        NOW,
    )
    assert sorted(_victims(p, "big")) == ["s1", "s2"]  # both, or GPU 0 is not empty


def test_never_another_namespaces_run_and_it_waits_when_its_own_do_not_do() -> None:
    p = plan(
        _snap(
            held("theirs", (0,), 60, priority=-5, ws="other"),
            held("mine", (1,), 30, priority=-1),
            held("mine2", (1,), 40, priority=2),
            shared("urgent", 40, priority=1),
            quota=Quota(gpu_memory=100 * GIB),
        ),
        NOW,
    )
    # freeing "mine" frees the quota but GPU 1 then has 40 free: it fits; "theirs" untouched
    assert _victims(p, "urgent") == ["mine"]
    p = plan(
        _snap(
            held("theirs", (0,), 60, priority=-5, ws="other"),
            held("mine", (1,), 30, priority=1),
            shared("urgent", 80, priority=1),
            quota=Quota(gpu_memory=100 * GIB),
        ),
        NOW,
    )
    assert p.preemptions == () and p.reasons["urgent"].code == ReasonCode.QUOTA_WAIT


def test_the_memory_held_for_a_preemptor_is_given_to_nobody_else() -> None:
    p = plan(
        _snap(
            held("low", (0,), 60, priority=-1),
            shared("urgent", 60, priority=1),
            replace(shared("other", 30, at=5), workspace="other"),
            gpus=1,
            quota=Quota(gpu_memory=80 * GIB),
        ),
        NOW,
    )
    assert _victims(p, "urgent") == ["low"]
    assert p.starts == ()  # GPU 0's memory is held for urgent, low's until it stops


def test_units_already_stopping_for_it_are_waited_for() -> None:
    low = held("low", (0,), 60, priority=-1, stop_deadline=10)
    low = replace(low, stopping_for="urgent")
    p = plan(_snap(low, shared("urgent", 60, priority=1), gpus=1,
                   quota=Quota(gpu_memory=80 * GIB)), NOW)  # fmt: skip
    assert p.preemptions == () and p.starts == ()
    assert p.reasons["urgent"].code == ReasonCode.STARTING


def test_behind_a_head_it_never_makes_the_head_later() -> None:
    """A head of the other namespace waits for x's end; an in-quota preemptor with no
    time limit would hold the GPU past it: it waits."""
    items = (
        held("x", (0,), 40, priority=5, limit=HOUR, started=0, ws="other"),
        held("low", (0,), 20, priority=-1, limit=HOUR, started=0),
        replace(whole("head", 1, priority=3), workspace="other"),
    )
    p = plan(_snap(*items, shared("mine", 30, priority=1), gpus=1,
                   quota=Quota(gpu_memory=40 * GIB)), NOW)  # fmt: skip
    assert p.head is not None and p.head.run == "head"
    assert _victims(p, "mine") == []
    p2 = plan(_snap(*items, shared("mine", 30, priority=1, limit=60), gpus=1,
                    quota=Quota(gpu_memory=40 * GIB)), NOW)  # fmt: skip
    assert _victims(p2, "mine") == ["low"]  # ends long before x: the head's shadow holds
    assert p2.head is not None and p2.head.shadow == p.head.shadow


# ------------------------------------------------------------- properties

LIMITS = st.one_of(st.none(), st.sampled_from([60.0, 3600.0]))


@st.composite
def own_snapshots(draw: st.DrawFn) -> Snapshot:
    """Running work of two namespaces on 3 GPUs; one run of ``default`` waits."""
    n = 3
    pool = GpuPool(shared_machine(n).sizes())
    running: list[RunningUnit] = []
    for i in range(draw(st.integers(0, 8))):
        ws = draw(st.sampled_from(["default", "default", "other"]))
        prio, started = draw(st.integers(-3, 3)), -float(draw(st.integers(0, 7200)))
        if draw(st.booleans()):
            gib = draw(st.sampled_from([10, 20, 30, 40]))
            fit = [g for g in range(n) if pool.free_on(g) >= gib * GIB]
            if not fit:
                continue
            gpus = (draw(st.sampled_from(fit)),)
        else:
            gib, empty = 0, pool.empty()
            if not empty:
                continue
            gpus = (draw(st.sampled_from(empty)),)
        unit = held(f"r{i}", gpus, gib, priority=prio, started=started, ws=ws,
                    limit=draw(LIMITS))  # fmt: skip
        pool.take(unit_hold(unit))
        running.append(unit)
    if draw(st.booleans()):
        run = shared("w", draw(st.sampled_from([10, 20, 40, 60, 80])), priority=draw(
            st.integers(-3, 3)), count=draw(st.integers(1, 2)))  # fmt: skip
    else:
        run = whole("w", draw(st.integers(1, 2)), priority=draw(st.integers(-3, 3)))
    quota = Quota(gpu_memory=draw(st.sampled_from([80, 100, 160, 200])) * GIB,
                  gpus=draw(st.sampled_from([None, 1, 2])))  # fmt: skip
    return _snap(*running, run, gpus=n, quota=quota)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(own_snapshots())
def test_in_quota_victims_are_its_own_lower_fewest_and_enough(snapshot: Snapshot) -> None:
    p = plan(snapshot, NOW)
    run = snapshot.waiting[0]
    quota = snapshot.workspaces["default"].quota
    assert quota is not None and quota.gpu_memory is not None
    units = {u.unit_id: u for u in snapshot.running}
    victims = [units[v.unit_id] for v in p.preemptions]
    assert len({v.unit_id for v in victims}) == len(victims)  # nothing stopped twice
    used = Resources()
    for u in snapshot.running:
        if u.workspace == "default":
            used = used + u.resources
    pool = GpuPool(snapshot.machine.sizes())
    for u in snapshot.running:
        pool.take(unit_hold(u))

    def within(chosen: list[RunningUnit]) -> bool:
        left = used
        for u in chosen:
            left = left - u.resources
        after = left + run.total
        return after.gpu_memory <= quota.gpu_memory and (
            quota.gpus is None or after.held_gpus <= quota.gpus  # every GPU held counts
        )

    def fits(chosen: list[RunningUnit]) -> bool:
        trial = pool.copy()
        for u in chosen:
            trial.release(unit_hold(u))
        return within(chosen) and trial.fits(run)

    alone = run.total.gpu_memory <= quota.gpu_memory and run.total.held_gpus <= (quota.gpus or 9)
    if within([]) or not alone:  # within its quota (the head's rules), or never within it
        return
    assert all(v.workspace == "default" for v in victims)  # never another namespace's
    assert all(v.priority < run.priority and not v.stopping for v in victims)
    if victims:
        assert fits(victims)
        for v in victims:  # never more than needed
            assert not fits([u for u in victims if u is not v])
        assert p.starts == () and p.reasons["w"].code == ReasonCode.PREEMPTING
    else:  # it waits only when even all its lower-priority work would not do
        assert p.reasons["w"].code == ReasonCode.QUOTA_WAIT
        candidates = [u for u in snapshot.running
                      if u.workspace == "default" and u.priority < run.priority]  # fmt: skip
        assert not fits(candidates)
