"""A run as a Slurm batch job: the sbatch options and the batch script. Pure: no I/O.

The options go on sbatch's command line (no quoting rules of #SBATCH lines to
get wrong); :meth:`BatchJob.render` shows them as an #SBATCH header for people
and for ``astra submit --dry-run``. The script exports Astraeus's environment
and runs the command as one job step, ``srun …``, because Slurm signals only
job steps when a preemption's grace starts (the batch shell hears nothing until
the job is requeued). A step that ends during that grace, as a run that saves
its checkpoint on SIGTERM does, leaves the batch shell waiting for the requeue:
ending the job then would make Slurm call it finished.

How a run's fields become Slurm's:

- GPUs: one worker asks ``--gres=gpu:N``; a gang of W workers is W tasks,
  ``--ntasks=W --gpus-per-task=N``.
- Cores: ``--cpus-per-task``, whole CPUs rounded up (Slurm has no fractions).
- Memory: ``--mem`` for one worker, ``--mem-per-cpu`` for several; in MiB
  rounded up. No memory asked means no option: ``--mem=0`` would ask for all
  of a node's memory.
- Time limit: ``--time`` in whole minutes rounded up (Slurm keeps minutes).
- Priority p: ``--nice=-p``. Only root and Slurm's operators may set a negative
  nice, so a positive priority needs ``SlurmSettings.privileged``.
- Workspace: ``--partition``/``--account`` from the settings, a partition
  chosen by priority where ``priority_partitions`` says so (Slurm preempts
  across partitions of different PriorityTier), and ``--comment=astraeus:<ws>``
  so the workspace can be read back from squeue.
- Image: pyxis ``--container-image``/``--container-mounts`` on the step when
  the cluster has pyxis; without pyxis the command runs on the node as it is
  and the image is not used (as with the process executor); the image ``local``
  (a run that names none, on a daemon without a default_image) runs on the node too.
- Drives: the shared-filesystem path of each drive; without a container a
  drive cannot be mounted elsewhere, so its mount path must be that path.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass

from runner.config.slurm import SlurmSettings
from runner.model import MountMode, RunSpec
from runner.slurm.errors import SlurmError

MIB = 1024**2
COMMENT_PREFIX = "astraeus:"
_REGISTRY_RE = re.compile(r"[^/]*[.:][^/]*|localhost")
# After the step: a step that ended during a preemption's grace (a run that saved its
# checkpoint on SIGTERM and exited) must not end the job, or Slurm would call it
# finished; the batch shell waits for the requeue that ends the grace.
_PREEMPTION_GUARD = (
    "status=$?",
    'if scontrol show job "$SLURM_JOB_ID" 2>/dev/null | grep -q "PreemptTime=[0-9]"; then',
    "    while :; do sleep 5; done  # preempted: Slurm requeues the job when the grace ends",
    "fi",
    'exit "$status"',
)
_BY_TASK = 'export ASTRAEUS_WORKER_INDEX="$SLURM_PROCID"; exec "$@"'


@dataclass(frozen=True, slots=True)
class BatchJob:
    """What ``sbatch`` is given: ``options`` on its command line, ``script`` on stdin."""

    name: str
    options: tuple[str, ...]
    script: str

    def argv(self, sbatch: str = "sbatch") -> tuple[str, ...]:
        return (sbatch, "--parsable", *self.options)

    def render(self) -> str:
        """The script with its options as an #SBATCH header, as a person would write it."""
        shebang, _, body = self.script.partition("\n")
        header = "".join(f"#SBATCH {shlex.quote(option)}\n" for option in self.options)
        return f"{shebang}\n{header}{body}"


