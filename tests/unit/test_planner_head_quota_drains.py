"""The head keeps its workspace's quota, and drains free what they should.

Found by an audit against a running daemon, missed by the property tests until their
generators drew quotas and drains together with a head (test_planner_properties.py now
does): a stream of small runs of the head's own workspace, backfilled, took the quota
the head needed and a later run became the head; a drained GPU's memory stayed held by
the work on it, so a head preempted work it could never use and a small run could not
start on the free GPUs.
"""

from __future__ import annotations

import pytest

from runner.engine.drain import Drain, drained_snapshot
from runner.model import GIB, Quota, Workspace
from runner.planner.plan import Plan, RunningUnit, Snapshot, plan
from runner.reasons import ReasonCode
from runner.rows import DrainRow
from tests.unit.planner_builders import HOUR, NOW, machine, running, snap, waiting, workspace

GPU = 80  # GiB: the memory each GPU of machine() counts as
QUOTAS = [
    pytest.param(workspace("vision", gpus=4), id="gpus"),
    pytest.param(workspace("vision", workers=1), id="workers"),
    pytest.param(Workspace("vision", Quota(gpu_memory=4 * GPU * GIB)), id="gpu_memory"),
]


def _vision(quota: Workspace, small_limit: float | None) -> Snapshot:
    """8 GPUs: another workspace holds 6 for 10 minutes; vision's 4-GPU run waits for
    them, then its 2-GPU run (``small_limit``) comes."""
    return snap(
        running("other", gpus=(0, 1, 2, 3, 4, 5), ws="other", limit=600, started=0,
                gpu_memory_gib=6 * GPU),
        waiting("vis-big", gpus=4, ws="vision", gpu_memory_gib=4 * GPU),
        waiting("vis-small", gpus=2, ws="vision", at=1, limit=small_limit,
                gpu_memory_gib=2 * GPU),
        waiting("later", gpus=2, ws="third", at=2, gpu_memory_gib=2 * GPU),
        workspaces=(quota,),
    )  # fmt: skip


@pytest.mark.parametrize("quota", QUOTAS)
def test_backfill_never_takes_the_quota_the_head_needs(quota: Workspace) -> None:
    result = plan(_vision(quota, small_limit=None), NOW)
    assert result.head is not None and result.head.run == "vis-big"
    assert result.head.shadow == NOW + 600 + 30
    assert "vis-small" not in {s.run for s in result.starts}
    assert result.reasons["vis-small"].code is ReasonCode.QUEUED_BEHIND
    # another workspace's run takes the free room the head does not need, as before
    assert [s.run for s in result.starts] == ["later"]


@pytest.mark.parametrize("quota", QUOTAS)
def test_the_head_stays_the_head_after_the_next_plan(quota: Workspace) -> None:
    """What started behind the head, running at the next plan: the head still fits
    its quota, with the same shadow."""
    first = plan(_vision(quota, small_limit=None), NOW)
    again = plan(_replanned(_vision(quota, small_limit=None), first), NOW)
    assert again.head is not None and again.head.run == "vis-big"
    assert again.head.shadow == first.head.shadow if first.head else False
    assert "vis-big" not in again.quota_waits


@pytest.mark.parametrize("quota", QUOTAS)
def test_a_run_of_the_head_s_workspace_that_ends_by_the_shadow_time_still_backfills(
    quota: Workspace,
) -> None:
    result = plan(_vision(quota, small_limit=300), NOW)
    assert result.head is not None and result.head.run == "vis-big"
    assert [s.run for s in result.starts] == ["vis-small"]  # GPUs 6-7: none left for later


def test_quota_the_head_does_not_need_is_taken_behind_it() -> None:
    """vision may hold 6: the head needs 4 of them, a 2-GPU run without a limit fits
    in the other 2 (and in the machine's room the head does not need)."""
    s = _vision(workspace("vision", gpus=6), small_limit=None)
    result = plan(s, NOW)
    assert result.head is not None and result.head.run == "vis-big"
    assert [x.run for x in result.starts] == ["vis-small"]


def test_work_of_the_head_s_workspace_ending_by_the_shadow_time_gives_its_quota_back() -> None:
    """vision (quota 8) runs 2 GPUs ending before its head's shadow time: at the shadow
    the head's 6 leave 2 of the quota, which a 2-GPU run without a limit may keep. With
    ``mine`` running past the shadow time they are the head's."""
    for limit, starts in ((300, ["vis-small"]), (None, [])):
        s = snap(
            running("mine", gpus=(0, 1), ws="vision", limit=limit, started=0),
            running("other", gpus=(2, 3, 4, 5), ws="other", limit=600, started=0),
            waiting("vis-big", gpus=6, ws="vision"),
            waiting("vis-small", gpus=2, ws="vision", at=1),
            workspaces=(workspace("vision", gpus=8),),
        )
        result = plan(s, NOW)
        assert result.head is not None and result.head.run == "vis-big"
        assert [x.run for x in result.starts] == starts


def _replanned(s: Snapshot, p: Plan) -> Snapshot:
    waiting = {w.name: w for w in s.waiting}
    started = tuple(
        RunningUnit(f"new-{x.run}", x.run, waiting[x.run].workspace, waiting[x.run].priority,
                    waiting[x.run].ask(), tuple(g for w in x.gpus for g in w), NOW,
                    waiting[x.run].time_limit)
        for x in p.starts
    )  # fmt: skip
    gone = {x.run for x in p.starts}
    return Snapshot(
        s.machine,
        s.workspaces,
        s.running + started,
        tuple(w for w in s.waiting if w.name not in gone),
    )


LOW_GPUS = Drain.of(
    [DrainRow(target=str(g), reason="fan failing", by="root", at=NOW) for g in (0, 1, 2, 3)]
)


def test_a_head_never_preempts_work_whose_room_it_cannot_use() -> None:
    """GPUs 0-3 drained: low-a, only on them, holds nothing the head can use."""
    s = snap(
        running("low-a", gpus=(0, 1, 2, 3), priority=-1, started=-60, cpus=1,
                gpu_memory_gib=4 * GPU),
        running("low-b", gpus=(4, 5), priority=0, cpus=1, gpu_memory_gib=2 * GPU),
        waiting("urgent", gpus=4, priority=10, gpu_memory_gib=4 * GPU),
    )  # fmt: skip
    result = plan(drained_snapshot(s, LOW_GPUS), NOW)
    assert result.head is not None and result.head.run == "urgent"
    assert [v.run for v in result.preemptions] == ["low-b"]


def test_work_on_drained_gpus_leaves_the_free_gpus_free() -> None:
    s = snap(
        running("on-drained", gpus=(0, 1, 2, 3), gpu_memory_gib=4 * GPU),
        waiting("one", gpus=1, gpu_memory_gib=GPU),
    )
    result = plan(drained_snapshot(s, LOW_GPUS), NOW)
    assert [(x.run, x.gpus) for x in result.starts] == [("one", ((4,),))]


def test_a_shared_run_on_a_drained_gpu_holds_nothing_of_the_machine_left() -> None:
    shared = RunningUnit("sh", "sh", "default", 0, running("x", gpu_memory_gib=10).resources,
                         (3,), NOW - HOUR, gpu_share=10 * GIB)  # fmt: skip
    d = drained_snapshot(
        snap(shared, m=machine(gpus=4)), Drain.of([DrainRow(target="3", reason="", by="", at=NOW)])
    )
    assert d.running[0].resources.gpus == 0  # not -1: it held no whole GPU
    assert d.running[0].resources.gpu_memory == 0 and d.running[0].gpus == ()
