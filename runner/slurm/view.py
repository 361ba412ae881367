"""Slurm's queue in the shape the API shows the built-in planner's: order, head, reasons.

Pure: squeue's jobs and the active runs in, a :class:`~runner.planner.plan.Plan` (no
starts, no preemptions: Slurm makes those) and Slurm's start estimates out.
"""

from __future__ import annotations

from collections.abc import Mapping

from runner.model import Resources
from runner.planner.estimates import Estimate
from runner.planner.plan import Head, Plan
from runner.reasons import Reason
from runner.slurm.jobs import SlurmJob, start_estimate
from runner.slurm.reasons import describe, priority_of
from runner.store.db import RunRow


def slurm_plan(
    jobs: Mapping[int, SlurmJob], runs: Mapping[str, RunRow], now: float
) -> tuple[Plan, dict[str, Estimate]]:
    """Pending jobs of ``runs`` by Slurm's priority; the head is the job Slurm holds room
    for (reason ``Resources``), its start ``squeue --start``'s."""
    queue = list(jobs.values())
    pending = sorted((j for j in queue if j.pending), key=lambda j: (-j.priority, j.job_id))
    ours = [j for j in pending if j.name in runs]
    reasons: dict[str, Reason] = {}
    for job in ours:
        reason = describe(job, queue, now)
        if reason is not None:
            reasons[job.name] = reason
    heads = [j for j in ours if j.reason == "Resources"]
    head = None
    if heads:
        top = heads[0]
        run = runs[top.name]
        head = Head(
            top.name, run.workspace, priority_of(top), start_estimate(top, now), Resources()
        )
    starts = {j.name: start_estimate(j, now) for j in ours}
    estimates = {name: Estimate(t) for name, t in starts.items() if t is not None}
    plan = Plan((), (), head, reasons, frozenset(), tuple(j.name for j in ours))
    return plan, estimates
