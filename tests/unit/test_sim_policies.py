"""The baseline schedulers of ``astra sim`` (runner/sim/policies.py): fifo, greedy, easy.

Snapshots are made here directly: a machine of 4 GPUs of 80 GiB, running units and
waiting runs counted as the engine counts them (a whole GPU as the smallest GPU's memory,
a shared run as its memory on each of its GPUs)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.model import GIB, Resources
from runner.planner.pool import GpuPool
from runner.planner.types import Machine, Plan, RunningUnit, Snapshot, WaitingRun
from runner.reasons import ReasonCode
from runner.sim.policies import POLICIES, Policy, easy, fifo, greedy

NOW = 1_790_000_000.0
HOUR = 3600.0
GRACE = 30.0
GPU = 80 * GIB
ALL = (fifo, greedy, easy)


# ------------------------------------------------------------------ builders


def machine(gpus: int = 4, cpus: int = 64, memory_gib: int = 512, sizes_gib: int = 80) -> Machine:
    return Machine(
        tuple(range(gpus)),
        cpus * 1000,
        memory_gib * GIB,
        stop_grace=GRACE,
        gpu_memory=(sizes_gib * GIB,) * gpus,
    )


def waiting(
    name: str,
    *,
    gpus: int = 0,
    share_gib: float = 0,
    cpus: float = 0,
    memory_gib: float = 0,
    workers: int = 1,
    priority: int = 0,
    at: float = 0,
    limit: float | None = None,
    whole: int = GPU,
) -> WaitingRun:
    """``gpus`` whole GPUs per worker, or with ``share_gib`` that much on each of them."""
    share = int(share_gib * GIB)
    worker = Resources(
        0 if share else gpus,
        int(cpus * 1000),
        int(memory_gib * GIB),
        1,
        (share or whole) * gpus,
        held_gpus=gpus,
    )
    return WaitingRun(
        name, "default", priority, NOW - 1000 + at, worker, tuple(range(workers)), limit,
        gpu_share=share, gpu_count=gpus if share else 0,
    )  # fmt: skip


def running(
    name: str,
    *,
    gpus: tuple[int, ...] = (),
    share_gib: float = 0,
    cpus: float = 0,
    memory_gib: float = 0,
    workers: int = 1,
    priority: int = 0,
    started: float = -HOUR / 2,
    limit: float | None = None,
    stop_deadline: float | None = None,
    whole: int = GPU,
) -> RunningUnit:
    share = int(share_gib * GIB)
    held = Resources(
        0 if share else len(gpus),
        int(cpus * 1000),
        int(memory_gib * GIB),
        workers,
        (share or whole) * len(gpus),
        held_gpus=len(gpus),
    )
    deadline = None if stop_deadline is None else NOW + stop_deadline
    return RunningUnit(
        name, name, "default", priority, held, gpus, NOW + started, limit, workers, deadline,
        gpu_share=share,
    )  # fmt: skip


def snap(*runs: WaitingRun | RunningUnit, m: Machine | None = None) -> Snapshot:
    return Snapshot(
        m or machine(),
        {},
        tuple(r for r in runs if isinstance(r, RunningUnit)),
        tuple(r for r in runs if isinstance(r, WaitingRun)),
    )


def started(p: Plan) -> list[str]:
    return [s.run for s in p.starts]


def text(p: Plan, run: str) -> str:
    found = p.reason(run)
    assert found is not None, f"{run} has no reason"
    return found


def code(p: Plan, run: str) -> ReasonCode:
    return p.reasons[run].code


# --------------------------------------------------------------- fifo, greedy


def test_fifo_blocks_behind_a_run_that_does_not_fit_while_greedy_passes_it() -> None:
    s = snap(
        running("a", gpus=(0, 1, 2), limit=HOUR),
        waiting("big", gpus=2, at=0),
        waiting("small", gpus=1, at=1),
    )
    f = fifo(s, NOW)
    assert started(f) == []
    assert f.head is not None and f.head.run == "big"
    assert code(f, "big") is ReasonCode.HEAD_WAITS
    assert code(f, "small") is ReasonCode.QUEUED_BEHIND
    assert text(f, "small").startswith("Waiting for room: queued behind big, which starts by")

    g = greedy(s, NOW)
    assert started(g) == ["small"]
    assert g.starts[0].gpus == ((3,),) and g.starts[0].backfill
    assert g.starts[0].why.code is ReasonCode.BACKFILLED
    assert g.head is None
    assert text(g, "big") == "Waiting for room: asks for gpus 2, 1 free"
    assert code(g, "big") is ReasonCode.HEAD_WAITS


def test_fifo_takes_submission_order_greedy_priority_order() -> None:
    s = snap(
        waiting("old-low", gpus=3, priority=0, at=0),
        waiting("new-high", gpus=3, priority=5, at=10),
        waiting("mid", gpus=1, priority=1, at=5),
    )
    f = fifo(s, NOW)
    assert f.order == ("old-low", "mid", "new-high")
    assert started(f) == ["old-low", "mid"]
    assert f.head is not None and f.head.run == "new-high"

    g = greedy(s, NOW)
    assert g.order == ("new-high", "mid", "old-low")  # the started ones too, as plan's order
    assert started(g) == ["new-high", "mid"]
    assert [st.why.code for st in g.starts] == [ReasonCode.FITS, ReasonCode.FITS]
    assert not any(st.backfill for st in g.starts)


def test_greedy_among_equal_priorities_takes_the_older_first() -> None:
    s = snap(waiting("b", gpus=4, at=1), waiting("a", gpus=4, at=1), waiting("c", gpus=4, at=0))
    assert greedy(s, NOW).order == ("c", "a", "b")
    assert started(greedy(s, NOW)) == ["c"]


def test_a_run_larger_than_the_machine_blocks_nobody() -> None:
    s = snap(waiting("huge", gpus=5, at=0), waiting("next", gpus=1, at=1))
    for policy in ALL:
        p = policy(s, NOW)
        assert started(p) == ["next"]
        assert code(p, "huge") is ReasonCode.TOO_LARGE
        assert p.head is None


def test_a_shared_run_no_set_of_gpus_holds_is_too_large() -> None:
    m = Machine((0, 1), 64000, 512 * GIB, gpu_memory=(80 * GIB, 20 * GIB))
    s = snap(waiting("two", share_gib=50, gpus=1, workers=2), m=m)
    for policy in ALL:
        assert code(policy(s, NOW), "two") is ReasonCode.TOO_LARGE


# ---------------------------------------------------------------------- easy


def test_easy_head_shadow_is_when_enough_running_work_ends() -> None:
    s = snap(
        running("a", gpus=(0, 1), limit=HOUR),  # ends at NOW + 1800 + grace
        running("b", gpus=(2,), limit=2 * HOUR),  # ends at NOW + 5400 + grace
        waiting("big", gpus=4),
    )
    p = easy(s, NOW)
    assert p.head is not None and p.head.run == "big"
    assert p.head.shadow == NOW + 1.5 * HOUR + GRACE
    assert p.head.held_gpus == (3,)
    assert "starts by" in text(p, "big") and code(p, "big") is ReasonCode.HEAD_WAITS


def test_easy_shadow_counts_a_stopping_unit_at_its_deadline() -> None:
    s = snap(
        running("a", gpus=(0, 1, 2), stop_deadline=20),  # no limit, but stopping
        waiting("big", gpus=4),
    )
    p = easy(s, NOW)
    assert p.head is not None and p.head.shadow == NOW + 20


def test_easy_shadow_is_unknown_behind_work_without_a_limit() -> None:
    s = snap(running("a", gpus=(0, 1, 2)), waiting("big", gpus=4))
    p = easy(s, NOW)
    assert p.head is not None and p.head.shadow is None
    assert text(p, "big").endswith("without a time limit ends")


def test_easy_backfills_a_short_run_and_refuses_one_that_would_delay_the_head() -> None:
    s = snap(
        running("a", gpus=(0, 1, 2), limit=HOUR),  # shadow: NOW + 1800 + grace
        waiting("big", gpus=4, priority=5),
        waiting("short", gpus=1, limit=600, at=1),
        waiting("long", gpus=1, limit=2 * HOUR, at=0),
    )
    p = easy(s, NOW)
    assert started(p) == ["short"]
    assert p.starts[0].backfill and p.starts[0].gpus == ((3,),)
    assert p.starts[0].why.code is ReasonCode.BACKFILLED
    assert "ends it before big starts" in p.starts[0].why.render()
    assert code(p, "long") is ReasonCode.QUEUED_BEHIND
    assert p.head is not None and p.head.shadow == NOW + HOUR / 2 + GRACE
    assert p.order == ("big", "long", "short")


def test_easy_run_ending_just_at_the_shadow_counts_its_grace() -> None:
    s = snap(running("a", gpus=(0, 1, 2), limit=HOUR), waiting("big", gpus=4, priority=5))
    exact = waiting("exact", gpus=1, limit=HOUR / 2)  # ends at NOW + 1800 + grace: the shadow
    over = waiting("over", gpus=1, limit=HOUR / 2 + 1)
    assert started(easy(replace(s, waiting=(*s.waiting, exact)), NOW)) == ["exact"]
    assert started(easy(replace(s, waiting=(*s.waiting, over)), NOW)) == []


def test_easy_run_without_limit_uses_only_the_spare_room() -> None:
    s = snap(
        running("a", gpus=(0, 1), limit=HOUR),  # at the shadow 4 free, the head needs 3
        waiting("head", gpus=3, priority=5),
        waiting("free-1", gpus=1, at=0),
        waiting("free-2", gpus=1, at=1),
        waiting("cpu-only", cpus=8, at=2),
    )
    p = easy(s, NOW)
    assert started(p) == ["free-1", "cpu-only"]
    assert "room head does not need" in p.starts[0].why.render()
    assert code(p, "free-2") is ReasonCode.QUEUED_BEHIND
    assert p.head is not None and p.head.shadow == NOW + HOUR / 2 + GRACE


def test_easy_spare_room_is_per_resource() -> None:
    s = snap(
        running("a", gpus=(0, 1), cpus=48, limit=HOUR),
        waiting("head", gpus=3, cpus=60, priority=5),  # at the shadow: 4 CPUs spare
        waiting("wide", gpus=1, cpus=8, at=0),
        waiting("narrow", gpus=1, cpus=4, at=1),
    )
    assert started(easy(s, NOW)) == ["narrow"]


def test_easy_behind_an_unknown_shadow_only_room_free_now_beyond_the_head() -> None:
    s = snap(
        running("a", gpus=(0, 1, 2), cpus=8),  # no limit: the shadow is unknown
        waiting("big", gpus=4, cpus=8, priority=5),
        waiting("gpu", gpus=1, limit=60, at=0),  # it would take the head's free GPU
        waiting("cpu", cpus=40, at=1),  # 56 free, the head needs 8: 48 spare
        waiting("cpu-2", cpus=16, at=2),  # 8 left
    )
    p = easy(s, NOW)
    assert started(p) == ["cpu"]
    assert code(p, "gpu") is ReasonCode.QUEUED_BEHIND
    assert code(p, "cpu-2") is ReasonCode.QUEUED_BEHIND


def test_easy_has_one_head_only() -> None:
    s = snap(
        running("a", gpus=(0, 1, 2), limit=HOUR),
        waiting("big", gpus=4, priority=5),
        waiting("second", gpus=2, priority=4),
    )
    p = easy(s, NOW)
    assert p.head is not None and p.head.run == "big"
    assert code(p, "second") is ReasonCode.QUEUED_BEHIND
    assert text(p, "second").startswith("Waiting for room: queued behind big")


# -------------------------------------------------------------- placement


@pytest.mark.parametrize("policy", ALL)
def test_shared_runs_pack_onto_one_gpu_by_memory(policy: Policy) -> None:
    s = snap(
        waiting("s1", share_gib=30, gpus=1, at=0),
        waiting("s2", share_gib=30, gpus=1, at=1),
        waiting("s3", share_gib=30, gpus=1, at=2),
        m=machine(gpus=2),
    )
    p = policy(s, NOW)
    assert [(st.run, st.gpus, st.gpu_share) for st in p.starts] == [
        ("s1", ((0,),), 30 * GIB),
        ("s2", ((0,),), 30 * GIB),
        ("s3", ((1,),), 30 * GIB),
    ]


@pytest.mark.parametrize("policy", ALL)
def test_shared_run_joins_a_running_shared_gpu_and_whole_runs_take_only_empty_ones(
    policy: Policy,
) -> None:
    s = snap(
        running("on-0", share_gib=40, gpus=(0,), limit=HOUR),
        waiting("s", share_gib=40, gpus=1, at=0),
        waiting("w", gpus=2, at=1),
        waiting("w2", gpus=2, at=2),
        m=machine(gpus=3),
    )
    p = policy(s, NOW)
    assert [(st.run, st.gpus) for st in p.starts] == [("s", ((0,),)), ("w", ((1, 2),))]
    assert "w2" in p.reasons


@pytest.mark.parametrize("policy", ALL)
def test_multi_worker_runs_get_one_gpu_tuple_per_worker(policy: Policy) -> None:
    s = snap(
        waiting("gang", gpus=2, workers=2, at=0),
        waiting("shared", share_gib=50, gpus=1, workers=2, at=1),
        m=machine(gpus=6),
    )
    p = policy(s, NOW)
    by_run = {st.run: st for st in p.starts}
    assert by_run["gang"].workers == (0, 1) and by_run["gang"].gpus == ((0, 1), (2, 3))
    assert by_run["shared"].gpus == ((4,), (5,))


def test_independent_workers_left_to_start_keep_their_indices() -> None:
    run = replace(waiting("indep", gpus=1, workers=3), workers=(1, 2))
    assert run.ask().gpus == 2
    s = snap(run, running("x", gpus=(0,)))
    p = greedy(s, NOW)
    assert p.starts[0].workers == (1, 2) and p.starts[0].gpus == ((1,), (2,))


@pytest.mark.parametrize("policy", ALL)
def test_a_stopping_unit_still_holds_its_room(policy: Policy) -> None:
    s = snap(running("stopping", gpus=(0, 1, 2, 3), stop_deadline=10), waiting("w", gpus=1))
    p = policy(s, NOW)
    assert started(p) == [] and "w" in p.reasons


def test_cpu_memory_and_worker_slots_bound_the_starts() -> None:
    m = replace(machine(cpus=16, memory_gib=64), max_workers=3)
    s = snap(
        running("r", cpus=8, memory_gib=16),  # 8 CPUs, 48 GiB and 2 worker slots free
        waiting("cpu", cpus=9, at=0),
        waiting("mem", memory_gib=49, at=1),
        waiting("ok", cpus=4, memory_gib=16, workers=2, at=2),
        waiting("slot", at=3),
        m=m,
    )
    p = greedy(s, NOW)
    assert started(p) == ["ok"]
    assert text(p, "cpu") == "Waiting for room: asks for cpu_cores 9, 8 free"
    assert text(p, "mem") == "Waiting for room: asks for memory 49GiB, 48GiB free"
    assert text(p, "slot") == "Waiting for room: asks for workers 1, 0 free"
    assert started(fifo(s, NOW)) == []


@pytest.mark.parametrize("policy", ALL)
def test_nothing_is_ever_preempted(policy: Policy) -> None:
    s = snap(
        running("low", gpus=(0, 1, 2, 3), priority=-10),
        waiting("urgent", gpus=4, priority=100),
    )
    p = policy(s, NOW)
    assert p.preemptions == () and p.starts == ()
    assert p.quota_waits == frozenset()
    assert "urgent" in p.reasons


def test_policies_by_name() -> None:
    assert dict(POLICIES) == {"fifo": fifo, "greedy": greedy, "easy": easy}


# -------------------------------------------------------------- invariants

SIZES = (40 * GIB, 80 * GIB)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    """A machine with running work placed on it as it could be, and runs waiting."""
    n = draw(st.integers(1, 6))
    sizes = tuple(draw(st.sampled_from(SIZES)) for _ in range(n))
    m = Machine(
        tuple(range(n)), draw(st.integers(4, 32)) * 1000, draw(st.integers(16, 128)) * GIB,
        stop_grace=GRACE, max_workers=draw(st.integers(1, 12)), gpu_memory=sizes,
    )  # fmt: skip
    whole = m.whole_gpu
    pool = GpuPool(m.sizes())
    cpu, memory, slots = m.cpu_milli, m.memory, m.max_workers
    units = []
    for i in range(draw(st.integers(0, 5))):
        ask = _ask(draw, f"r{i}", whole)
        placed = pool.place(ask)
        c, mem = ask.total.cpu_milli, ask.total.memory
        if placed is None or c > cpu or mem > memory or len(ask.workers) > slots:
            continue
        cpu, memory, slots = cpu - c, memory - mem, slots - len(ask.workers)
        stopping = draw(st.booleans()) and draw(st.booleans())
        units.append(
            RunningUnit(
                ask.name, ask.name, "default", ask.priority, ask.total,
                tuple(g for gpus in placed for g in gpus),
                NOW - draw(st.floats(0, 2 * HOUR)), ask.time_limit, len(ask.workers),
                NOW + 10 if stopping else None, gpu_share=ask.gpu_share,
            )
        )  # fmt: skip
    queue = [_ask(draw, f"w{i}", whole) for i in range(draw(st.integers(0, 8)))]
    return Snapshot(m, {}, tuple(units), tuple(queue))


def _ask(draw: st.DrawFn, name: str, whole: int) -> WaitingRun:
    shared = draw(st.booleans())
    gpus = draw(st.integers(1 if shared else 0, 3))
    share = draw(st.sampled_from((10, 30, 50, 70))) * GIB if shared else 0
    worker = Resources(
        0 if shared else gpus,
        draw(st.integers(0, 6)) * 1000,
        draw(st.integers(0, 24)) * GIB,
        1,
        (share or whole) * gpus,
        held_gpus=gpus,
    )
    limit = draw(st.one_of(st.none(), st.sampled_from((60.0, 1800.0, HOUR, 3 * HOUR))))
    return WaitingRun(
        name, "default", draw(st.integers(0, 3)), NOW - draw(st.floats(0, 1000)), worker,
        tuple(range(draw(st.integers(1, 3)))), limit,
        gpu_share=share, gpu_count=gpus if shared else 0,
    )  # fmt: skip


def _as_running(s: Snapshot, p: Plan, now: float) -> tuple[RunningUnit, ...]:
    """The snapshot's running work and the plan's starts, as the next snapshot has them."""
    by_name = {w.name: w for w in s.waiting}
    new = []
    for start in p.starts:
        run = by_name[start.run]
        new.append(
            RunningUnit(
                run.name, run.name, run.workspace, run.priority, run.total,
                tuple(g for gpus in start.gpus for g in gpus), now, run.time_limit,
                len(run.workers), gpu_share=run.gpu_share,
            )
        )  # fmt: skip
    return (*s.running, *new)


def check_plan(s: Snapshot, p: Plan) -> None:
    """What every policy's plan keeps to, checked against the snapshot alone."""
    by_name = {w.name: w for w in s.waiting}
    names = [st.run for st in p.starts]
    assert len(names) == len(set(names)) and set(names) <= set(by_name)
    assert sorted(p.order) == sorted(by_name)
    assert set(p.reasons) == set(by_name) - set(names)  # each run that waits says why
    assert p.preemptions == () and p.quota_waits == frozenset()
    for start in p.starts:
        run = by_name[start.run]
        assert start.workers == run.workers and len(start.gpus) == len(run.workers)
        assert start.gpu_share == run.gpu_share
        each = run.gpu_count if run.gpu_share else run.worker.gpus
        assert all(len(set(gpus)) == len(gpus) == each for gpus in start.gpus)
    held = _as_running(s, p, NOW)
    sizes = s.machine.sizes()
    whole = Counter(g for u in held if not u.gpu_share for g in u.gpus)
    assert all(n == 1 for n in whole.values()), "a GPU held whole twice"
    shared: Counter[int] = Counter()
    for u in held:
        if u.gpu_share:
            shared.update(dict.fromkeys(u.gpus, u.gpu_share))
    assert set(whole) | set(shared) <= set(sizes)
    assert not set(whole) & set(shared), "a GPU held whole is shared"
    assert all(used <= sizes[g] for g, used in shared.items())
    assert sum(u.resources.cpu_milli for u in held) <= s.machine.cpu_milli
    assert sum(u.resources.memory for u in held) <= s.machine.memory
    assert sum(u.workers for u in held) <= s.machine.max_workers


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_no_policy_over_commits_the_machine(s: Snapshot) -> None:
    for policy in ALL:
        p = policy(s, NOW)
        check_plan(s, p)
        assert policy(s, NOW) == p  # the same snapshot, the same plan


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_each_policy_keeps_its_own_rule(s: Snapshot) -> None:
    f = fifo(s, NOW)
    if f.head is not None:  # nothing after the head starts
        after = f.order[f.order.index(f.head.run) :]
        assert not set(after) & {st.run for st in f.starts}

    g = greedy(s, NOW)  # what greedy leaves waiting does not fit beside what it starts
    left = tuple(w for w in s.waiting if w.name in g.reasons)
    assert greedy(Snapshot(s.machine, {}, _as_running(s, g, NOW), left), NOW).starts == ()

    e = easy(s, NOW)  # what easy starts behind the head does not delay it
    if e.head is not None and e.head.shadow is not None:
        head = next(w for w in s.waiting if w.name == e.head.run)
        again = easy(Snapshot(s.machine, {}, _as_running(s, e, NOW), (head,)), NOW)
        assert again.head is not None and again.head.shadow is not None
        assert again.head.shadow <= e.head.shadow
