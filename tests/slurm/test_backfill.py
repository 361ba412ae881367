"""Backfill on the real Slurm, and where it differs from the single-host planner.

The scene, on the node's 8 GPUs: a blocker holds 4 for 3 minutes; the head
wants 6, so Slurm reserves its start for when the blocker's limit ends. Behind
it, a 2-GPU run whose 1-minute limit ends before that starts now (backfill). A
2-GPU run with a 10-minute limit waits, although at the head's start 2 GPUs
are left that the head does not need: Slurm holds the node for its top job,
where the single-host planner would start it (it fits in the room the head
does not need). A run without a time limit waits too.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from runner.slurm import SlurmClient, build_batch, describe, parse_squeue_json, start_estimate
from runner.slurm.jobs import parse_timestamp
from runner.slurm.reasons import behind_message, head_message, job_ref
from tests.slurm.helpers import require_slurm, settings, spec, unique, wait_job

require_slurm()


def test_a_short_run_backfills_before_the_head_and_a_long_one_waits(
    client: SlurmClient, log_dir: Path
) -> None:
    def submit(stem: str, gpus: int, limit: int | None) -> int:
        run = spec(unique(stem), "sleep 600", gpus=gpus, time_limit=limit)
        return client.submit(build_batch(run, settings(log_dir), workspace="w"))

    blocker = submit("blocker", 4, 180)
    blocking = wait_job(client, blocker, state="RUNNING")
    head_id = submit("head", 6, 120)
    short_id, long_id, endless_id = (
        submit("short", 2, 60),
        submit("long", 2, 600),
        submit("endless", 2, None),
    )

    short = wait_job(client, short_id, state="RUNNING")  # backfilled
    head = wait_job(client, head_id, state="PENDING", reason="Resources")
    long = wait_job(client, long_id, state="PENDING", reason="Priority")
    endless = wait_job(client, endless_id, state="PENDING", reason="Priority")

    assert blocking.start is not None and short.start is not None
    reserved = start_estimate(head, time.time())
    assert reserved is not None and abs(reserved - (blocking.start + 180)) <= 2
    assert short.start + 60 <= reserved, "the backfilled run ends before the head's start"

    queue = client.jobs([blocker, head_id, short_id, long_id, endless_id])
    now = time.time()
    assert describe(head, queue, now) == head_message(0, reserved)
    assert describe(long, queue, now) == behind_message(job_ref(head), reserved)
    assert describe(endless, queue, now) == behind_message(job_ref(head), reserved)
    assert (
        describe(long, queue, now)
        .render()
        .startswith(  # type: ignore[union-attr]
            f"Queued behind {head.name}, which starts by "
        )
    )


def test_squeue_start_shows_the_estimate_that_is_parsed(client: SlurmClient, log_dir: Path) -> None:
    blocker = client.submit(
        build_batch(
            spec(unique("blocker"), "sleep 600", gpus=8, time_limit=240),
            settings(log_dir),
            workspace="w",
        )
    )
    waiting = client.submit(
        build_batch(
            spec(unique("waiting"), gpus=4, time_limit=60), settings(log_dir), workspace="w"
        )
    )
    wait_job(client, blocker, state="RUNNING")
    job = wait_job(client, waiting, reason="Resources")

    out = subprocess.run(
        ["squeue", "--start", "--noheader", f"--jobs={waiting}", "--format=%i %S"],
        capture_output=True, text=True, check=True, env={**os.environ, "TZ": "UTC"},
    ).stdout.split()  # fmt: skip
    assert out[0] == str(waiting)
    assert parse_timestamp(out[1]) == job.start == start_estimate(job, time.time())
    raw = subprocess.run(["squeue", "--json"], capture_output=True, text=True, check=True)
    assert [j.start for j in parse_squeue_json(raw.stdout) if j.job_id == waiting] == [job.start]


def test_behind_work_without_a_time_limit_the_start_is_unknown(
    client: SlurmClient, log_dir: Path
) -> None:
    endless = client.submit(
        build_batch(spec(unique("endless"), "sleep 600", gpus=4), settings(log_dir), workspace="w")
    )
    head_id = client.submit(
        build_batch(spec(unique("head"), gpus=8, time_limit=60), settings(log_dir), workspace="w")
    )
    wait_job(client, endless, state="RUNNING")
    # its start time comes with a scheduling pass that may follow the reason's
    head = wait_job(client, head_id, reason="Resources", check=lambda j: j.start is not None)

    assert head.start > time.time() + 300 * 86400  # "in a year"
    assert start_estimate(head, time.time()) is None
    message = describe(head, client.jobs([endless, head_id]), time.time())
    assert message is not None
    assert message.render() == "Next to run (priority 0): waits for running work to end"