def build_batch(
    spec: RunSpec,
    settings: SlurmSettings,
    *,
    workspace: str,
    uid: int | None = None,
    gid: int | None = None,
    log_name: str | None = None,
) -> BatchJob:
    """The batch job for ``spec`` in ``workspace``; SlurmError (one line) if Slurm cannot run it.

    ``uid``/``gid`` run the job as that user (sbatch allows it to root only). ``log_name``
    names its output file in the log folder (the run's id: a name used again by a later
    run never appends to, or reads, an earlier run's output); the run's name by default.
    """
    if spec.workers > 1 and not spec.gang:
        raise SlurmError(
            "independent workers (gang = false) cannot be submitted to Slurm yet: "
            "submit one run per worker, or make it a gang"
        )
    options = [
        f"--job-name={spec.name}",
        f"--comment={COMMENT_PREFIX}{workspace}",
        *_placement(spec, settings, workspace),
        *_resources(spec),
        f"--nice={nice_for(spec.priority, privileged=settings.privileged)}",
        "--requeue" if settings.requeue else "--no-requeue",
        "--export=NONE",  # the daemon's own environment stays out of the job
    ]
    if settings.log_dir:
        options += [
            f"--output={settings.log_dir.rstrip('/')}/{log_name or spec.name}.log",
            "--open-mode=append",
        ]
    if settings.workdir:
        options.append(f"--chdir={settings.workdir}")
    if uid is not None:
        options.append(f"--uid={uid}")
    if gid is not None:
        options.append(f"--gid={gid}")
    return BatchJob(spec.name, tuple(options), _script(spec, settings, workspace))


def nice_for(priority: int, *, privileged: bool) -> int:
    """Slurm's nice for an Astraeus priority: ``-priority``; refused when Slurm would refuse it."""
    if priority > 0 and not privileged:
        raise SlurmError(
            f"priority {priority} needs nice -{priority}, and Slurm lets only root or its "
            "operators set a negative nice: submit as one of them, or ask for priority 0 or less"
        )
    return -priority


def time_minutes(seconds: int) -> int:
    """Slurm keeps time limits in whole minutes: ``seconds`` rounded up, at least 1."""
    return max(1, math.ceil(seconds / 60))


def pyxis_image(image: str) -> str:
    """An image name as pyxis (enroot) wants it: the registry host before a ``#``."""
    first, sep, rest = image.partition("/")
    if sep and "#" not in image and _REGISTRY_RE.fullmatch(first):
        return f"{first}#{rest}"
    return image


def workspace_of_comment(comment: str) -> str | None:
    """The workspace that :func:`build_batch` wrote into a job's comment, if it is one of ours."""
    if not comment.startswith(COMMENT_PREFIX):
        return None
    return comment.removeprefix(COMMENT_PREFIX) or None


def partition_for(priority: int, settings: SlurmSettings, workspace: str) -> str | None:
    """The partition a run of ``priority`` goes to: the highest tier it reaches, else its
    workspace's (None: Slurm's default)."""
    partition = settings.workspaces.get(workspace, settings.default).partition
    for lowest, tier in sorted(settings.priority_partitions):
        if priority >= lowest:
            partition = tier
    return partition


def _placement(spec: RunSpec, settings: SlurmSettings, workspace: str) -> list[str]:
    target = settings.workspaces.get(workspace, settings.default)
    partition = partition_for(spec.priority, settings, workspace)
    options = []
    if partition:
        options.append(f"--partition={partition}")
    if target.account:
        options.append(f"--account={target.account}")
    return options


def _shards(spec: RunSpec) -> str:
    """A shared request as Slurm's shards (``--gres=shard:N``), or refused in one line:
    Slurm splits each GPU into shards and knows no bytes."""
    task = spec.task
    if task.gpu_share:
        raise SlurmError(
            "a shared GPU on Slurm is asked in shards (#SBATCH --gres=shard:N), not memory_bytes"
        )
    if task.gpus != 1 or spec.workers != 1:
        raise SlurmError("shards are asked for one worker on one GPU (--gres=shard:N)")
    return f"--gres=shard:{task.gpu_shards}"


