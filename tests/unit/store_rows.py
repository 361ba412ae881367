"""The store's rows of a run and its workers as the daemon keeps them, built from a few
fields (the rest those of a two-GPU training run submitted at ``T0``)."""

from __future__ import annotations

import json
from typing import Any

from runner.model import RunState
from runner.store.db import RunRow, WorkerRow

T0 = 1_790_000_000.0


def row_spec(
    name: str, workers: int = 1, after: tuple[str, ...] = (), begin_at: str | None = None
) -> dict[str, Any]:
    task = {"image": "local", "command": "python", "args": ["train.py"],
            "time_limit_seconds": 7200, "requested_resources": {"gpu_requests": {"count": 2},
                "per_gpu": {"cpu_cores": 2, "memory_bytes": 1 << 32}}}  # fmt: skip
    spec: dict[str, Any] = {"priority": 5, "workers": workers, "task_template": task}
    if after:
        spec["after"] = list(after)
    if begin_at:
        spec["begin_at"] = begin_at
    return {"metadata": {"name": name}, "spec": spec}


def queued_row(name: str, spec_text: str, submitted_at: float, **fields: Any) -> RunRow:
    """A run's row as a submit writes it (queued, nothing started yet): owned by root in
    the default workspace at priority 0 unless ``fields`` say otherwise."""
    row: dict[str, Any] = dict(
        name=name, workspace="default", owner="root", uid=0, gid=0, spec_text=spec_text,
        priority=0, state=RunState.QUEUED, reason=None, submitted_at=submitted_at,
        started_at=None, finished_at=None, exit_code=None, restarts=0, preemptions=0,
        attempts=0, preempted_by=None, stop_request=None, quota_noted=False,
    )  # fmt: skip
    row.update(fields)
    return RunRow(**row)


def run_row(name: str, workspace: str, state: str, **fields: Any) -> RunRow:
    spec = row_spec(
        name, fields.pop("workers", 1), fields.pop("after", ()), fields.pop("begin_at", None)
    )
    base: dict[str, Any] = dict(
        workspace=workspace, owner="alice", uid=1000, gid=1000, priority=5, state=state,
        run_uid="ab" * 16,
    )  # fmt: skip
    text = fields.pop("spec_text") if "spec_text" in fields else json.dumps(spec)
    base.update(fields)
    return queued_row(name, text, T0, **base)


def worker_row(run: str, worker: int, state: str, **fields: Any) -> WorkerRow:
    base: dict[str, Any] = dict(
        id=worker + 1,
        run=run,
        attempt=1,
        worker=worker,
        state=state,
        handle="h",
        gpus=(worker * 2, worker * 2 + 1),
        cpu_milli=4000,
        memory=8 << 30,
        started_at=T0 + 10,
        stop_reason=None,
        stop_deadline=None,
        stopping_for=None,
        killed=False,
        exit_code=None,
        error=None,
        finished_at=None,
    )
    base.update(fields)
    return WorkerRow(**base)
