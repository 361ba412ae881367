"""The store's rows of a run and its workers as the daemon keeps them, built from a few
fields (the rest those of a two-GPU training run submitted at ``T0``)."""

from __future__ import annotations

import json
from typing import Any

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


def run_row(name: str, workspace: str, state: str, **fields: Any) -> RunRow:
    base: dict[str, Any] = dict(
        name=name,
        workspace=workspace,
        owner="alice",
        uid=1000,
        gid=1000,
        spec_text=json.dumps(
            row_spec(
                name,
                fields.pop("workers", 1),
                fields.pop("after", ()),
                fields.pop("begin_at", None),
            )
        ),
        priority=5,
        state=state,
        reason=None,
        submitted_at=T0,
        started_at=None,
        finished_at=None,
        exit_code=None,
        restarts=0,
        preemptions=0,
        attempts=0,
        preempted_by=None,
        stop_request=None,
        quota_noted=False,
        run_uid="ab" * 16,
    )
    base.update(fields)
    return RunRow(**base)


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
