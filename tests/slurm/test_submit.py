"""Runs submitted to the real Slurm: resources, environment, exit codes, priority, errors."""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from runner.model import RunState
from runner.slurm import SlurmClient, SlurmError, SlurmTarget, build_batch, describe, run_state
from tests.slurm.helpers import GPUS, require_slurm, settings, spec, unique, wait_job
from tests.support.harness import wait_for

require_slurm()

SHOW_ENV = (
    "echo worker=$ASTRAEUS_WORKER_INDEX/$ASTRAEUS_WORKER_COUNT run=$ASTRAEUS_RUN_NAME"
    " ws=$ASTRAEUS_WORKSPACE gpus=$ASTRAEUS_GPU_COUNT cuda=$CUDA_VISIBLE_DEVICES"
    " job=$SLURM_JOB_NAME restart=$ASTRAEUS_RESTART_COUNT foo=$FOO"
)


def log_lines(log_dir: Path, name: str) -> list[str]:
    path = log_dir / f"{name}.log"
    return path.read_text().splitlines() if path.exists() else []


def test_a_run_gets_its_gpus_time_and_environment(client: SlurmClient, log_dir: Path) -> None:
    name = unique("env")
    run = spec(
        name,
        f"{SHOW_ENV}; sleep 2",
        gpus=2,
        time_limit=90,
        priority=5,
        env={"FOO": "a b"},
        requested_resources={
            "gpu_requests": {"count": 2},
            "cpu_cores": 2,
            "memory_bytes": 1 << 30,
        },
    )
    job_id = client.submit(build_batch(run, settings(log_dir), workspace="vision"))

    running = wait_job(client, job_id, state="RUNNING")
    assert len(running.gpu_indices) == 2
    assert (running.gpus, running.time_limit_seconds, running.nice) == (2, 120, -5)
    assert (running.partition, running.comment) == ("low", "astraeus:vision")
    assert run_state(running) is RunState.RUNNING and describe(running, [], time.time()) is None

    done = wait_job(client, job_id, state="COMPLETED")
    assert (run_state(done), done.exit_code, done.restarts) == (RunState.SUCCEEDED, 0, 0)
    cuda = ",".join(str(i) for i in running.gpu_indices)
    assert log_lines(log_dir, name) == [
        f"worker=0/1 run={name} ws=vision gpus=2 cuda={cuda} job={name} restart=0 foo=a b"
    ]


def test_a_gang_is_one_job_with_a_task_per_worker(client: SlurmClient, log_dir: Path) -> None:
    name = unique("gang")
    run = spec(name, SHOW_ENV, gpus=1, workers=2, time_limit=60)
    job_id = client.submit(build_batch(run, settings(log_dir), workspace="vision"))

    done = wait_job(client, job_id, state="COMPLETED")
    assert (done.gpus, done.tasks) == (2, 2)
    lines = sorted(log_lines(log_dir, name))
    assert [line.split()[0] for line in lines] == ["worker=0/2", "worker=1/2"]
    devices = {re.search(r"cuda=(\S+)", line).group(1) for line in lines}  # type: ignore[union-attr]
    assert len(devices) == 2, "each worker sees its own GPU"


def test_a_failing_run_reports_its_exit_code(client: SlurmClient, log_dir: Path) -> None:
    job_id = client.submit(
        build_batch(spec(unique("exit"), "exit 3"), settings(log_dir), workspace="w")
    )

    failed = wait_job(client, job_id, state="FAILED")
    assert (failed.exit_code, failed.reason) == (3, "NonZeroExitCode")
    assert run_state(failed) is RunState.FAILED
    assert describe(failed, [], time.time()).render() == "Failed: exited with code 3"  # type: ignore[union-attr]


def test_a_new_priority_reorders_the_queue(client: SlurmClient, log_dir: Path) -> None:
    names = [unique("block"), unique("first"), unique("second")]
    jobs = [
        client.submit(
            build_batch(
                spec(n, "sleep 300", gpus=g, time_limit=300), settings(log_dir), workspace="w"
            )
        )
        for n, g in zip(names, (GPUS, 1, 1), strict=True)
    ]
    wait_job(client, jobs[0], state="RUNNING")
    wait_job(client, jobs[1], reason="Resources")
    wait_job(client, jobs[2], reason="Priority")

    client.set_priority(jobs[2], 10, privileged=True)

    second = wait_job(client, jobs[2], reason="Resources")
    assert second.nice == -10
    wait_job(client, jobs[1], reason="Priority")

    def both_estimated() -> tuple[str, str] | None:
        # Slurm's backfill pass sets a start estimate some time after the change:
        # until then both say they wait for running work to end.
        time.sleep(0.2)
        queue = {job.job_id: job for job in client.jobs(jobs)}
        texts = tuple(
            describe(queue[j], list(queue.values()), time.time()).render()  # type: ignore[union-attr]
            for j in (jobs[2], jobs[1])
        )
        return texts if all("starts by" in text for text in texts) else None  # type: ignore[return-value]

    head_text, behind = wait_for(both_estimated, 60, "Slurm's start estimates")
    assert head_text.startswith("Next to run (priority 10): starts by ")
    assert behind.startswith(f"Queued behind {names[2]}, which starts by ")


def test_other_reasons_are_in_slurms_words(client: SlurmClient, log_dir: Path) -> None:
    blocker = client.submit(
        build_batch(spec(unique("block"), "sleep 300", gpus=GPUS), settings(log_dir), workspace="w")
    )
    held = client.submit(
        build_batch(spec(unique("held"), gpus=1), settings(log_dir), workspace="w")
    )
    wait_job(client, blocker, state="RUNNING")
    subprocess.run(["scontrol", "hold", str(held)], check=True, capture_output=True)

    job = wait_job(client, held, reason="JobHeldAdmin")
    assert describe(job, client.jobs(), time.time()).render() == "Slurm: JobHeldAdmin"  # type: ignore[union-attr]


def test_the_json_and_the_format_readers_agree(client: SlurmClient, log_dir: Path) -> None:
    run = spec(unique("both"), "sleep 300", gpus=3, time_limit=600, priority=-7)
    job_id = client.submit(build_batch(run, settings(log_dir), workspace="w"))
    wait_job(client, job_id, state="RUNNING")

    by_json = SlurmClient(json=True).jobs()
    by_format = {job.job_id: job for job in SlurmClient(json=False).jobs()}
    assert by_json and len(by_json) == len(by_format)
    for job in by_json:  # the format shows no GPU indices and no state description
        seen = replace(by_format[job.job_id], gpu_indices=job.gpu_indices)
        assert replace(seen, description=job.description) == job


def test_slurm_refusals_are_one_line(client: SlurmClient, log_dir: Path) -> None:
    wrong = settings(log_dir, default=SlurmTarget(partition="nowhere"))
    with pytest.raises(SlurmError) as caught:
        client.submit(build_batch(spec(unique("nowhere")), wrong, workspace="w"))
    assert (
        str(caught.value) == "sbatch: Batch job submission failed: Invalid partition name specified"
    )
    assert caught.value.code == 1
