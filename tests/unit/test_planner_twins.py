"""The planner's twins bound to one rule by drawn queues (hypothesis).

Whole GPUs as full shares
-------------------------
A run asking ``n`` whole GPUs is rewritten as a shared run asking a whole GPU's memory
(``Machine.whole_gpu``) on each of ``n`` GPUs, and a unit holding ``n`` whole GPUs as one
holding that memory on each of them (``as_full_shares``, runner/planner/pool.py); everything
else is kept (GPU memory, the GPUs held for a ``gpus`` quota, cores, workers). On a machine
whose GPUs are all that large the pool places the two the same way: a full share fits only a
GPU with nothing on it, as a whole GPU does (on GPUs of mixed sizes it also fits a larger
GPU partly used, which a whole GPU never takes: not drawn here). What differs by
construction, and is normalised:

- which GPUs a start gets: whole GPUs are taken as the smallest block of consecutive empty
  GPUs (``take_gpus``), full shares as the lowest-numbered of the equally free ones (the
  pool's best fit). Every later rule counts only how many GPUs are empty (all of one
  size), so each worker's count of GPUs is compared, not their indices;
- a start's ``gpu_share`` (0 for whole GPUs), the head's ``need`` (whole GPUs in ``gpus``,
  full shares only in ``held_gpus``: compared as a quota counts it) and its ``held_gpus``
  (a shared head holds no GPU by index; only the API shows it);
- a shared head's reason (``GPU_MEMORY_WAIT``, naming the memory it waits for, not
  ``HEAD_WAITS``) and a too-large run's wording: their codes are compared, not their text.

1. Inside the pool (``plan_generally(pooled=True)``, as while any GPU is shared) a whole-GPU
   ask and a full share plan the same on every drawn queue, beside partial shares too.
2. Across the twins, ``plan`` of a queue of whole GPUs (``make_head``, ``_preempt_own``,
   ``shadow.choose_victims``, ``replay_shadow``) equals the plan of its full shares (their
   ``pool`` twins), but where docs/scheduling.md makes the shared rules stricter on
   purpose: behind a head whose start is unknown nothing takes GPU room (whole GPUs
   backfill into GPUs it does not need), and an in-quota preemptor holds its victims' room
   and its own until it ends (with whole GPUs it takes only what its victims do not give
   back; placed on its victims' GPUs first, a share mostly does the same). Those draws are
   left out (``assume``; each difference stands below in its
   smallest queue); the rest must be equal.

The walk's fast path
--------------------
3. ``walk``'s fast path (``visit``'s steps 1 and 4 repeated inline) equals a visit-only
   walk (``plan_generally(fast=False)``) while GPUs are shared, on GPUs of mixed sizes; the
   whole-GPU walk is bound in tests/unit/test_planner_differential.py. It found a shared
   ask no GPU of the machine could ever hold (``GpuPool.never_fits``), behind a head and
   not fitting the free room, told it was queued behind the head, where ``visit`` says it
   can never run here (step 2 comes before step 4, and the fast path checked only the
   machine's totals); its smallest queue stands below.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from runner.model import GIB, Resources, quota_amounts
from runner.planner.plan import Plan, Snapshot, plan, plan_generally
from runner.planner.pool import as_full_shares, as_shared_run, as_shared_unit
from runner.reasons import ReasonCode, RunRef
from tests.unit.gpu_share_builders import held, shared, shared_machine
from tests.unit.planner_builders import NOW, machine, running, waiting, workspace
from tests.unit.planner_strategies import PROPERTY, snapshots

_EIGHTHS = st.integers(0, 8)  # a share in eighths of a GPU's memory (0: whole GPUs kept)
_SAID_ANYWAY = {ReasonCode.HEAD_WAITS, ReasonCode.GPU_MEMORY_WAIT, ReasonCode.TOO_LARGE}
_IN_QUOTA = {ReasonCode.PREEMPTING, ReasonCode.STARTING, ReasonCode.FITS}


@st.composite
def _partly_shared(draw: st.DrawFn, sizes: bool = False) -> Snapshot:
    """The property tests' queue (tests/unit/planner_strategies.py), some of its whole-GPU
    asks and holds made shares of a GPU's memory, some runs preempted before; with
    ``sizes``, on GPUs of 40 or 80 GiB (a waiting share up to the largest GPU, a running one
    up to the smallest)."""
    snapshot = draw(snapshots())
    m = snapshot.machine
    if sizes:
        m = replace(m, gpu_memory=tuple(draw(st.sampled_from([40, 80])) * GIB for _ in m.gpus))
    small, large = m.whole_gpu, max(m.sizes().values(), default=0)
    running = tuple(as_shared_unit(u, small * draw(_EIGHTHS) // 8) for u in snapshot.running)
    waiting = []
    for w in snapshot.waiting:
        w = as_shared_run(w, large * draw(_EIGHTHS) // 8)
        by = draw(st.sampled_from([None, "r0", "r1"]))
        waiting.append(w if by is None else replace(w, preempted_by=RunRef(by, w.workspace)))
    return Snapshot(m, snapshot.workspaces, running, tuple(waiting))


def _alike(result: Plan) -> tuple[object, ...]:
    """What a plan of whole GPUs and of their full shares must agree on (module docstring)."""
    head = result.head
    starts = tuple((s.run, s.workers, tuple(map(len, s.gpus)), s.backfill, s.why.render(),
                    s.why.code) for s in result.starts)  # fmt: skip
    codes = {name: ReasonCode.HEAD_WAITS if r.code is ReasonCode.GPU_MEMORY_WAIT else r.code
             for name, r in result.reasons.items()}  # fmt: skip
    texts = {name: r.render() for name, r in result.reasons.items() if r.code not in _SAID_ANYWAY}
    need = None if head is None else quota_amounts(head.need)
    return (
        starts,
        result.preemptions,
        head and (head.run, head.workspace, head.priority, head.shadow, head.preempting, need),
        codes,
        texts,
        result.order,
        result.quota_waits,
        {name: r.render() for name, r in result.quota_reached.items()},
    )


def _stricter_when_shared(result: Plan) -> bool:
    """The plan meets a rule the shared twins keep stricter on purpose: a head whose start
    is unknown, or a run preempting its own workspace's work (or waiting for it to stop)."""
    head = result.head
    if head is not None and head.shadow is None:
        return True
    return any(r.code in _IN_QUOTA for name, r in result.reasons.items()
               if head is None or name != head.run)  # fmt: skip


