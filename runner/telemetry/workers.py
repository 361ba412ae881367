"""The live workers the sampler measures: the store's live workers, each with the root of
its process tree as its executor knows it.

The process executor's ``meta.json`` names the worker's supervisor (a child subreaper:
every process of the worker descends from it), checked alive by its start time. Docker
containers are not measured yet (``root`` None: their CPU and memory are null); their
GPU memory is null too, as NVML's pids cannot be mapped to them without a tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runner.executors.base import Executor
from runner.executors.tree import is_alive
from runner.executors.workerfiles import META, read_json
from runner.store.db import Store


@dataclass(frozen=True, slots=True)
class LiveWorker:
    run: str
    run_uid: str
    workspace: str
    gpus: tuple[int, ...]
    root: int | None  # the pid whose tree is the worker; None: not measured


def supervisor_pid(state_dir: Path, handle: str) -> int | None:
    """The live supervisor of the process executor's worker ``handle``; None when gone."""
    if not handle or "/" in handle or handle in (".", ".."):
        return None
    meta = read_json(state_dir / handle / META)
    if meta is None:
        return None
    pid, start = meta.get("supervisor_pid"), meta.get("supervisor_start")
    return pid if isinstance(pid, int) and is_alive(pid, start) else None


def live_workers(store: Store, executor: Executor | None) -> list[LiveWorker]:
    state_dir = getattr(executor, "state_dir", None) if executor is not None else None
    found = []
    for w in store.live_workers():
        run = store.get_run(w.run)
        if run is None:
            continue
        root = None
        if isinstance(state_dir, Path) and w.executor in ("process", None) and w.handle:
            root = supervisor_pid(state_dir, w.handle)
        found.append(LiveWorker(run.name, run.run_uid, run.workspace, w.gpus, root))
    return found
