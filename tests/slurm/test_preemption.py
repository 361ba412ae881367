"""Preemption on the real Slurm: a run in partition high requeues one in partition low.

Where Slurm differs from the single-host planner: preemption follows the
partitions' PriorityTier, not the runs' priorities; the victim's step hears
SIGTERM when its partition's GraceTime starts, the requeue follows when that
has passed; Slurm counts the requeue as a restart, and keeps the requeued job
waiting (reason BeginTime) before it may start again.
"""

from __future__ import annotations

import time
from pathlib import Path

from runner.model import RunState
from runner.slurm import SlurmClient, build_batch, describe, run_state
from tests.slurm.helpers import GPUS, require_slurm, settings, spec, unique, wait_job
from tests.support.harness import wait_for

require_slurm()

CHECKPOINTING = (
    'echo "start restart=$ASTRAEUS_RESTART_COUNT"; '
    "trap 'echo \"SIGTERM restart=$ASTRAEUS_RESTART_COUNT\"; exit 0' TERM; "
    "sleep 600 & wait"
)


def test_a_high_partition_run_requeues_a_low_one_and_slurm_counts_a_restart(
    client: SlurmClient, log_dir: Path
) -> None:
    victim_name = unique("victim")
    log = log_dir / f"{victim_name}.log"
    victim = client.submit(
        build_batch(spec(victim_name, CHECKPOINTING, gpus=GPUS), settings(log_dir), workspace="w")
    )
    wait_job(client, victim, state="RUNNING")
    wait_for(
        lambda: log.exists() and "start restart=0" in log.read_text(), 15, "the victim's start"
    )

    urgent_run = spec(unique("urgent"), "sleep 1", gpus=4, time_limit=60, priority=100)
    batch = build_batch(urgent_run, settings(log_dir), workspace="w")
    assert "--partition=high" in batch.options and "--nice=-100" in batch.options
    started = time.monotonic()
    urgent = client.submit(batch)

    requeued = wait_job(client, victim, timeout=60, state="PENDING", restarts=1, reason="BeginTime")
    took = time.monotonic() - started
    wait_for(lambda: client.job(urgent).state in ("RUNNING", "COMPLETED"), 15, "urgent to run")  # type: ignore[union-attr]

    assert "SIGTERM restart=0" in log.read_text(), "the step heard SIGTERM"
    assert "CANCELLED AT" in log.read_text() and "DUE TO PREEMPTION" in log.read_text()
    assert run_state(requeued) is RunState.QUEUED
    message = describe(requeued, client.jobs(), time.time())
    assert message is not None
    assert message.render() == "Requeued by Slurm (restart 1); waiting to run again."
    grace = client.partition_grace("low")
    assert grace == 2
    assert grace <= took < 45, f"preempted {took:.1f} s after the urgent run came"


def test_equal_partitions_never_preempt_whatever_the_priority(
    client: SlurmClient, log_dir: Path
) -> None:
    low = client.submit(
        build_batch(
            spec(unique("low"), "sleep 600", gpus=GPUS, priority=-50),
            settings(log_dir),
            workspace="w",
        )
    )
    wait_job(client, low, state="RUNNING")
    eager = client.submit(
        build_batch(
            spec(unique("eager"), gpus=4, time_limit=60, priority=50),
            settings(log_dir),
            workspace="w",
        )
    )

    waiting = wait_job(client, eager, reason="Resources")
    time.sleep(3)  # a few backfill cycles: nothing is preempted
    assert client.job(low).state == "RUNNING"  # type: ignore[union-attr]
    assert waiting.partition == "low" and waiting.nice == -50
