"""Starting the workers the plan says may start: written first, then started."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from runner.clock import Now
from runner.durations import utc_minute
from runner.engine.crash import crash_point
from runner.engine.retention import prune_attempt_logs
from runner.engine.settings import LoopSettings
from runner.engine.snapshot import SpecCache
from runner.executors.base import Executor, ExecutorError, Mount, WorkerLaunch
from runner.model import GIB, MountMode, RunSpec, RunState, StopReason
from runner.planner.plan import Start
from runner.reasons import Reason, ReasonCode
from runner.runspec.parse import parse_spec
from runner.store.db import RunRow, Store

log = logging.getLogger("astraeus.loop")


def executor_reachable(executor: Executor) -> bool:
    """False while the executor's engine does not answer (docker: the engine is down)."""
    return executor.reachable()


@dataclass(frozen=True)
class StartContext:
    store: Store
    executor: Executor
    settings: LoopSettings
    specs: SpecCache
    tick: Now | None = None  # both clocks' readings: workers' starts are measured from them
    # a waiting run's first forecast shown (likely start, 90 % start), said as it starts
    forecast: Callable[[str], tuple[float, float] | None] | None = None


def gpu_names(gpus: tuple[int, ...], devices: Mapping[int, str]) -> tuple[str, ...]:
    """What CUDA and Docker call ``gpus``: their indexes, or where ``devices`` names
    them (a machine with MIG instances) their UUIDs."""
    return tuple(devices.get(i, str(i)) for i in gpus)


def mps_limit(share: int, gpus: int) -> str:
    """CUDA MPS's per-device memory limit for a client (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``):
    ``0=20G,1=20G``, each device as the client numbers them (its visible devices, from 0);
    whole GiB when the share is, else MB rounded down."""
    mib = 1024**2
    limit = f"{share // GIB}G" if share % GIB == 0 else f"{share // mib}MB"
    return ",".join(f"{i}={limit}" for i in range(gpus))


def submit_env(run: RunRow) -> dict[str, str]:
    """The caller's environment its submit carried (``spec.task_template.submit_env``)."""
    return dict(parse_spec(run.spec(), stored=True).task.submit_env)


def worker_env(
    run: RunRow,
    spec: RunSpec,
    worker: int,
    gpus: tuple[int, ...],
    remap: bool,
    devices: Mapping[int, str] | None = None,
    mps_share: int = 0,
    carried: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment every worker gets, over the spec's own (docs/scheduling.md).
    ``mps_share``: a shared run's memory on each GPU, passed to CUDA MPS ([machine] mps).
    ``carried``: the caller's environment from the submit, which goes first (the process
    executor's; a container starts from its image's): the spec's ``env`` over it, and
    the daemon's own variables over both."""
    names = gpu_names(gpus, devices or {})
    visible = ",".join(str(i) for i in range(len(gpus))) if remap else ",".join(names)
    env = dict(carried or {})
    env.update(spec.task.env)
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
        NVIDIA_VISIBLE_DEVICES=",".join(names) if gpus else "void",
    )
    if mps_share and gpus:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = mps_limit(mps_share, len(gpus))
    return env


def _mounts(ctx: StartContext, spec: RunSpec) -> tuple[Mount, ...]:
    mounts = []
    for ref in spec.task.drives:
        root = ctx.settings.drives.get(ref.name)
        if root is None:
            raise ExecutorError(f"drive {ref.name} is not in this machine's config")
        source = drive_source(ref.name, str(root))
        mounts.append(Mount(source, ref.mount_path, ref.mode is MountMode.READ_ONLY))
    return tuple(mounts)


def drive_source(name: str, root: str) -> str:
    """The host folder bound for drive ``name``: its configured path, checked at each start.

    Never a symlink's target: every folder from ``/`` down to the drive is opened with
    O_NOFOLLOW, so a drive (or a folder above it) that is, or was swapped for, a symlink
    is refused. And no one but root (or the daemon's user) may be able to swap it after
    this check: each folder above the drive must be theirs and not writable by group or
    others (a sticky folder such as /tmp is fine when the next folder down is theirs).
    ExecutorError, one line, otherwise.
    """
    path = os.path.normpath(root)
    if not os.path.isabs(path):
        raise ExecutorError(f"drive {name}: {root} is not an absolute path")
    trusted = {0, os.geteuid()}
    fd = os.open("/", os.O_PATH | os.O_CLOEXEC)
    try:
        st, shown = os.fstat(fd), ""
        for part in [p for p in path.split("/") if p]:
            parent, shown = st, f"{shown}/{part}"
            child = _open_no_follow(name, fd, part, shown)
            os.close(fd)
            fd, st = child, os.fstat(child)
            _check_parent(name, parent, st, shown, trusted)
        if not stat.S_ISDIR(st.st_mode):
            raise ExecutorError(f"drive {name}: {path} is not a directory")
    finally:
        os.close(fd)
    return path


def _open_no_follow(name: str, dir_fd: int, part: str, shown: str) -> int:
    try:
        fd = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        raise ExecutorError(f"drive {name}: cannot open {shown}: {e.strerror}") from None
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise ExecutorError(
            f"drive {name}: {shown} is a symlink; refusing to mount it (configure the real path)"
        )
    return fd