@settings(PROPERTY, max_examples=600)
@given(_partly_shared())
def test_in_the_pool_a_whole_gpu_is_a_full_share_of_its_memory(snapshot: Snapshot) -> None:
    """Property 1: a whole-GPU ask or hold and a full share plan alike in the pool,
    victims, shadows, backfill and in-quota preemption included."""
    as_whole = plan_generally(snapshot, NOW, pooled=True, fast=True)
    assert _alike(as_whole) == _alike(plan(as_full_shares(snapshot), NOW))


@settings(PROPERTY, max_examples=600)
@given(snapshots())
def test_the_whole_gpu_twins_plan_as_full_shares(snapshot: Snapshot) -> None:
    """Property 2: ``plan`` of whole GPUs (the whole-GPU twins) equals ``plan`` of their
    full shares (the pool twins) but where the shared rules are stricter on purpose."""
    whole, full = plan(snapshot, NOW), plan(as_full_shares(snapshot), NOW)
    assume(not (_stricter_when_shared(whole) or _stricter_when_shared(full)))
    assert _alike(whole) == _alike(full)


def test_where_the_shared_rules_are_stricter_on_purpose() -> None:
    """What property 2 leaves out, in its smallest queue: whole GPUs backfill behind a
    head whose start is unknown, full shares do not. An in-quota preemptor of one whole
    GPU and of one full share both take their victim's GPU and leave the empty one to the
    run behind (a full share took the empty GPU and held both before)."""
    g = 80  # GiB: a whole GPU's memory, as the engine counts it
    unknown = Snapshot(machine(8, 32), {}, (running("cores", cpus=30),),
                       (waiting("head", gpus=1, cpus=10, gpu_memory_gib=g),
                        waiting("gpu", gpus=1, at=1, gpu_memory_gib=g)))  # fmt: skip
    own = Snapshot(machine(2), {"a": workspace("a", gpus=1, within=True)},
                   (running("low", gpus=(1,), ws="a", gpu_memory_gib=g),),
                   (waiting("high", gpus=1, ws="a", priority=1, gpu_memory_gib=g),
                    waiting("other", gpus=1, ws="b", at=1, gpu_memory_gib=g)))  # fmt: skip
    whole, full = plan(unknown, NOW), plan(as_full_shares(unknown), NOW)
    assert [s.run for s in whole.starts] == ["gpu"] and full.starts == ()
    assert _stricter_when_shared(whole) and _stricter_when_shared(full)
    whole, full = plan(own, NOW), plan(as_full_shares(own), NOW)
    assert _alike(whole) == _alike(full) and [s.run for s in full.starts] == ["other"]


