"""The live workers the sampler measures: the store's live workers, each with the root of
its process tree as its executor knows it.

The process executor's ``meta.json`` names the worker's supervisor (a child subreaper:
every process of the worker descends from it), checked alive by its start time.
GPU memory is null too, as NVML's pids cannot be mapped to them without a tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from runner.executors.base import Executor
from runner.executors.cgroupfs import WorkerGroup
from runner.executors.tree import is_alive
from runner.executors.workerfiles import META, read_json
from runner.runspec.parse import SpecError, parse_spec
from runner.store.db import Store


@dataclass(frozen=True, slots=True)
class LiveWorker:
    run: str
    run_uid: str
    workspace: str
    gpus: tuple[int, ...]
    root: int | None  # the pid whose tree is the worker; None: not measured
    gpu_share: int = 0  # bytes it asked on each of its GPUs when it shares them; 0: whole
    cgroup: WorkerGroup | None = None  # the process executor's: measured there instead


def worker_cgroup(executor: Executor | None, started_by: str | None, handle: str
                  ) -> WorkerGroup | None:  # fmt: skip
    """The cgroup of a live process worker (its ``meta.json`` names it); None: none."""
    state_dir = getattr(executor, "state_dir", None)
    if executor is None or executor.name != "process" or started_by not in ("process", None):
        return None
    if not isinstance(state_dir, Path) or not handle or "/" in handle or handle in (".", ".."):
        return None
    meta = read_json(state_dir / handle / META)
    return None if meta is None else WorkerGroup.from_json(meta.get("cgroup"))


def supervisor_pid(state_dir: Path, handle: str) -> int | None:
    """The live supervisor of the process executor's worker ``handle``; None when gone."""
    if not handle or "/" in handle or handle in (".", ".."):
        return None
    meta = read_json(state_dir / handle / META)
    if meta is None:
        return None
    pid, start = meta.get("supervisor_pid"), meta.get("supervisor_start")
    return pid if isinstance(pid, int) and is_alive(pid, start) else None


class _Containers(Protocol):
    def init_pid(self, handle: str) -> int | None: ...


def root_pid(executor: Executor | None, started_by: str | None, handle: str) -> int | None:
    """The root of a live worker's process tree, by the executor that started it."""
    if executor is None or not handle or started_by not in (executor.name, None):
        return None
    state_dir = getattr(executor, "state_dir", None)
    if executor.name == "process" and isinstance(state_dir, Path):
        return supervisor_pid(state_dir, handle)
    if executor.name == "docker" and callable(getattr(executor, "init_pid", None)):
        return cast(_Containers, executor).init_pid(handle)
    return None


def _share(spec: dict[str, Any]) -> int:
    """The memory a run's spec asks on each shared GPU; 0 for whole GPUs."""
    try:
        return parse_spec(spec, stored=True).task.gpu_share
    except SpecError:
        return 0


def live_workers(store: Store, executor: Executor | None) -> list[LiveWorker]:
    found = []
    for w in store.workers.live():
        run = store.runs.get(w.run)
        if run is None:
            continue
        root = root_pid(executor, w.executor, w.handle or "")
        share = _share(run.spec()) if w.gpus else 0
        group = worker_cgroup(executor, w.executor, w.handle or "") if root is not None else None
        found.append(LiveWorker(run.name, run.run_uid, run.workspace, w.gpus, root, share, group))
    return found
