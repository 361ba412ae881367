"""`astra why`: the chain and the levers, each lever applied and re-planned."""

from __future__ import annotations

from dataclasses import replace

from runner.engine.drain import Drain, drained_snapshot
from runner.planner.plan import Snapshot, WaitingRun, plan
from runner.planner.why import Verdict, as_json, explain
from runner.reasons import ReasonCode, Viewer
from runner.rows import DrainRow
from tests.unit.planner_builders import HOUR, NOW, machine, running, snap, waiting, workspace

ADMIN = Viewer()


def starts_with(snapshot: Snapshot, run: WaitingRun) -> bool:
    changed = replace(snapshot, waiting=tuple(run if w.name == run.name else w
                                              for w in snapshot.waiting))  # fmt: skip
    return any(s.run == run.name for s in plan(changed, NOW).starts)


def by_name(snapshot: Snapshot, name: str) -> WaitingRun:
    return next(w for w in snapshot.waiting if w.name == name)


def test_time_limit_lever_and_the_chain() -> None:
    s = snap(
        running("a", gpus=tuple(range(6)), started=0, limit=HOUR),
        waiting("big", gpus=8, at=0),
        waiting("long", gpus=2, at=2),
    )
    why = explain(s, NOW, "long", ADMIN, max_priority=0)
    assert why is not None
    assert why.reason == "Queued behind big, which starts by 2026-10-01 13:01 UTC"
    assert why.chain[0] == (
        "Position 2 of 2 in the queue, priority 0: behind big, submitted earlier "
        "(2026-10-01 11:43 UTC)."
    )
    assert why.chain[1] == ("The head, big, waits for: a (6 GPUs) ends by 2026-10-01 13:01 UTC.")
    assert "A time limit of at most 1 h lets it start now by backfill." in why.levers
    assert starts_with(s, replace(by_name(s, "long"), time_limit=HOUR))


def test_fewer_gpus_lever() -> None:
    s = snap(running("a", gpus=tuple(range(6))), waiting("big", gpus=8))
    why = explain(s, NOW, "big", ADMIN, max_priority=0)
    assert why is not None
    assert "With 2 GPU(s) per worker instead of 8 it starts now." in why.levers
    fewer = by_name(s, "big")
    assert starts_with(s, replace(fewer, worker=replace(fewer.worker, gpus=2)))
    assert not starts_with(s, replace(fewer, worker=replace(fewer.worker, gpus=3)))


def test_priority_lever_says_the_maximum_and_never_offers_more() -> None:
    s = snap(
        running("a", gpus=tuple(range(8))),
        waiting("first", gpus=4, at=0),
        waiting("second", gpus=4, at=1),
    )
    why = explain(s, NOW, "second", ADMIN, max_priority=0)
    assert why is not None
    assert not [lever for lever in why.levers if lever.startswith("Priority")]
    why = explain(s, NOW, "second", ADMIN, max_priority=5)
    assert why is not None
    assert "Priority 1 would put it ahead of first (within your maximum of 5)." in why.levers
    moved = replace(s, waiting=(by_name(s, "first"), replace(by_name(s, "second"), priority=1)))
    assert plan(moved, NOW).order[0] == "second"


def test_share_lever() -> None:
    s = snap(
        running("v-run", gpus=(0, 1, 2, 3), ws="vision", started=0, limit=HOUR),
        running("n-run", gpus=(4, 5), ws="nlp"),
        running("other", gpus=(6, 7)),
        waiting("n-next", gpus=2, ws="nlp", at=0),
        waiting("v-next", gpus=2, ws="vision", at=1),
        workspaces=(workspace("vision", gpus=8), workspace("nlp", gpus=8)),
    )
    why = explain(s, NOW, "v-next", ADMIN, max_priority=0)
    assert why is not None
    assert why.chain[0].startswith(
        "Position 2 of 2 in the queue, priority 0: behind n-next: namespace nlp's share/weight"
        " 0.25 is below vision's 0.50."
    )
    assert (
        "When v-run of your namespace ends (by 2026-10-01 13:01 UTC) its share drops and it "
        "moves ahead." in why.levers
    )


def test_quota_and_anonymised_names() -> None:
    s = snap(
        running("secret", gpus=tuple(range(8)), ws="nlp"),
        waiting("theirs", gpus=2, ws="nlp", at=0),
        waiting("mine", gpus=2, ws="vision", at=1),
        workspaces=(workspace("vision", gpus=1),),
    )
    why = explain(s, NOW, "mine", Viewer(frozenset({"vision"})), max_priority=0)
    assert why is not None
    assert why.reason == (
        "Waits for more than the namespace's quota allows at all (gpus 2 > 1): "
        "raise the quota or ask for less."
    )
    assert "behind a job in another namespace" in why.chain[0]
    assert "secret" not in " ".join(why.chain + why.levers)


def test_a_run_that_is_not_waiting_has_no_answer() -> None:
    assert explain(snap(waiting("x", gpus=1)), NOW, "nope", ADMIN, 0) is None


def test_the_head_waits_only_for_work_that_frees_what_it_lacks() -> None:
    # 2 of 8 GPUs free; a CPU-only run with no time limit frees no GPU.
    s = snap(
        running("a", gpus=tuple(range(6)), started=0),
        running("small", cpus=2, started=0),
        running("short", cpus=2, started=0, limit=60),
        waiting("big", gpus=4, at=0),
    )
    why = explain(s, NOW, "big", ADMIN, max_priority=0)
    assert why is not None
    assert why.chain[1] == "The head, big, waits for: a (6 GPUs) has no time limit."