def test_an_in_quota_preemptor_of_a_whole_gpu_takes_one_its_shared_victim_empties() -> None:
    """Found by property 1: behind a head whose start is known, a run over its quota only
    by its own lower-priority run, which shares a GPU, asks one whole GPU. The victim
    empties that GPU; the whole ask was refused as if the GPU came from the empty ones
    (none), so the head's replayed shadow never came, while its full share preempted."""
    g = 80  # GiB: a whole GPU's memory, as the engine counts it
    low = replace(
        running("low", gpus=(0,), cpus=1, ws="c", priority=-2),
        resources=Resources(0, 1000, 0, 1, 50 * GIB, held_gpus=1), gpu_share=50 * GIB,
    )  # fmt: skip
    snapshot = Snapshot(
        machine(2, 3), {"c": workspace("c", gpus=1, within=True)},
        (low, running("other", gpus=(1,), cpus=1, ws="a", gpu_memory_gib=g),
         running("going", cpus=1, ws="a", stop_deadline=10)),  # the head's cores, soon
        (waiting("head", cpus=1, ws="a"), waiting("high", gpus=1, ws="c", gpu_memory_gib=g)),
    )  # fmt: skip
    for queue in (snapshot, as_full_shares(snapshot)):
        result = plan(queue, NOW)
        assert result.head is not None and result.head.shadow == NOW + 10
        assert [(p.run, p.for_run.name) for p in result.preemptions] == [("low", "high")]
        assert result.reasons["high"].code is ReasonCode.PREEMPTING


def test_an_in_quota_preemptor_in_the_pool_is_placed_on_what_its_victims_free() -> None:
    """Found by property 1: a run of 3 whole GPUs preempting its namespace's run of 4 in the
    pool took the one empty GPU with two of its victim's (a block of three), and held the
    victim's other two for itself, so the 1-GPU run behind it found none; placed on its
    victim's GPUs first, as whole GPUs outside the pool and as full shares are, it leaves
    the empty one to that run."""
    g = 80  # GiB: a whole GPU's memory, as the engine counts it
    snapshot = Snapshot(
        machine(8, 32), {"b": workspace("b", gpus=4, within=True)},
        (running("low", gpus=(1, 2, 4, 5), ws="b", gpu_memory_gib=4 * g),
         running("busy", gpus=(0, 3, 7), ws="a", gpu_memory_gib=3 * g)),
        (waiting("high", gpus=3, ws="b", priority=1, gpu_memory_gib=3 * g),
         waiting("one", gpus=1, ws="a", gpu_memory_gib=g)),
    )  # fmt: skip
    for result in (plan_generally(snapshot, NOW, pooled=True, fast=True), plan(snapshot, NOW),
                   plan(as_full_shares(snapshot), NOW)):  # fmt: skip
        assert [(p.run, p.for_run.name) for p in result.preemptions] == [("low", "high")]
        assert [(s.run, s.gpus) for s in result.starts] == [("one", ((6,),))]


def _everything(result: Plan) -> tuple[object, ...]:
    """All of a plan anybody reads."""
    reasons = {n: (r.render(), r.code) for n, r in result.reasons.items()}
    reached = {n: r.render() for n, r in result.quota_reached.items()}
    return (result.starts, result.preemptions, result.head, reasons, result.order,
            result.quota_waits, reached)  # fmt: skip


@settings(PROPERTY, max_examples=600)
@given(_partly_shared(sizes=True))
def test_the_walks_fast_path_is_a_visit_on_shared_gpus(snapshot: Snapshot) -> None:
    """Property 3: the fast path makes the plan a visit-only walk makes, GPUs shared."""
    fast = plan_generally(snapshot, NOW, pooled=True, fast=True)
    slow = plan_generally(snapshot, NOW, pooled=True, fast=False)
    assert _everything(fast) == _everything(slow)


def test_a_shared_ask_no_gpu_holds_is_too_large_behind_a_head_too() -> None:
    """Two 40 GiB GPUs, 30 GiB held on GPU 0; ``head`` asks 40 GiB on both, ``big`` 60 GiB
    on one: no GPU is that large, and the fast path says so as ``visit`` does (it queued
    it behind the head)."""
    small = replace(shared_machine(2), gpu_memory=(40 * GIB, 40 * GIB))
    snapshot = Snapshot(small, {}, (held("x", (0,), 30),),
                        (shared("head", 40, count=2), shared("big", 60, at=1)))  # fmt: skip
    visited = plan_generally(snapshot, NOW, pooled=True, fast=False)
    assert visited.reasons["big"].code is ReasonCode.TOO_LARGE  # what visit says
    assert plan(snapshot, NOW).reasons["big"].code is ReasonCode.TOO_LARGE