def _resources(spec: RunSpec) -> list[str]:
    task = spec.task
    per_worker = spec.worker_resources()
    cpus = math.ceil(per_worker.cpu_milli / 1000)
    options = []
    if task.shared:
        options += ["--nodes=1", _shards(spec)]
    elif spec.workers == 1:
        options.append("--nodes=1")
        if task.gpus:
            options.append(f"--gres=gpu:{task.gpus}")
    else:
        options.append(f"--ntasks={spec.workers}")
        if task.gpus:
            options.append(f"--gpus-per-task={task.gpus}")
    if cpus:
        options.append(f"--cpus-per-task={cpus}")
    if per_worker.memory and spec.workers == 1:
        options.append(f"--mem={math.ceil(per_worker.memory / MIB)}M")
    elif per_worker.memory:
        options.append(f"--mem-per-cpu={math.ceil(per_worker.memory / max(cpus, 1) / MIB)}M")
    if task.time_limit_seconds:
        options.append(f"--time={time_minutes(task.time_limit_seconds)}")
    return options


def _script(spec: RunSpec, settings: SlurmSettings, workspace: str) -> str:
    ours = {
        "ASTRAEUS_RUN_NAME": spec.name,
        "ASTRAEUS_WORKSPACE": workspace,
        "ASTRAEUS_GPU_COUNT": str(spec.task.gpus),
        "ASTRAEUS_WORKER_COUNT": str(spec.workers),
    }
    if spec.workers == 1:
        ours["ASTRAEUS_WORKER_INDEX"] = "0"
    env = {key: value for key, value in spec.task.env if key not in ours} | ours
    lines = [
        "#!/bin/bash",
        f"# Astraeus run {spec.name} (workspace {workspace}); Slurm sets SLURM_JOB_NAME and",
        "# CUDA_VISIBLE_DEVICES, and SLURM_RESTART_COUNT once the job is requeued.",
        *(f"export {key}={shlex.quote(value)}" for key, value in env.items()),
        'export ASTRAEUS_RESTART_COUNT="${SLURM_RESTART_COUNT:-0}"',
        shlex.join(_step(spec, settings)),
        *_PREEMPTION_GUARD,
    ]
    return "\n".join(lines) + "\n"


def _step(spec: RunSpec, settings: SlurmSettings) -> list[str]:
    """``srun … -- command args``: the run's command as the job's one step."""
    task = spec.task
    if not task.command:
        raise SlurmError("a run on Slurm needs a command (an image's own entrypoint is not used)")
    srun = ["srun", "--export=ALL", "--kill-on-bad-exit=1"]
    image = task.image if settings.pyxis and task.image not in ("", "local") else None
    mounts = _mounts(spec, settings, container=bool(image))
    if image:
        srun.append(f"--container-image={pyxis_image(image)}")
        if mounts:
            srun.append("--container-mounts=" + ",".join(mounts))
    command = [task.command, *task.args]
    if spec.workers > 1:  # each task learns its index from Slurm
        command = ["sh", "-c", _BY_TASK, "-", *command]
    return [*srun, "--", *command]


def _mounts(spec: RunSpec, settings: SlurmSettings, container: bool) -> list[str]:
    """pyxis's ``shared:target[:ro]`` for each drive; checked even when there is no container."""
    mounts = []
    for ref in spec.task.drives:
        shared = settings.drives.get(ref.name)
        if shared is None:
            raise SlurmError(f"drive {ref.name} has no shared path on the Slurm cluster")
        if not container and ref.mount_path.rstrip("/") != shared.rstrip("/"):
            raise SlurmError(
                f"drive {ref.name}: without a container it cannot be mounted at "
                f"{ref.mount_path}; use its shared path {shared} as the mount path"
            )
        flags = ":ro" if ref.mode is MountMode.READ_ONLY else ""
        mounts.append(f"{shared}:{ref.mount_path}{flags}")
    return mounts