def test_short_of_cores_the_head_waits_for_the_run_holding_cores() -> None:
    m = machine(gpus=8, cpus=8)
    s = snap(
        running("gpu", gpus=(0,), started=0, limit=HOUR),
        running("cores", cpus=6, started=0),
        waiting("wide", cpus=4, at=0),
        m=m,
    )
    why = explain(s, NOW, "wide", ADMIN, max_priority=0)
    assert why is not None
    assert why.chain[1] == "The head, wide, waits for: cores (0 GPUs) has no time limit."


# ------------------------------------------------- why no preemption: the verdict

HP_BEHIND = (
    running("eqa", gpus=(0, 1, 2, 3, 4, 5), priority=10, ws="a"),
    running("lowb", gpus=(6, 7), priority=-5, ws="b"),
    waiting("hp", gpus=4, priority=10, ws="b"),
)


def test_a_head_that_preempts_nothing_says_why_with_a_code() -> None:
    why = explain(snap(*HP_BEHIND), NOW, "hp", ADMIN, max_priority=10)
    assert why is not None
    text = (
        "No preemption: eqa has priority 10 (equal, never preempted); stopping lowb "
        "(priority -5, 2 GPUs) would free 2 of the 4 GPUs needed"
    )
    assert why.preemption == Verdict(ReasonCode.NO_PREEMPTION_PRIORITY, text)
    assert text + "." in why.chain
    assert as_json(why)["preemption"] == {"code": "NO_PREEMPTION_PRIORITY", "text": text}
    # b's member reads a's run as another namespace's
    mine = explain(snap(*HP_BEHIND), NOW, "hp", Viewer(frozenset({"b"})), max_priority=10)
    assert mine is not None and mine.preemption is not None
    assert mine.preemption.text.startswith(
        "No preemption: a job in another namespace has priority 10 (equal, never preempted); "
    )
    assert "eqa" not in " ".join(mine.chain)


def test_a_gang_says_it_needs_room_for_all_its_workers() -> None:
    s = snap(
        running("hi", gpus=(0, 1), priority=10),
        running("lo", gpus=(2, 3), priority=-1),
        waiting("gang", gpus=2, workers=2, priority=5),
        m=machine(gpus=4),
    )
    why = explain(s, NOW, "gang", ADMIN, max_priority=10)
    assert why is not None and why.preemption is not None
    assert why.preemption.text.endswith("; a gang needs room for all its 2 workers at once")
    assert "hi has priority 10 (higher, never preempted)" in why.preemption.text


def test_drained_gpus_are_named_when_work_on_them_frees_nothing() -> None:
    full = snap(
        running("low-a", gpus=(0, 1, 2, 3), priority=-1),
        running("eq", gpus=(4, 5, 6, 7), priority=10),
        waiting("hp", gpus=4, priority=10),
    )
    drain = Drain.of(
        [DrainRow(target=str(g), reason="fan", by="root", at=NOW) for g in (0, 1, 2, 3)]
    )
    why = explain(drained_snapshot(full, drain), NOW, "hp", ADMIN, 10, drain.drained_gpus)
    assert why is not None and why.preemption is not None
    assert why.preemption.text == (
        "No preemption: eq has priority 10 (equal, never preempted); GPUs 0, 1, 2, 3 are "
        "drained: work on them frees no GPU it can use"
    )


def test_a_run_over_its_quota_says_only_the_head_preempts() -> None:
    runs = (running("s1", gpus=(0, 1), ws="vision", priority=-1),
            waiting("urgent", gpus=1, ws="vision", priority=5))  # fmt: skip
    why = explain(snap(*runs, workspaces=(workspace("vision", gpus=2),)), NOW, "urgent", ADMIN, 5)
    assert why is not None
    assert why.preemption == Verdict(
        ReasonCode.NO_PREEMPTION_QUOTA,
        "No preemption: a run over its namespace's quota waits for it; only the head preempts "
        "(the namespace's preempt_within_quota is off)",
    )
    alone = (running("s1", gpus=(0, 1), ws="vision", priority=5), runs[1])
    within = (workspace("vision", gpus=2, within=True),)
    why = explain(snap(*alone, workspaces=within), NOW, "urgent", ADMIN, 5)
    assert why is not None and why.preemption is not None
    assert why.preemption.text == (
        "No preemption: none of its namespace's running work has a lower priority"
    )


def test_a_head_that_preempts_has_no_verdict() -> None:
    s = snap(running("low", gpus=(0, 1, 2, 3), priority=-1), waiting("hp", gpus=4, priority=1),
             m=machine(gpus=4))  # fmt: skip
    why = explain(s, NOW, "hp", ADMIN, max_priority=10)
    assert why is not None and why.preemption is None


def test_the_work_the_head_waits_for_is_said_in_gpus_in_the_singular_for_one() -> None:
    s = snap(running("a", gpus=(0,), started=0, limit=HOUR), waiting("big", gpus=8),
             m=machine(gpus=8))  # fmt: skip
    why = explain(s, NOW, "big", ADMIN, max_priority=0)
    assert why is not None
    assert why.chain[1] == "The head, big, waits for: a (1 GPU) ends by 2026-10-01 13:01 UTC."