def _check_parent(
    name: str, parent: os.stat_result, child: os.stat_result, shown: str, trusted: set[int]
) -> None:
    """Refuse a folder above a drive that someone untrusted could change."""
    above = os.path.dirname(shown)
    if parent.st_uid not in trusted:
        raise ExecutorError(
            f"drive {name}: {above} belongs to uid {parent.st_uid}, who could swap {shown}"
            " for a symlink; refusing to mount it (make it root's)"
        )
    writable = parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    sticky_ok = parent.st_mode & stat.S_ISVTX and child.st_uid in trusted
    if writable and not sticky_ok:
        raise ExecutorError(
            f"drive {name}: {above} is writable by group or others, who could swap {shown}"
            " for a symlink; refusing to mount it (chmod go-w it)"
        )


def _argv(spec: RunSpec) -> tuple[str, ...]:
    head = (spec.task.command,) if spec.task.command else ()
    return head + spec.task.args


def _claim(ctx: StartContext, start: Start, now: float) -> tuple[RunRow, int] | None:
    """Write the decision: worker rows in Starting. None if the run changed meanwhile."""
    store = ctx.store
    with store.transaction() as tx:
        row = store.runs.claimable(tx, start.run)
        if (
            row is None
            or row.stop_request is not None
            or row.state not in (RunState.QUEUED, RunState.RUNNING)
        ):
            return None
        attempt = row.attempts + 1
        run = store.runs.get(start.run)
        assert run is not None
        spec = ctx.specs.get(run)
        worker = spec.worker_resources()
        state = RunState.STARTING if row.state == RunState.QUEUED else row.state
        store.runs.claim_start(tx, start.run, attempt, state, now, backfilled=start.backfill)
        mono, boot = (ctx.tick.mono, ctx.tick.boot) if ctx.tick else (None, None)
        for index, gpus in zip(start.workers, start.gpus, strict=True):
            store.workers.insert(
                tx, start.run, attempt, index, gpus, worker.cpu_milli, worker.memory, now,
                mono, boot, ctx.executor.name,
            )  # fmt: skip
        gpu_list = ",".join(str(g) for gpus in start.gpus for g in gpus) or "none"
        how = "Backfilled" if start.backfill else "Started"
        shown = ctx.forecast(start.run) if ctx.forecast is not None else None
        said = "" if shown is None else (
            f" (forecast: likely {utc_minute(shown[0], nearest=True)}, 90 % by"
            f" {utc_minute(shown[1])})"
        )  # fmt: skip
        text = f"{how}: attempt {attempt}, worker(s) {_indices(start)}, GPUs {gpu_list}{said}:"
        why = Reason(text, code=ReasonCode.MESSAGE).then(
            start.why
        )  # the decision log: the rule that let it start
        code = ReasonCode.BACKFILLED if start.backfill else ReasonCode.STARTED
        store.events.add(tx, run.name, run.workspace, code, why, now, forecast=shown)
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
    logs = ctx.settings.logs_dir / run.run_uid  # by id: a name used again starts clean
    prune_attempt_logs(ctx.settings.logs_dir, run.run_uid, attempt, start.workers)
    settings = ctx.settings
    mps = spec.task.share_bytes(settings.machine.shard_bytes) if settings.mps else 0
    # the submit's environment is read from the stored spec here, at the start: the
    # planner's cache of specs keeps none (runner/engine/snapshot.py)
    carried = submit_env(run) if ctx.executor.name == "process" else None
    for index, gpus in zip(start.workers, start.gpus, strict=True):
        try:
            launch = WorkerLaunch(
                run=run.name, attempt=attempt, worker=index, image=spec.task.image,
                argv=_argv(spec),
                env=worker_env(run, spec, index, gpus, ctx.settings.executor_remaps_gpus,
                               ctx.settings.gpu_devices, mps,
                               carried=carried),
                gpus=gpus, gpu_devices=gpu_names(gpus, ctx.settings.gpu_devices),
                gpu_minors=tuple(ctx.settings.gpu_minors.get(g, g) for g in gpus),
                gpu_numa=tuple(sorted({n for g in gpus
                                       if (n := ctx.settings.gpu_numa.get(g)) is not None})),
                cpu_milli=spec.worker_resources().cpu_milli,
                memory=spec.worker_resources().memory, mounts=_mounts(ctx, spec),
                uid=run.uid, gid=run.gid, log_path=logs / f"{attempt}-{index}.log",
                instance=ctx.settings.instance, run_uid=run.run_uid,
                log_limit=ctx.settings.log_limit, log_reserve=ctx.settings.log_reserve,
                interactive=spec.interactive, working_dir=spec.task.working_dir,
                submit_dir=spec.task.submit_dir,
            )  # fmt: skip
            handle = ctx.executor.start(launch)
        except ExecutorError as e:
            if not executor_reachable(ctx.executor):  # not the run's fault: try again later
                log.warning("could not start %s worker %d: %s; the worker stays Starting until"
                            " the engine answers again", run.name, index, e)  # fmt: skip
                return  # the loop's observe adopts it, or finds it never started (no restart)
            _start_failed(ctx, run, attempt, index, str(e), now)
            continue
        crash_point("after-executor-start")
        with ctx.store.transaction() as tx:
            ctx.store.workers.started(tx, run.name, attempt, index, handle)
            ctx.store.runs.started(tx, run.name)


def _start_failed(
    ctx: StartContext, run: RunRow, attempt: int, index: int, error: str, now: float
) -> None:
    log.warning("could not start %s worker %d: %s", run.name, index, error)
    text = Reason(f"Could not start worker {index}: {error}", private=True, code=ReasonCode.MESSAGE)
    with ctx.store.transaction() as tx:
        ctx.store.workers.start_failed(tx, run.name, attempt, index, error, now)
        ctx.store.runs.request_stop(tx, run.name, StopReason.FAILED, text)
        ctx.store.events.add(tx, run.name, run.workspace, ReasonCode.START_FAILED, text, now)
