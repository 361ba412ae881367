"""The squeue scenes recorded from a real Slurm (tests/slurm/recorded) read as jobs by
their role in the scene, and a run's spec as the Slurm front takes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.runspec.parse import parse_spec
from runner.slurm import SlurmJob, parse_squeue_format, parse_squeue_json

RECORDED = Path(__file__).resolve().parents[1] / "slurm" / "recorded"
META = json.loads((RECORDED / "meta.json").read_text())
IDS: dict[str, int] = META["jobs"]
NOW = float(META["recorded_at"])


def recorded(scene: str) -> tuple[dict[str, SlurmJob], dict[str, SlurmJob]]:
    """The scene's jobs by role, as read from the JSON and from the --Format output."""
    roles = {job_id: role for role, job_id in IDS.items()}
    by_json = parse_squeue_json((RECORDED / f"{scene}.json").read_text())
    by_format = parse_squeue_format((RECORDED / f"{scene}.format").read_text())
    return (
        {roles[job.job_id]: job for job in by_json},
        {roles[job.job_id]: job for job in by_format},
    )


QUEUE, QUEUE_FORMAT = recorded("queue")
UNLIMITED, UNLIMITED_FORMAT = recorded("unlimited")
IMAGE = "nvcr.io/nvidia/pytorch:24.08-py3"


def run_spec(
    name: str = "ft", *, priority: int = 0, workers: int = 1, gang: bool = True, **task: Any
) -> Any:
    template: dict[str, Any] = {"image": IMAGE, "command": "python", "args": ["train.py"], **task}
    spec = {"priority": priority, "workers": workers, "gang": gang, "task_template": template}
    return parse_spec({"metadata": {"name": name}, "spec": spec})
