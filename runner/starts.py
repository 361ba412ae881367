"""Starting the workers the plan says may start: written first, then started."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runner.executors.base import Executor, ExecutorError, Mount, WorkerLaunch
from runner.model import MountMode, Reason, RunSpec
from runner.scheduler import Start
from runner.snapshot import SpecCache
from runner.store import RunRow, Store

if TYPE_CHECKING:
    from runner.loop import LoopSettings

log = logging.getLogger("astraeus.loop")


@dataclass(frozen=True)
class StartContext:
    store: Store
    executor: Executor
    settings: LoopSettings
    specs: SpecCache


def worker_env(
    run: RunRow, spec: RunSpec, worker: int, gpus: tuple[int, ...], remap: bool
) -> dict[str, str]:
    """The environment every worker gets (DESIGN.md's contract), over the spec's own."""
    visible = ",".join(str(i) for i in (range(len(gpus)) if remap else gpus))
    env = dict(spec.task.env)
    env.update(
        ASTRAEUS_RUN_NAME=run.name,
        ASTRAEUS_WORKSPACE=run.workspace,
        ASTRAEUS_GPU_COUNT=str(len(gpus)),
        ASTRAEUS_WORKER_INDEX=str(worker),
        ASTRAEUS_WORKER_COUNT=str(spec.workers),
        ASTRAEUS_RESTART_COUNT=str(run.restarts),
        SLURM_JOB_NAME=run.name,
        CUDA_DEVICE_ORDER="PCI_BUS_ID",  # CUDA numbers GPUs as NVML does
        CUDA_VISIBLE_DEVICES=visible,
        NVIDIA_VISIBLE_DEVICES=",".join(str(i) for i in gpus) if gpus else "void",
    )
    return env


def _mounts(ctx: StartContext, spec: RunSpec) -> tuple[Mount, ...]:
    mounts = []
    for ref in spec.task.drives:
        root = ctx.settings.drives.get(ref.name)
        if root is None:
            raise ExecutorError(f"drive {ref.name} is not in this machine's config")
        source = os.path.realpath(root)
        mounts.append(Mount(source, ref.mount_path, ref.mode is MountMode.READ_ONLY))
    return tuple(mounts)


def _argv(spec: RunSpec) -> tuple[str, ...]:
    head = (spec.task.command,) if spec.task.command else ()
    return head + spec.task.args


def _claim(ctx: StartContext, start: Start, now: float) -> tuple[RunRow, int] | None:
    """Write the decision: worker rows in Starting. None if the run changed meanwhile."""
    store = ctx.store
    with store.transaction() as tx:
        row = tx.execute(
            "SELECT state, stop_request, attempts FROM runs WHERE name = ?", (start.run,)
        ).fetchone()
        if row is None or row["stop_request"] is not None or row["state"] not in (
            "Queued", "Running"
        ):  # fmt: skip
            return None
        attempt = row["attempts"] + 1
        run = store.get_run(start.run)
        assert run is not None
        spec = ctx.specs.get(run)
        worker = spec.worker_resources()
        state = "Starting" if row["state"] == "Queued" else row["state"]
        store.update_run(tx, start.run, attempts=attempt, state=state, started_at=now,
                         reason=None, preempted_by=None)  # fmt: skip
        for index, gpus in zip(start.workers, start.gpus, strict=True):
            store.insert_worker(
                tx, start.run, attempt, index, gpus, worker.cpu_milli, worker.memory, now
            )
        gpu_list = ",".join(str(g) for gpus in start.gpus for g in gpus) or "none"
        how = "Backfilled" if start.backfill else "Started"
        text = f"{how}: attempt {attempt}, worker(s) {_indices(start)}, GPUs {gpu_list}"
        store.add_event(tx, run.name, run.workspace, "Started", Reason(text), now)
    return run, attempt


def _indices(start: Start) -> str:
    return ",".join(str(i) for i in start.workers)


def launch_for(ctx: StartContext, start: Start, now: float) -> None:
    """Start the workers of one planned start; a failure fails the run clearly."""
    claimed = _claim(ctx, start, now)
    if claimed is None:
        return
    run, attempt = claimed
    spec = ctx.specs.get(run)
    logs = ctx.settings.logs_dir / run.name
    for index, gpus in zip(start.workers, start.gpus, strict=True):
        try:
            launch = WorkerLaunch(
                run=run.name, attempt=attempt, worker=index, image=spec.task.image,
                argv=_argv(spec),
                env=worker_env(run, spec, index, gpus, ctx.settings.executor_remaps_gpus),
                gpus=gpus, cpu_milli=spec.worker_resources().cpu_milli,
                memory=spec.worker_resources().memory, mounts=_mounts(ctx, spec),
                uid=run.uid, gid=run.gid, log_path=logs / f"{attempt}-{index}.log",
                instance=ctx.settings.instance,
            )  # fmt: skip
            handle = ctx.executor.start(launch)
        except ExecutorError as e:
            _start_failed(ctx, run, attempt, index, str(e), now)
            continue
        with ctx.store.transaction() as tx:
            tx.execute(
                "UPDATE workers SET state='Running', handle=? WHERE run=? AND attempt=?"
                " AND worker=? AND state='Starting'",
                (handle, run.name, attempt, index),
            )
            tx.execute("UPDATE runs SET state='Running' WHERE name=? AND state='Starting'",
                       (run.name,))  # fmt: skip


def _start_failed(
    ctx: StartContext, run: RunRow, attempt: int, index: int, error: str, now: float
) -> None:
    log.warning("could not start %s worker %d: %s", run.name, index, error)
    text = Reason(f"Could not start worker {index}: {error}")
    with ctx.store.transaction() as tx:
        tx.execute(
            "UPDATE workers SET state='Exited', error=?, finished_at=? WHERE run=? AND attempt=?"
            " AND worker=? AND state='Starting'",
            (error, now, run.name, attempt, index),
        )
        ctx.store.update_run(tx, run.name, stop_request="failed", reason=text)
        ctx.store.add_event(tx, run.name, run.workspace, "StartFailed", text, now)
