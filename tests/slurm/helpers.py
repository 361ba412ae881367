"""Helpers shared by the tests against the real Slurm of tests/slurm/setup.sh."""

from __future__ import annotations

import functools
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.model import RunSpec
from runner.runspec.parse import parse_spec
from runner.slurm import SlurmClient, SlurmJob, SlurmSettings, SlurmTarget
from tests.support.harness import wait_for

PREFIX = "slurmtest-"
GPUS = 8  # the fake GPUs setup.sh gives the node
RECORDED = Path(__file__).resolve().parent / "recorded"
SKIP_SETUP = "run tests/slurm/setup.sh as root to start a single-node Slurm"


@functools.cache
def skip_reason() -> str | None:
    """Why the real-Slurm tests cannot run here, or None."""
    if shutil.which("sinfo") is None:
        return f"Slurm's commands are not installed: {SKIP_SETUP}"
    try:
        done = subprocess.run(
            ["sinfo", "--noheader", "--format=%P %G"], capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        return f"slurmctld does not answer within 10 s: {SKIP_SETUP}"
    out = done.stdout
    if done.returncode != 0:
        return f"slurmctld does not answer ({done.stderr.strip()[-120:]}): {SKIP_SETUP}"
    if "low*" not in out or "high" not in out or f"gpu:{GPUS}" not in out:
        return (
            f"this Slurm is not the test cluster (partitions low/high, {GPUS} GPUs): {SKIP_SETUP}"
        )
    return None


def require_slurm() -> None:
    """Skip the calling test module when there is no test Slurm."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason, allow_module_level=True)


def unique(stem: str) -> str:
    return f"{PREFIX}{stem}-{uuid.uuid4().hex[:6]}"


def spec(
    name: str,
    command: str = "true",
    *,
    gpus: int = 0,
    time_limit: int | None = None,
    priority: int = 0,
    workers: int = 1,
    **task: Any,
) -> RunSpec:
    """A run spec whose command is ``sh -c <command>``."""
    template: dict[str, Any] = {
        "image": "busybox",
        "command": "sh",
        "args": ["-c", command],
        "requested_resources": {"gpu_requests": {"count": gpus}},
        **task,
    }
    if time_limit is not None:
        template["time_limit_seconds"] = time_limit
    document = {
        "metadata": {"name": name},
        "spec": {"priority": priority, "workers": workers, "task_template": template},
    }
    return parse_spec(document)


def settings(log_dir: Path, **fields: Any) -> SlurmSettings:
    """Runs go to partition low unless their priority reaches 100 (partition high)."""
    values: dict[str, Any] = {
        "default": SlurmTarget(partition="low"),
        "priority_partitions": ((100, "high"),),
        "log_dir": str(log_dir),
        "workdir": str(log_dir),
        "privileged": True,
    }
    values.update(fields)
    return SlurmSettings(**values)


def job_named(client: SlurmClient, name: str) -> SlurmJob | None:
    found = [job for job in client.jobs() if job.name == name]
    return max(found, key=lambda job: job.job_id, default=None)


def wait_job(
    client: SlurmClient, job_id: int, timeout: float = 30,
    check: Callable[[SlurmJob], bool] | None = None, **want: Any,
) -> SlurmJob:  # fmt: skip
    """Wait until the job's fields have the wanted values (and ``check`` holds); the job
    then."""

    def matches() -> SlurmJob | None:
        time.sleep(0.2)  # squeue is not free: ask five times a second
        job = client.job(job_id)
        if job is None or any(getattr(job, k) != v for k, v in want.items()):
            return None
        return job if check is None or check(job) else None

    found: SlurmJob = wait_for(matches, timeout, f"job {job_id} to have {want}, {check}")
    return found


def cancel_test_jobs(client: SlurmClient, prefixes: tuple[str, ...] = (PREFIX,)) -> None:
    """Cancel every live job of the tests and wait until none holds the node."""
    live = [
        job
        for job in client.jobs()
        if job.name.startswith(prefixes) and job.state in ("PENDING", "RUNNING", "COMPLETING")
    ]
    for job in live:
        client.cancel(job.job_id)
    ids = {job.job_id for job in live}

    def gone() -> bool:
        time.sleep(0.2)
        return not any(j.state in ("RUNNING", "COMPLETING") for j in client.jobs(ids))

    wait_for(gone, 30, "the tests' jobs to end")
