"""In-quota preemption behind a head: only its own workspace's room changes hands."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runner.planner.plan import Plan, RunningUnit, WaitingRun, plan
from tests.unit.planner_builders import HOUR, NOW, machine, running, snap, waiting, workspace

# 12 GPUs. nlp's run (priority 5) holds 8-11; vision's sweep (priority 0) holds
# 0-7 in two units, the newest ending last. nlp's "big" asks for all 12: even
# the whole sweep would not make room, so it preempts nothing and is the head,
# starting when the sweep's second unit ends (shadow NOW + 3 h - 30 s).
NLP = running("n", gpus=(8, 9, 10, 11), ws="nlp", priority=5, limit=2 * HOUR)
NLP_2 = running("n", gpus=(8, 9), ws="nlp", priority=5, limit=2 * HOUR)  # 10, 11 free
S1 = running("s1", gpus=(0, 1, 2, 3), ws="vision", limit=2 * HOUR)
S2 = running("s2", gpus=(4, 5, 6, 7), ws="vision", started=-60, limit=3 * HOUR)
BIG = waiting("big", gpus=12, ws="nlp", priority=5, at=0)
SHADOW = NOW - 60 + 3 * HOUR + 30
QUOTA_WAIT = "Waits for namespace quota: gpus 8 in use + 4 asked > 8"


def _plan(*runs: WaitingRun | RunningUnit, quota: int = 8) -> Plan:
    m = machine(gpus=12)
    return plan(snap(*runs, m=m, workspaces=(workspace("vision", gpus=quota, within=True),)), NOW)


def _urgent(gpus: int = 4, limit: float | None = HOUR / 2) -> WaitingRun:
    return waiting("urgent", gpus=gpus, ws="vision", priority=5, at=1, limit=limit)


@pytest.mark.parametrize(
    ("runs", "quota", "victims", "reason"),
    [
        # its run ends before the shadow: it preempts the newest of its own sweep
        (
            (NLP, S1, S2, BIG, _urgent()),
            8,
            ["s2"],
            "Preempting 1 lower-priority worker(s) of s2 to start",
        ),
        # already stopping for it (the head counts on s2 by NOW + 10 s, then on n
        # and s1 at NOW + 1 h + 30 s), and its own end keeps that shadow: it waits
        (
            (NLP, S1, replace(S2, stop_deadline=NOW + 10, stopping_for="urgent"), BIG, _urgent()),
            8,
            [],
            "Starting: waiting for 1 preempted worker(s) to stop",
        ),
        # no time limit: the head would wait for it for ever; a plain quota wait
        ((NLP, S1, S2, BIG, _urgent(limit=None)), 8, [], QUOTA_WAIT),
        # it would end after the shadow: the head would start later
        ((NLP, S1, S2, BIG, _urgent(limit=4 * HOUR)), 8, [], QUOTA_WAIT),
        # s2 is its only victim (s1 is as urgent): it needs 2 free GPUs beyond s2's 4,
        # and the head needs them
        (
            (NLP_2, replace(S1, priority=5), S2, BIG, _urgent(gpus=6)),
            10,
            [],
            "Waits for namespace quota: gpus 8 in use + 6 asked > 10",
        ),
    ],
)
def test_in_quota_preemption_behind_the_head(
    runs: tuple[WaitingRun | RunningUnit, ...], quota: int, victims: list[str], reason: str
) -> None:
    p = _plan(*runs, quota=quota)
    stopping = any(isinstance(r, RunningUnit) and r.stopping for r in runs)
    shadow = NOW + HOUR + 30 if stopping else SHADOW
    assert p.head is not None and p.head.run == "big" and p.head.shadow == shadow
    assert not p.head.preempting
    assert [(v.run, v.for_run.name) for v in p.preemptions] == [(v, "urgent") for v in victims]
    assert p.reason("urgent") == reason
    assert ("urgent" in p.quota_waits) == reason.startswith("Waits for namespace quota")
    assert p.starts == ()


def test_victims_room_goes_to_the_preemptor_only() -> None:
    # nlp's small run behind the head finds no room: the 4 GPUs s2 frees are urgent's
    other = waiting("other", gpus=4, ws="nlp", at=2, limit=60)
    p = _plan(NLP, S1, S2, BIG, _urgent(), other)
    assert [v.run for v in p.preemptions] == ["s2"]
    assert p.starts == ()
    assert (p.reason("other") or "").startswith("Queued behind big")


def test_a_second_preemptor_cannot_reuse_the_first_ones_victims() -> None:
    second = waiting("second", gpus=4, ws="vision", priority=5, at=2, limit=HOUR / 2)
    p = _plan(NLP, S1, S2, BIG, _urgent(), second)
    assert [(v.run, v.for_run.name) for v in p.preemptions] == [
        ("s2", "urgent"),
        ("s1", "second"),
    ]
    assert p.head is not None and p.head.shadow == SHADOW


def test_the_head_counts_on_the_end_of_an_in_quota_preemptor_before_it() -> None:
    """A preemptor ordered before the head gives its room back when its limit ends: the
    head's shadow counts on that, so nothing is backfilled that would delay the head."""
    s = running("s", gpus=(0, 1, 2, 3), ws="vision")  # no limit: only preemption frees it
    o1 = running("o1", gpus=(4, 5, 6, 7), ws="nlp", limit=11 * HOUR)  # ends NOW + 10 h
    o2 = running("o2", gpus=(8, 9, 10, 11), ws="nlp", limit=21 * HOUR)  # 12, 13 free
    urgent = waiting("urgent", gpus=4, ws="vision", priority=5, at=0, limit=HOUR)
    head = waiting("head", gpus=6, ws="nlp", at=1)
    short = waiting("short", gpus=2, ws="nlp", at=2, limit=5 * HOUR)
    snapshot = snap(s, o1, o2, urgent, head, short, m=machine(gpus=14),
                    workspaces=(workspace("vision", gpus=4, within=True),))  # fmt: skip
    p = plan(snapshot, NOW)
    assert [v.run for v in p.preemptions] == ["s"]
    assert p.head is not None and p.head.run == "head"
    # urgent starts once s has stopped (the 30 s grace) and ends its hour and grace later
    assert p.head.shadow == NOW + 30 + HOUR + 30
    assert "short" not in {st.run for st in p.starts}  # it would end after that shadow


def test_room_held_for_an_in_quota_preemptor_reads_as_in_use() -> None:
    """The quota is 2 GPUs and its run holds 1; a 2-GPU run of the same workspace
    preempts it (in quota), so the room it holds is taken: the next run of that
    workspace waits for the quota, in words, not with an empty reason."""
    own = running("r0", gpus=(4,), ws="vision")
    big = waiting("w0", gpus=1, workers=2, ws="vision", priority=5, at=0)
    small = waiting("w3", gpus=1, ws="vision", at=1)
    p = plan(
        snap(
            own,
            big,
            small,
            m=machine(gpus=8),
            workspaces=(workspace("vision", gpus=2, within=True),),
        ),
        NOW,
    )
    assert [v.unit_id for v in p.preemptions] == ["r0"]
    assert "w3" in p.quota_waits
    assert p.reasons["w3"].render() == "Waits for namespace quota: gpus 2 in use + 1 asked > 2"
