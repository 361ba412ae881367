"""runner.slurm.reasons: Slurm's states and reasons in Astraeus's words, on a recorded queue."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runner.durations import utc_minute
from runner.model import RunState
from runner.reasons import ADMIN, RunRef, Viewer
from runner.slurm import SlurmJob, describe, head_of, job_ref, priority_of, run_state
from tests.unit.slurm_helpers import NOW, QUEUE, UNLIMITED

JOBS = list(QUEUE.values())


def said(job: SlurmJob, viewer: Viewer = ADMIN, **kwargs: str) -> str | None:
    reason = describe(job, JOBS, NOW, **kwargs)
    return None if reason is None else reason.render(viewer)


def test_the_job_slurm_holds_room_for_is_next_to_run() -> None:
    starts = utc_minute(QUEUE["blocker"].end)  # type: ignore[arg-type]
    assert (
        said(QUEUE["head"]) == f"Next to run (priority 0): starts by {starts} as running work ends."
    )


def test_jobs_behind_it_are_queued_behind_it() -> None:
    starts = utc_minute(QUEUE["head"].start)  # type: ignore[arg-type]
    assert head_of(QUEUE["behind"], JOBS) == QUEUE["head"]
    assert said(QUEUE["behind"]) == f"Queued behind slurmrec-head, which starts by {starts}"
    assert said(QUEUE["behind"], Viewer(frozenset({"other"}))) == (
        f"Queued behind a job in another namespace, which starts by {starts}"
    )


def test_without_an_estimate_the_head_waits_for_running_work_to_end() -> None:
    waits, jobs = UNLIMITED["waits"], list(UNLIMITED.values())
    reason = describe(waits, jobs, NOW)
    assert reason is not None
    assert reason.render() == "Next to run (priority 0): waits for running work to end"
    behind = replace(waits, job_id=0, name="later", reason="Priority")
    assert describe(behind, jobs, NOW).render() == (  # type: ignore[union-attr]
        "Queued behind slurmrec-waits, which waits for running work to end"
    )


def test_a_priority_job_with_no_head_in_its_partition() -> None:
    alone = replace(QUEUE["behind"], partition="high")
    assert (
        describe(alone, JOBS, NOW).render()
        == "Queued behind higher-priority jobs (Slurm: Priority)"
    )  # type: ignore[union-attr]


def test_requeued_held_finished_and_running() -> None:
    assert said(QUEUE["requeued"]) == "Requeued by Slurm (restart 1); waiting to run again."
    assert said(QUEUE["held"]) == "Slurm: JobHeldAdmin"
    assert said(QUEUE["exit3"]) == "Failed: exited with code 3"
    assert said(QUEUE["killed"]) == "Failed: exited with code 137"
    assert said(QUEUE["blocker"]) is None and said(QUEUE["done"]) is None


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        ("AssocGrpGRES", "Waits for namespace quota (Slurm: AssocGrpGRES)"),
        ("QOSMaxGRESPerUser", "Waits for namespace quota (Slurm: QOSMaxGRESPerUser)"),
        (
            "QOSMaxGRESPerJob",
            "Waits for more than the namespace's quota allows at all "
            "(Slurm: QOSMaxGRESPerJob): raise the quota or ask for less.",
        ),
        ("Dependency", "Slurm: Dependency"),
        ("None", "Submitted to Slurm; waiting for its scheduler to look at it"),
    ],
)
def test_limits_read_as_quota_and_the_rest_in_slurms_words(reason: str, words: str) -> None:
    assert said(replace(QUEUE["head"], reason=reason)) == words


def test_the_caller_gives_the_quota_numbers() -> None:
    message = "Waits for namespace quota: gpus 6 in use + 4 asked > 8"
    job = replace(QUEUE["head"], reason="AssocGrpGRES")
    assert said(job, quota_message=message) == message


@pytest.mark.parametrize(
    ("state", "reason", "ours", "words"),
    [
        ("PENDING", "Resources", RunState.QUEUED, None),
        ("REQUEUED", "None", RunState.QUEUED, None),
        ("CONFIGURING", "None", RunState.STARTING, None),
        ("RUNNING", "None", RunState.RUNNING, None),
        ("COMPLETING", "None", RunState.STOPPING, "Stopping: Slurm is ending its processes"),
        ("COMPLETED", "None", RunState.SUCCEEDED, None),
        ("TIMEOUT", "TimeLimit", RunState.FAILED, "Time limit reached"),
        (
            "OUT_OF_MEMORY",
            "OutOfMemory",
            RunState.FAILED,
            "Failed: out of memory (Slurm: OUT_OF_MEMORY)",
        ),
        ("NODE_FAIL", "NodeDown", RunState.FAILED, "Failed: its node failed (Slurm: NODE_FAIL)"),
        ("FAILED", "JobLaunchFailure", RunState.FAILED, "Failed (Slurm: JobLaunchFailure)"),
        ("CANCELLED", "None", RunState.CANCELLED, "Cancelled in Slurm"),
        (
            "PREEMPTED",
            "None",
            RunState.CANCELLED,
            "Preempted by higher-priority work, not requeued (Slurm: PREEMPTED)",
        ),
        ("SOMETHING_NEW", "None", RunState.QUEUED, None),
    ],
)
def test_states(state: str, reason: str, ours: RunState, words: str | None) -> None:
    job = SlurmJob(job_id=1, name="r", state=state, reason=reason)
    assert run_state(job) is ours
    if words is not None:
        assert said(job) == words


def test_refs_and_priorities() -> None:
    assert job_ref(QUEUE["blocker"]) == RunRef("slurmrec-blocker", "vision")
    outside = SlurmJob(job_id=1, name="theirs", state="PENDING", account="physics")
    assert job_ref(outside) == RunRef("theirs", "slurm:physics")
    assert job_ref(replace(outside, account="", user="bob")) == RunRef("theirs", "slurm:bob")
    assert (priority_of(QUEUE["blocker"]), priority_of(QUEUE["behind"])) == (5, -3)
