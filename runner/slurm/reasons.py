"""Slurm's job states and reasons in Astraeus's words. Pure.

Slurm gives the job it plans to start next, the one it holds room for, the
reason ``Resources``; jobs behind it wait for ``Priority``. So:

- ``Resources`` -> ``Next to run (priority P): starts by <estimate> UTC as
  running work ends.`` (``…: waits for running work to end`` when Slurm has no
  estimate: some running work has no time limit);
- ``Priority`` -> ``Queued behind <the Resources job of its partition>, which
  starts by …``;
- QOS and association limits -> the quota message (the caller computes the
  numbers; without them the message names Slurm's limit);
- anything else in Slurm's own words: ``Slurm: <Reason>``.

P is the Astraeus priority, ``-nice``. Jobs name runs through :class:`RunRef`,
so another workspace's run reads ``a job in another namespace``; a job that
Astraeus did not submit belongs to the workspace ``slurm:<account or user>``,
which no member has.
"""

from __future__ import annotations

from collections.abc import Sequence

from runner.durations import utc_minute
from runner.model import RunState
from runner.reasons import Reason, ReasonCode, RunRef
from runner.slurm.jobs import SlurmJob, start_estimate
from runner.slurm.script import workspace_of_comment

_STATES = {
    RunState.QUEUED: (
        "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT",
    ),
    RunState.STARTING: ("CONFIGURING",),
    RunState.RUNNING: ("RUNNING", "SUSPENDED", "STOPPED", "RESIZING", "SIGNALING", "STAGE_OUT"),
    RunState.STOPPING: ("COMPLETING",),
    RunState.SUCCEEDED: ("COMPLETED",),
    RunState.CANCELLED: ("CANCELLED", "PREEMPTED"),
    RunState.FAILED: ("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"),
}  # fmt: skip
_STATE_OF = {slurm: ours for ours, names in _STATES.items() for slurm in names}
_FINISHED = {
    "TIMEOUT": "Time limit reached",
    "NODE_FAIL": "Failed: its node failed (Slurm: NODE_FAIL)",
    "OUT_OF_MEMORY": "Failed: out of memory (Slurm: OUT_OF_MEMORY)",
    "BOOT_FAIL": "Failed: its node did not boot (Slurm: BOOT_FAIL)",
    "DEADLINE": "Failed: its deadline passed (Slurm: DEADLINE)",
    "PREEMPTED": "Preempted by higher-priority work, not requeued (Slurm: PREEMPTED)",
    "CANCELLED": "Cancelled in Slurm",
}
_QUOTA_PREFIXES = ("Assoc", "QOS")


def run_state(job: SlurmJob) -> RunState:
    """The Astraeus state of a Slurm job; a state this module does not know reads Queued."""
    return _STATE_OF.get(job.state, RunState.QUEUED)


def priority_of(job: SlurmJob) -> int:
    """The Astraeus priority a job was submitted with: ``-nice``."""
    return -job.nice


def job_ref(job: SlurmJob) -> RunRef:
    """The run a job is, for messages: its workspace from the comment Astraeus wrote."""
    workspace = workspace_of_comment(job.comment)
    return RunRef(job.name, workspace or f"slurm:{job.account or job.user or 'unknown'}")


def describe(
    job: SlurmJob, queue: Sequence[SlurmJob], now: float, quota_message: str | None = None
) -> Reason | None:
    """Why ``job`` is where it is, among the jobs of ``queue``; None when it runs or succeeded.

    ``quota_message`` is the caller's quota message (``Waits for namespace quota: gpus
    6 in use + 4 asked > 8``) for a job that waits on a QOS or association limit.
    """
    state = run_state(job)
    if state is RunState.QUEUED:
        return _waiting(job, queue, now, quota_message)
    if state in (RunState.FAILED, RunState.CANCELLED):
        return Reason(_finished(job), code=ReasonCode.MESSAGE)
    if state is RunState.STOPPING:
        return Reason("Stopping: Slurm is ending its processes", code=ReasonCode.STOPPING)
    return None


def head_of(job: SlurmJob, queue: Sequence[SlurmJob]) -> SlurmJob | None:
    """The job Slurm holds room for ahead of ``job``: reason Resources, a shared partition."""
    partitions = set(job.partition.split(","))
    heads = [
        other
        for other in queue
        if other.pending
        and other.reason == "Resources"
        and other.job_id != job.job_id
        and partitions & set(other.partition.split(","))
    ]
    return max(heads, key=lambda other: (other.priority, -other.job_id), default=None)


def _waiting(
    job: SlurmJob, queue: Sequence[SlurmJob], now: float, quota_message: str | None
) -> Reason:
    reason = job.reason
    if reason == "Resources":
        return head_message(priority_of(job), start_estimate(job, now))
    if reason == "Priority":
        head = head_of(job, queue)
        if head is None:
            return Reason(
                "Queued behind higher-priority jobs (Slurm: Priority)", code=ReasonCode.MESSAGE
            )
        return behind_message(job_ref(head), start_estimate(head, now))
    if reason.startswith(_QUOTA_PREFIXES):
        code = ReasonCode.QUOTA_OVER if "PerJob" in reason else ReasonCode.QUOTA_WAIT
        return Reason(quota_message or _quota_words(reason), code=code)
    if reason in ("BeginTime", "None") and job.restarts:
        return Reason(
            f"Requeued by Slurm (restart {job.restarts}); waiting to run again.",
            code=ReasonCode.MESSAGE,
        )
    if reason == "None":
        return Reason(
            "Submitted to Slurm; waiting for its scheduler to look at it", code=ReasonCode.MESSAGE
        )
    return Reason(_slurm_words(job), code=ReasonCode.MESSAGE)


def head_message(priority: int, starts: float | None) -> Reason:
    if starts is None:
        text = f"Next to run (priority {priority}): waits for running work to end"
        return Reason(text, code=ReasonCode.HEAD_WAITS)
    return Reason(
        f"Next to run (priority {priority}): starts by {utc_minute(starts)} as running work ends.",
        code=ReasonCode.HEAD_WAITS,
    )


def behind_message(head: RunRef, starts: float | None) -> Reason:
    if starts is None:
        text = "Queued behind {0}, which waits for running work to end"
        return Reason.of(text, head, code=ReasonCode.QUEUED_BEHIND)
    text = "Queued behind {0}, which starts by " + utc_minute(starts)
    return Reason.of(text, head, code=ReasonCode.QUEUED_BEHIND)


def _quota_words(reason: str) -> str:
    if "PerJob" in reason:
        return (
            "Waits for more than the namespace's quota allows at all "
            f"(Slurm: {reason}): raise the quota or ask for less."
        )
    return f"Waits for namespace quota (Slurm: {reason})"


def _finished(job: SlurmJob) -> str:
    if job.state == "FAILED":
        if job.reason == "NonZeroExitCode" and job.exit_code is not None:
            return f"Failed: exited with code {job.exit_code}"
        return f"Failed ({_slurm_words(job)})"
    return _FINISHED.get(job.state, f"Slurm: {job.state}")


def _slurm_words(job: SlurmJob) -> str:
    words = f"Slurm: {job.reason}"
    return f"{words} ({job.description})" if job.description else words
