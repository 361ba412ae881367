"""How a Slurm job's end reaches its run: the worker row ends, the run finishes or
is queued again (a restart, while its budget lasts). Called by the front
(runner/slurm/front.py) within its tick; each outcome is one transaction.
"""

from __future__ import annotations

from runner.model import RunState, StopReason, WorkerState
from runner.reasons import Reason, ReasonCode
from runner.slurm.jobs import SlurmJob
from runner.slurm.reasons import describe
from runner.store.db import RunRow, Store, WorkerRow


def ended(
    store: Store, run: RunRow, worker: WorkerRow, job: SlurmJob, restart_limit: int,
    queue: list[SlurmJob], now: float,
) -> bool:  # fmt: skip
    """The job ended: the worker exits, the run succeeds, is cancelled, restarts while its
    budget lasts (not after a time limit), or fails with Slurm's reason."""
    code = job.exit_code
    with store.transaction() as tx:
        store.workers.end(tx, worker.id, WorkerState.EXITED, job.end or now, exit_code=code)
        if run.state in RunState.FINISHED:
            return True
        if job.state == "COMPLETED":
            store.runs.finish(tx, run.name, RunState.SUCCEEDED, job.end or now, None, exit_code=0)
            store.events.add(
                tx,
                run.name,
                run.workspace,
                ReasonCode.SUCCEEDED,
                Reason("Succeeded", code=ReasonCode.MESSAGE),
                now,
            )
        elif job.state == "CANCELLED" or run.stop_request == StopReason.DELETE:
            why = "Deleted" if run.stop_request == StopReason.DELETE else "Cancelled in Slurm"
            store.runs.finish(
                tx, run.name, RunState.CANCELLED, now, Reason(why, code=ReasonCode.MESSAGE)
            )
            store.events.add(
                tx,
                run.name,
                run.workspace,
                ReasonCode.CANCELLED,
                Reason(why, code=ReasonCode.MESSAGE),
                now,
            )
        elif job.state != "TIMEOUT" and run.restarts < restart_limit:
            restarts = run.restarts + 1
            text = Reason(
                f"Restarting: job {job.job_id} ended {job.state} (exit code {code}) "
                f"(restart {restarts} of {restart_limit})",
                code=ReasonCode.MESSAGE,
            )
            store.runs.requeue(tx, run.name, restarts=restarts, reason=text)
            store.events.add(tx, run.name, run.workspace, ReasonCode.RESTARTING, text, now)
        else:
            reason = describe(job, queue, now) or Reason(
                f"Slurm: {job.state}", code=ReasonCode.MESSAGE
            )
            store.runs.finish(tx, run.name, RunState.FAILED, job.end or now, reason,
                                  exit_code=code)  # fmt: skip
            store.events.add(tx, run.name, run.workspace, ReasonCode.FAILED, reason, now)
    return True


def lost(store: Store, run: RunRow, worker: WorkerRow, now: float) -> bool:
    """squeue no longer knows the job (purged after MinJobAge, or the cluster lost it)."""
    deleted = run.stop_request == StopReason.DELETE
    with store.transaction() as tx:
        store.workers.end(tx, worker.id, WorkerState.LOST, now,
                              error="Slurm no longer knows the job")  # fmt: skip
        if run.state not in RunState.FINISHED:
            why = Reason(
                "Deleted" if deleted else "Failed: Slurm no longer knows its job",
                code=ReasonCode.MESSAGE,
            )
            state = RunState.CANCELLED if deleted else RunState.FAILED
            store.runs.finish(tx, run.name, state, now, why)
            store.events.add(tx, run.name, run.workspace, ReasonCode[state.name], why, now)
    return True
