"""Slurm as Astraeus's back-end: the pieces a daemon in front of Slurm is made of.

Pure functions do the thinking, one small class does the talking:

- :mod:`runner.slurm.script`: a :class:`~runner.model.RunSpec` becomes a
  :class:`BatchJob` (sbatch options and script) through :func:`build_batch`,
  under :class:`SlurmSettings` (partitions and accounts per workspace, shared
  paths of drives, pyxis, log folder).
- :mod:`runner.slurm.jobs`: squeue's output (JSON or ``--Format``) becomes
  :class:`SlurmJob` records.
- :mod:`runner.slurm.reasons`: a job's state and reason in Astraeus's words
  (:func:`run_state`, :func:`describe`).
- :mod:`runner.slurm.client`: :class:`SlurmClient` runs sbatch, scancel,
  scontrol and squeue with timeouts; every failure is one :class:`SlurmError`.
- :mod:`runner.slurm.front`: the daemon's back end for a Slurm cluster (an
  implementation of runner.engine.backend.Backend), with its queue's view
  (:mod:`runner.slurm.view`), the runs' requests carried to their jobs
  (:mod:`runner.slurm.requests`) and the jobs' ends carried to their runs
  (:mod:`runner.slurm.outcomes`).

Where Slurm differs from the single-host planner:

- Backfill: Slurm holds room for its top pending job on whole nodes; a job
  behind it starts early only if its time limit ends before the reserved start,
  even when the GPUs it wants are ones the top job does not need.
- Preemption is by partition (``PreemptType=preempt/partition_prio``): a job in
  a partition of higher PriorityTier requeues jobs of lower ones, whatever
  their nice. Slurm counts that requeue as a restart (``restarts``), and keeps
  a requeued job waiting (reason ``BeginTime``) for about two minutes.
- The grace is the victim's partition's ``GraceTime``: job steps get SIGTERM
  when it starts (the batch shell does not), the requeue comes when it has
  passed and Slurm next looks (seconds later), then ``KillWait`` until SIGKILL.
- Time limits are whole minutes; an unlimited job counts as ending in a year.
- Priority p is ``--nice=-p``, and only root or an operator may set a negative
  nice.
"""

from runner.config.slurm import SlurmSettings, SlurmTarget
from runner.slurm.client import Finished, Runner, SlurmClient, run_command
from runner.slurm.errors import SlurmError
from runner.slurm.jobs import (
    SlurmJob,
    parse_squeue_format,
    parse_squeue_json,
    squeue_format,
    start_estimate,
)
from runner.slurm.reasons import describe, head_of, job_ref, priority_of, run_state
from runner.slurm.script import (
    BatchJob,
    build_batch,
    nice_for,
    pyxis_image,
    time_minutes,
    workspace_of_comment,
)

__all__ = [
    "BatchJob",
    "Finished",
    "Runner",
    "SlurmClient",
    "SlurmError",
    "SlurmJob",
    "SlurmSettings",
    "SlurmTarget",
    "build_batch",
    "describe",
    "head_of",
    "job_ref",
    "nice_for",
    "parse_squeue_format",
    "parse_squeue_json",
    "priority_of",
    "pyxis_image",
    "run_command",
    "run_state",
    "squeue_format",
    "start_estimate",
    "time_minutes",
    "workspace_of_comment",
]
