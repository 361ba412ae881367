"""Read a queue described in TOML (machine, workspaces, running and waiting runs).

Used to show what the planner decides for an example queue
(``astra plan config/examples/queue.toml``) and by the planner benchmark.
"""

from __future__ import annotations

import tomllib
from datetime import datetime
from typing import Any

from runner.model import Quota, Resources, Workspace, parse_size
from runner.planner.plan import Machine, RunningUnit, Snapshot, WaitingRun


class QueueFileError(ValueError):
    pass


def _time(value: Any, now: float) -> float:
    """An ISO 8601 time, a TOML datetime, or seconds relative to ``now``."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        return datetime.fromisoformat(value).timestamp()
    if isinstance(value, int | float):
        return now + float(value)
    raise QueueFileError(f"not a time: {value!r}")


def _share(entry: dict[str, Any]) -> int:
    """A shared request's memory on each GPU (``gpu_memory = "20GiB"``), else 0."""
    return parse_size(entry.get("gpu_memory", 0))


def _count(entry: dict[str, Any]) -> int:
    gpus = entry.get("gpus", 0)
    return len(gpus) if isinstance(gpus, list) else int(gpus)


def _resources(entry: dict[str, Any], whole: int) -> Resources:
    count, share = _count(entry), _share(entry)
    return Resources(
        0 if share else count,
        int(float(entry.get("cpu_cores", 0)) * 1000),
        parse_size(entry.get("memory", 0)),
        1,
        (share or whole) * count,
        held_gpus=count,
    )


def load_queue(text: str, where: str) -> tuple[Snapshot, float]:
    """The snapshot a queue file's ``text`` describes, and its ``now``; errors name ``where``.

    Pure, as the rest of the planner: the caller reads the file."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise QueueFileError(f"{where}: {e}") from e
    now = _time(doc.get("now", 0), 0.0)
    m = doc.get("machine", {})
    n = int(m.get("gpus", 8))
    machine = Machine(
        tuple(range(n)),
        int(float(m.get("cpu_cores", 64)) * 1000),
        parse_size(m.get("memory", "512GiB")),
        float(m.get("stop_grace_seconds", 30)),
        gpu_memory=(parse_size(m.get("gpu_memory", "80GiB")),) * n,
    )
    whole = machine.whole_gpu
    workspaces = {}
    for name, ws in doc.get("workspaces", {}).items():
        q = ws.get("quota")
        quota = None
        if q is not None:
            cpu = q.get("cpu_cores")
            mem = q.get("memory")
            quota = Quota(
                q.get("gpus"),
                None if cpu is None else int(float(cpu) * 1000),
                None if mem is None else parse_size(mem),
                q.get("workers"),
                None if q.get("gpu_memory") is None else parse_size(q["gpu_memory"]),
            )
        workspaces[name] = Workspace(
            name,
            quota,
            float(ws.get("weight", 1.0)),
            int(ws.get("max_priority", 0)),
            preempt_within_quota=bool(ws.get("preempt_within_quota", False)),
        )
    running = tuple(
        RunningUnit(
            r["name"],
            r["name"],
            r.get("workspace", "default"),
            int(r.get("priority", 0)),
            _resources(r, whole),
            tuple(r.get("gpus", [])),
            _time(r.get("started_at", 0), now),
            r.get("time_limit_seconds"),
            gpu_share=_share(r),
        )
        for r in doc.get("running", [])
    )
    waiting = tuple(
        WaitingRun(
            w["name"],
            w.get("workspace", "default"),
            int(w.get("priority", 0)),
            _time(w.get("submitted_at", 0), now),
            _resources(w, whole),
            tuple(range(int(w.get("workers", 1)))),
            w.get("time_limit_seconds"),
            gpu_share=_share(w),
            gpu_count=_count(w) if _share(w) else 0,
        )
        for w in doc.get("waiting", [])
    )
    return Snapshot(machine, workspaces, running, waiting), now
