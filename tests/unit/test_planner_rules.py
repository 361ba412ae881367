"""Table-driven cases for every rule and message of the planner (docs/scheduling.md)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from runner.durations import utc_minute
from runner.model import Workspace
from runner.planner.plan import Plan, RunningUnit, WaitingRun, plan, take_gpus
from runner.reasons import Viewer
from tests.unit.planner_builders import HOUR, NOW, machine, running, snap, waiting, workspace


def started(p: Plan) -> list[str]:
    return [s.run for s in p.starts]


def reasons(p: Plan, viewer: Viewer | None = None) -> dict[str, str]:
    return {name: r.render(viewer or Viewer()) for name, r in p.reasons.items()}


# ------------------------------------------------------------------ ordering


def test_priority_first_then_submission_time() -> None:
    p = plan(
        snap(
            waiting("old-low", gpus=4, priority=0, at=0),
            waiting("new-high", gpus=4, priority=5, at=10),
            waiting("mid", gpus=4, priority=0, at=5),
        ),
        NOW,
    )
    assert p.order == ("new-high", "old-low", "mid")
    assert started(p) == ["new-high", "old-low"]
    assert reasons(p)["mid"] == "Next to run (priority 0): waits for running work to end"


@dataclass(frozen=True)
class Order:
    """A snapshot of workspaces (``workspaces``, by their quotas and weights), their
    runs (``runs``), and the order the planner takes the waiting runs in."""

    runs: tuple[WaitingRun | RunningUnit, ...]
    workspaces: tuple[Workspace, ...]
    order: tuple[str, ...]


ORDER = {
    # vision already uses 4 of its 8 GPUs (share 0.5); nlp uses 1 of 8 (0.125)
    "fair share: the lowest dominant share over weight first": Order(
        (running("v-run", gpus=(0, 1, 2, 3), ws="vision"),
         running("n-run", gpus=(4,), ws="nlp"),
         waiting("v-next", gpus=1, ws="vision", at=0),
         waiting("n-next", gpus=1, ws="nlp", at=50)),
        (workspace("vision", gpus=8), workspace("nlp", gpus=8)),
        ("n-next", "v-next"),
    ),
    # the same, vision weighing 8: 0.5 / 8 < 0.125 / 1
    "the weight divides the share": Order(
        (running("v-run", gpus=(0, 1, 2, 3), ws="vision"),
         running("n-run", gpus=(4,), ws="nlp"),
         waiting("v-next", gpus=1, ws="vision", at=0),
         waiting("n-next", gpus=1, ws="nlp", at=50)),
        (workspace("vision", gpus=8, weight=8), workspace("nlp", gpus=8)),
        ("v-next", "n-next"),
    ),
    # both start at share 0; after a-1 starts, a's share is 2/8 so b-1 goes next
    "the share counts runs started earlier in the same cycle": Order(
        (waiting("a-1", gpus=2, ws="a", at=0),
         waiting("a-2", gpus=2, ws="a", at=1),
         waiting("b-1", gpus=2, ws="b", at=2)),
        (workspace("a", gpus=8), workspace("b", gpus=8)),
        ("a-1", "b-1", "a-2"),
    ),
    "a workspace without a quota has share zero": Order(
        (running("q-run", gpus=(0,), ws="quota"),
         waiting("q-next", gpus=1, ws="quota", at=0),
         waiting("free-next", gpus=1, ws="free", at=9)),
        (workspace("quota", gpus=8),),
        ("free-next", "q-next"),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", ORDER.values(), ids=ORDER.keys())
def test_order(case: Order) -> None:
    p = plan(snap(*case.runs, workspaces=case.workspaces), NOW)
    assert p.order == case.order


# --------------------------------------------------------------------- quota


def test_quota_wait_blocks_nobody_and_is_never_the_head() -> None:
    p = plan(
        snap(
            running("v-run", gpus=tuple(range(6)), ws="vision", priority=5),
            waiting("v-more", gpus=4, ws="vision", priority=5, at=0),
            waiting("other", gpus=2, ws="nlp", at=1),
            workspaces=(workspace("vision", gpus=8),),
        ),
        NOW,
    )
    assert reasons(p)["v-more"] == "Waits for namespace quota: gpus 6 in use + 4 asked > 8"
    assert started(p) == ["other"]
    assert p.head is None
    assert p.quota_waits == {"v-more"}


def test_alone_over_quota_says_raise_the_quota() -> None:
    p = plan(
        snap(waiting("huge", gpus=12, ws="vision"), workspaces=(workspace("vision", gpus=8),)),
        NOW,
    )
    assert reasons(p)["huge"] == (
        "Waits for more than the namespace's quota allows at all (gpus 12 > 8): "
        "raise the quota or ask for less."
    )
    assert p.head is None


def test_quota_on_cpu_cores_and_workers() -> None:
    p = plan(
        snap(
            running("r", cpus=6, ws="w"),
            waiting("cpu", cpus=4, ws="w", at=0),
            waiting("many", workers=3, ws="w", at=1),
            workspaces=(workspace("w", cpus=8, workers=2),),
        ),
        NOW,
    )
    assert reasons(p)["cpu"] == "Waits for namespace quota: cpu_cores 6 in use + 4 asked > 8"
    assert reasons(p)["many"] == (
        "Waits for more than the namespace's quota allows at all (workers 3 > 2): "
        "raise the quota or ask for less."
    )


def test_quota_counts_runs_started_in_the_same_cycle() -> None:
    p = plan(
        snap(
            waiting("a", gpus=3, ws="w", at=0),
            waiting("b", gpus=3, ws="w", at=1),
            workspaces=(workspace("w", gpus=4),),
        ),
        NOW,
    )
    assert started(p) == ["a"]
    assert reasons(p)["b"] == "Waits for namespace quota: gpus 3 in use + 3 asked > 4"


# ------------------------------------------------------------- too large


def test_run_larger_than_the_machine_is_reported_and_never_the_head() -> None:
    p = plan(snap(waiting("giant", gpus=16), waiting("small", gpus=1, at=1)), NOW)
    assert reasons(p)["giant"] == (
        "Cannot run on this machine: asks for gpus 16, the machine has 8 in all. Ask for less."
    )
    assert started(p) == ["small"]
    assert p.head is None


# ----------------------------------------------------------------- the head


def test_head_with_known_shadow_and_runs_behind_it() -> None:
    p = plan(
        snap(
            running("a", gpus=tuple(range(6)), started=0, limit=HOUR),
            waiting("big", gpus=8, at=0),
            waiting("long", gpus=2, at=2),
        ),
        NOW,
    )
    # a ends at 13:00:00 + 30 s grace -> rounded up to 13:01.
    assert reasons(p)["big"] == (
        "Next to run (priority 0): starts by 2026-10-01 13:01 UTC as running work ends."
    )
    assert reasons(p)["long"] == "Queued behind big, which starts by 2026-10-01 13:01 UTC"
    assert p.head is not None and p.head.shadow == NOW + HOUR + 30
    assert p.head.held_gpus == (6, 7)
    assert started(p) == []


def test_head_waits_for_work_without_time_limit() -> None:
    p = plan(
        snap(
            running("a", gpus=tuple(range(6))), waiting("big", gpus=8), waiting("x", gpus=4, at=1)
        ),
        NOW,
    )
    assert reasons(p)["big"] == "Next to run (priority 0): waits for running work to end"
    assert reasons(p)["x"] == "Queued behind big, which waits for running work to end"
    assert p.head is not None and p.head.shadow is None


def test_head_message_shows_its_priority() -> None:
    p = plan(
        snap(running("a", gpus=tuple(range(8)), priority=9), waiting("h", gpus=1, priority=3)), NOW
    )
    assert reasons(p)["h"] == "Next to run (priority 3): waits for running work to end"


def test_shadow_takes_the_earliest_ends_first() -> None:
    p = plan(
        snap(
            running("late", gpus=(0, 1, 2, 3), started=0, limit=5 * HOUR),
            running("soon", gpus=(4, 5, 6, 7), started=0, limit=HOUR),
            waiting("head", gpus=4),
        ),
        NOW,
    )
    assert p.head is not None and p.head.shadow == NOW + HOUR + 30


def test_shadow_rounds_up_to_the_minute_in_utc() -> None:
    assert utc_minute(NOW) == "2026-10-01 12:00 UTC"
    assert utc_minute(NOW + 1) == "2026-10-01 12:01 UTC"
    assert utc_minute(NOW + 59.5) == "2026-10-01 12:01 UTC"


def test_head_protected_against_a_stream_of_small_runs() -> None:
    smalls = [waiting(f"small-{i}", gpus=1, at=10 + i) for i in range(10)]
    p = plan(
        snap(
            running("a", gpus=(0, 1, 2, 3, 4, 5), started=0, limit=HOUR),
            waiting("big", gpus=8, at=0),
            *smalls,
        ),
        NOW,
    )
    assert started(p) == []
    assert all(reasons(p)[s.name].startswith("Queued behind big") for s in smalls)


# ------------------------------------------------------------------ backfill


def test_backfill_with_a_time_limit_ending_before_the_shadow() -> None:
    p = plan(
        snap(
            running("a", gpus=tuple(range(6)), started=0, limit=HOUR),
            waiting("big", gpus=8, at=0),
            waiting("short", gpus=2, limit=1800, at=1),
        ),
        NOW,
    )
    assert [(s.run, s.backfill, s.gpus) for s in p.starts] == [("short", True, ((6, 7),))]
    assert p.starts[0].why.render() == (
        "its time limit ends it before big starts (by 2026-10-01 13:01 UTC)"
    )


def test_backfill_without_a_limit_into_room_the_head_does_not_need() -> None:
    # At the shadow time 8 GPUs are free and the head needs 6: 2 are not needed.
    p = plan(
        snap(
            running("a", gpus=tuple(range(6)), started=0, limit=HOUR),
            waiting("head", gpus=6, priority=1, at=0),
            waiting("n1", gpus=1, at=1),
            waiting("n2", gpus=1, at=2),
            waiting("n3", gpus=1, at=3),
        ),
        NOW,
    )
    assert started(p) == ["n1", "n2"]
    assert p.starts[0].why.render() == "it fits in room head does not need"
    assert reasons(p)["n3"].startswith("Queued behind head")


def test_cpu_only_run_beside_promised_gpus() -> None:
    p = plan(
        snap(
            running("a", gpus=tuple(range(6)), cpus=8, started=0, limit=HOUR),
            waiting("big", gpus=8, cpus=8, at=0),
            waiting("cpu-job", cpus=16, at=1),  # no limit, no GPUs
        ),
        NOW,
    )
    assert [(s.run, s.gpus) for s in p.starts] == [("cpu-job", ((),))]
    assert p.head is not None and p.head.held_gpus == (6, 7)


BACKFILL = {
    "none when the limit ends after the shadow": (
        (running("a", gpus=tuple(range(6)), started=0, limit=HOUR),
         waiting("big", gpus=8, at=0),
         waiting("exact", gpus=1, limit=HOUR, at=1),  # ends 13:00:30: just in time
         waiting("too-long", gpus=1, limit=HOUR + 1, at=2)),  # ends 13:00:31
        ["exact"],
    ),
    "none without a time limit when the head needs the room": (
        (running("a", gpus=tuple(range(6)), started=0, limit=HOUR),
         waiting("big", gpus=8, at=0),
         waiting("nolimit", gpus=1, at=1)),
        [],
    ),
    # 4 free now, head needs 6 (unknown shadow): free-now minus need < 0 GPUs; a CPU-only
    # run uses cores the head does not need
    "an unknown shadow backfills only what the head does not need now": (
        (running("a", gpus=(0, 1, 2, 3), cpus=8),
         waiting("head", gpus=6, cpus=16, at=0),
         waiting("gpu-run", gpus=1, at=1),
         waiting("cpu-run", cpus=32, at=2),
         waiting("cpu-too-big", cpus=16, at=3)),
        ["cpu-run"],
    ),
    # 24 cores free now; 64 at the shadow, 24 of them spare
    "what backfills within the spare is subtracted per run": (
        (running("a", cpus=40, started=0, limit=HOUR),
         waiting("head", cpus=40, at=0),
         waiting("c1", cpus=16, at=1),
         waiting("c2", cpus=16, at=2)),
        ["c1"],
    ),
}  # fmt: skip


@pytest.mark.parametrize(("runs", "starts"), BACKFILL.values(), ids=BACKFILL.keys())
def test_backfill_starts(runs: tuple[WaitingRun | RunningUnit, ...], starts: list[str]) -> None:
    assert started(plan(snap(*runs), NOW)) == starts


def test_started_ahead_of_the_head_count_in_its_shadow() -> None:
    p = plan(
        snap(
            running("a", gpus=(0, 1, 2, 3), started=0, limit=2 * HOUR),
            waiting("first", gpus=4, limit=HOUR, priority=1),
            waiting("head", gpus=4),
        ),
        NOW,
    )
    assert started(p) == ["first"]
    assert p.head is not None and p.head.shadow == NOW + HOUR + 30


# --------------------------------------------------------------- preemption


@dataclass(frozen=True)
class Preemption:
    """A snapshot (``runs``) with a waiting run ``urgent``, the units stopped for it
    (``victims``, by unit id) and what its reason says; it is the head either way."""

    runs: tuple[WaitingRun | RunningUnit, ...]
    victims: list[str]
    reason: str


PREEMPTION = {
    "the most recently started lower-priority unit": Preemption(
        (running("old", gpus=(0, 1, 2, 3), priority=-10, started=-2 * HOUR),
         running("new", gpus=(4, 5, 6, 7), priority=-10, started=-HOUR),
         waiting("urgent", gpus=4, priority=10)),
        ["new"],
        "Preempting 1 lower-priority worker(s) of new to start",
    ),
    "the lowest priority first": Preemption(
        (running("low", gpus=(0, 1, 2, 3), priority=-50, started=-3 * HOUR),
         running("mid", gpus=(4, 5, 6, 7), priority=-10, started=-HOUR),
         waiting("urgent", gpus=4, priority=10)),
        ["low"],
        "Preempting 1 lower-priority worker(s) of low to start",
    ),
    "equal priority never preempts": Preemption(
        (running("same", gpus=tuple(range(8)), priority=5),
         waiting("urgent", gpus=4, priority=5)),
        [],
        "Next to run (priority 5): waits for running work to end",
    ),
    "none when even all lower work would not make room": Preemption(
        (running("high", gpus=(0, 1, 2, 3, 4, 5), priority=100),
         running("low", gpus=(6, 7), priority=-100),
         waiting("urgent", gpus=4, priority=10)),
        [],
        "Next to run (priority 10): waits for running work to end",
    ),
    # adding low (1 GPU) then mid (4 GPUs) makes room; then low is not needed
    "unneeded victims are dropped": Preemption(
        (running("low", gpus=(0,), priority=-50),
         running("mid", gpus=(1, 2, 3, 4), priority=-10),
         running("keep", gpus=(5, 6, 7), priority=50),
         waiting("urgent", gpus=4, priority=10)),
        ["mid"],
        "Preempting 1 lower-priority worker(s) of mid to start",
    ),
    "a gang is stopped whole": Preemption(
        (running("gang", gpus=(0, 1, 2, 3), workers=2, priority=-1, started=-HOUR),
         running("other", gpus=(4, 5, 6, 7), priority=-1, started=-3 * HOUR),
         waiting("urgent", gpus=2, priority=1)),
        ["gang"],
        "Preempting 2 lower-priority worker(s) of gang to start",
    ),
    "an independent worker is stopped alone": Preemption(
        (running("other", gpus=(0, 1, 2, 3), priority=-1, started=-3 * HOUR),
         running("indep", gpus=(4, 5), priority=-1, unit="indep/0", started=-HOUR),
         running("indep", gpus=(6, 7), priority=-1, unit="indep/1", started=-HOUR),
         waiting("urgent", gpus=2, priority=1)),
        ["indep/0"],
        "Preempting 1 lower-priority worker(s) of indep to start",
    ),
    "several runs are listed and their workers counted": Preemption(
        (running("a", gpus=(0, 1, 2, 3), workers=2, priority=-5, started=-HOUR),
         running("b", gpus=(4, 5, 6, 7), priority=-5, started=-2 * HOUR),
         waiting("urgent", gpus=8, priority=1)),
        ["a", "b"],
        "Preempting 3 lower-priority worker(s) of a, b to start",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", PREEMPTION.values(), ids=PREEMPTION.keys())
def test_preemption(case: Preemption) -> None:
    p = plan(snap(*case.runs), NOW)
    assert [v.unit_id for v in p.preemptions] == case.victims
    assert all(v.for_run.name == "urgent" for v in p.preemptions)
    assert reasons(p)["urgent"] == case.reason
    assert p.head is not None and p.head.run == "urgent"
    assert p.head.preempting == bool(case.victims)


def test_waiting_for_preempted_workers_holds_the_room() -> None:
    p = plan(
        snap(
            running(
                "victim",
                gpus=(0, 1, 2, 3, 4, 5),
                priority=-5,
                workers=2,
                stop_deadline=20,
                stopping_for="urgent",
            ),
            waiting("urgent", gpus=8, priority=1, at=0),
            waiting("sneaky", gpus=2, limit=5, at=1),
            waiting("nolimit", gpus=2, at=2),
        ),
        NOW,
    )
    assert p.preemptions == ()
    assert reasons(p)["urgent"] == "Starting: waiting for 2 preempted worker(s) to stop"
    assert started(p) == []
    assert p.head is not None and p.head.held_gpus == (6, 7)


def test_other_workspaces_are_anonymised_for_members() -> None:
    p = plan(
        snap(
            running("secret", gpus=tuple(range(8)), priority=-1, ws="nlp"),
            waiting("urgent", gpus=8, priority=1, ws="vision", at=0),
            waiting("mine", gpus=1, ws="vision", at=1),
            waiting("theirs", gpus=1, ws="nlp", at=2),
        ),
        NOW,
    )
    vision = Viewer(frozenset({"vision"}))
    nlp = Viewer(frozenset({"nlp"}))
    assert reasons(p, vision)["urgent"] == (
        "Preempting 1 lower-priority worker(s) of a job in another namespace to start"
    )
    assert reasons(p)["urgent"] == "Preempting 1 lower-priority worker(s) of secret to start"
    assert reasons(p, nlp)["theirs"] == (
        "Queued behind a job in another namespace, which starts by 2026-10-01 12:01 UTC"
    )
    assert (
        reasons(p, vision)["mine"] == "Queued behind urgent, which starts by 2026-10-01 12:01 UTC"
    )


def test_several_anonymous_runs_are_counted() -> None:
    p = plan(
        snap(
            running("s1", gpus=(0, 1, 2, 3), priority=-1, ws="nlp"),
            running("s2", gpus=(4, 5, 6, 7), priority=-1, ws="nlp"),
            running("mine", cpus=1, priority=-1, ws="vision"),
            waiting("urgent", gpus=8, priority=1, ws="vision"),
        ),
        NOW,
    )
    vision = Viewer(frozenset({"vision"}))
    assert reasons(p, vision)["urgent"] == (
        "Preempting 2 lower-priority worker(s) of 2 jobs in other namespaces to start"
    )


def test_requeued_run_keeps_its_preempted_reason() -> None:
    p = plan(
        snap(
            running("urgent", gpus=tuple(range(8)), priority=10, started=0, limit=HOUR),
            waiting("ft", gpus=8, priority=-100, preempted_by="urgent", at=0),
            waiting("after", gpus=8, priority=-100, preempted_by="urgent", at=1),
        ),
        NOW,
    )
    assert reasons(p)["ft"] == (
        "Preempted by higher-priority work (urgent); waiting to run again. "
        "Next to run (priority -100): starts by 2026-10-01 13:01 UTC as running work ends."
    )
    assert (
        reasons(p)["after"] == "Preempted by higher-priority work (urgent); waiting to run again."
    )


# ---------------------------------------------------------------- GPU indices


@pytest.mark.parametrize(
    ("free", "n", "taken", "left"),
    [
        ([0, 1, 2, 3], 2, (0, 1), [2, 3]),
        ([0, 2, 3, 5, 6, 7], 2, (2, 3), [0, 5, 6, 7]),  # the smallest block that fits
        ([0, 2, 3, 5, 6, 7], 1, (0,), [2, 3, 5, 6, 7]),  # a lone GPU before a block
        ([0, 2, 4, 5], 3, (0, 4, 5), [2]),  # no block fits: largest first
        ([1, 2], 0, (), [1, 2]),
    ],
)
def test_take_gpus_packs_into_the_fewest_gaps(
    free: list[int], n: int, taken: tuple[int, ...], left: list[int]
) -> None:
    assert take_gpus(free, n) == taken
    assert free == left


def test_each_worker_gets_its_own_gpus() -> None:
    p = plan(snap(waiting("two", gpus=2, workers=2)), NOW)
    assert p.starts[0].gpus == ((0, 1), (2, 3))


def test_machine_grace_is_used_in_the_shadow() -> None:
    p = plan(
        snap(
            running("a", gpus=tuple(range(8)), started=0, limit=HOUR),
            waiting("h", gpus=1),
            m=machine(grace=120),
        ),
        NOW,
    )
    assert p.head is not None and p.head.shadow == NOW + HOUR + 120


# ------------------------------------------------------- in-quota preemption

VISION = (workspace("vision", gpus=8, within=True),)  # its runs preempt its own within the quota


@pytest.mark.parametrize(
    ("runs", "victims", "reason"),
    [
        # the urgent run of a full workspace preempts the newest of its own sweep
        (
            (
                running("s1", gpus=(0, 1, 2, 3), ws="vision", started=-HOUR),
                running("s2", gpus=(4, 5, 6, 7), ws="vision", started=-60),
                waiting("urgent", gpus=4, ws="vision", priority=5),
            ),
            ["s2"],
            "Preempting 1 lower-priority worker(s) of s2 to start",
        ),
        # fewest: one 4-GPU unit rather than two 2-GPU units, even if newer
        (
            (
                running("a", gpus=(0, 1), ws="vision", started=-50),
                running("b", gpus=(2, 3), ws="vision", started=-40),
                running("c", gpus=(4, 5, 6, 7), ws="vision", started=-HOUR, priority=-1),
                waiting("urgent", gpus=4, ws="vision", priority=5),
            ),
            ["c"],
            "Preempting 1 lower-priority worker(s) of c to start",
        ),
        # equal priority never preempts: a plain quota wait
        (
            (
                running("s1", gpus=tuple(range(8)), ws="vision", priority=5),
                waiting("urgent", gpus=4, ws="vision", priority=5),
            ),
            [],
            "Waits for namespace quota: gpus 8 in use + 4 asked > 8",
        ),
        # another workspace's lower-priority work does not help a quota wait
        (
            (
                running("s1", gpus=(0, 1, 2), ws="vision", priority=5),
                running("s2", gpus=(3, 4, 5, 6, 7), ws="vision", priority=5),
                running("n", gpus=(8, 9), ws="nlp", priority=-5),
                waiting("urgent", gpus=4, ws="vision", priority=5),
            ),
            [],
            "Waits for namespace quota: gpus 8 in use + 4 asked > 8",
        ),
        # already stopping for it: waits for them, preempts no more
        (
            (
                running("s1", gpus=(0, 1, 2, 3), ws="vision"),
                running(
                    "s2",
                    gpus=(4, 5, 6, 7),
                    ws="vision",
                    stop_deadline=NOW + 10,
                    stopping_for="urgent",
                ),
                waiting("urgent", gpus=4, ws="vision", priority=5),
            ),
            [],
            "Starting: waiting for 1 preempted worker(s) to stop",
        ),
    ],
)
def test_in_quota_preemption(
    runs: tuple[WaitingRun | RunningUnit, ...], victims: list[str], reason: str
) -> None:
    p = plan(snap(*runs, m=machine(gpus=12), workspaces=VISION), NOW)
    assert [v.run for v in p.preemptions] == victims
    assert all(v.for_run.name == "urgent" for v in p.preemptions)
    assert reasons(p)["urgent"] == reason
    assert p.head is None and started(p) == []


def test_a_run_over_its_quota_preempts_nothing_unless_its_workspace_says_so() -> None:
    runs = (running("s1", gpus=(0,), ws="vision", priority=-1),
            running("s2", gpus=(1,), ws="vision", priority=-1, started=-60),
            waiting("urgent", gpus=1, ws="vision", priority=5))  # fmt: skip
    quota = workspace("vision", gpus=2)
    p = plan(snap(*runs, m=machine(gpus=4), workspaces=(quota,)), NOW)
    assert p.preemptions == () and p.starts == () and p.head is None
    assert reasons(p)["urgent"] == "Waits for namespace quota: gpus 2 in use + 1 asked > 2"
    within = workspace("vision", gpus=2, within=True)
    p = plan(snap(*runs, m=machine(gpus=4), workspaces=(within,)), NOW)
    assert [v.run for v in p.preemptions] == ["s2"]


def test_in_quota_preemption_blocks_nobody_and_holds_its_room() -> None:
    # 12 GPUs: vision's sweep holds 8 (its quota), 4 are free. The urgent run
    # preempts its own sweep; nlp's run behind it takes the free 4, not the
    # room the urgent run waits for, and nothing becomes the head.
    p = plan(
        snap(
            running("s1", gpus=(0, 1, 2, 3), ws="vision", started=-HOUR),
            running("s2", gpus=(4, 5, 6, 7), ws="vision", started=-60),
            waiting("urgent", gpus=4, ws="vision", priority=5, at=0),
            waiting("other", gpus=4, ws="nlp", at=1),
            waiting("later", gpus=4, ws="nlp", at=2),
            m=machine(gpus=12),
            workspaces=VISION,
        ),
        NOW,
    )
    assert [v.run for v in p.preemptions] == ["s2"]
    assert started(p) == ["other"]
    assert p.head is not None and p.head.run == "later"
    assert "urgent" not in p.quota_waits


def test_in_quota_preemption_beside_the_heads_own() -> None:
    p = plan(
        snap(
            running("s1", gpus=(0,), ws="vision", started=-HOUR),
            running("s2", gpus=(1,), ws="vision", started=-60),
            running("low", gpus=(2, 3), ws="nlp", priority=-5),
            waiting("urgent", gpus=1, ws="vision", priority=10),
            waiting("big", gpus=2, ws="nlp", priority=5),
            m=machine(gpus=4),
            workspaces=(workspace("vision", gpus=2, within=True),),
        ),
        NOW,
    )
    assert [(v.run, v.for_run.name) for v in p.preemptions] == [("s2", "urgent"), ("low", "big")]
    assert reasons(p)["urgent"] == "Preempting 1 lower-priority worker(s) of s2 to start"
    assert reasons(p)["big"] == "Preempting 1 lower-priority worker(s) of low to start"
    assert p.head is not None and p.head.run == "big"
