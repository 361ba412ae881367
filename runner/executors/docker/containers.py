"""What a worker's container is made of: its create arguments, name, labels, GPUs.

Security (docs/architecture.md, "Security"): the daemon holds the Docker socket, so
every container is built here, never from caller-supplied options. Containers run as
the submitter's ``uid:gid`` with ``no-new-privileges``, every capability dropped, no
privileged mode, no host namespaces, no devices but the GPUs the planner gave the
worker, and only the drives the loop resolved (bind mounts). Images are never pulled:
a missing image is an error the user fixes with ``docker pull``.
"""

from __future__ import annotations

from typing import Any

import docker

from runner.drives import login_groups
from runner.executors.base import (
    LABEL_PREFIX,
    SCHEMA_VERSION,
    ExecutorError,
    ListedWorker,
    Observed,
    WorkerLaunch,
    WorkerStatus,
)
from runner.executors.docker.errors import one_line

LABEL_RUN = f"{LABEL_PREFIX}.run"
LABEL_RUN_UID = f"{LABEL_PREFIX}.run-uid"
LABEL_ATTEMPT = f"{LABEL_PREFIX}.attempt"
LABEL_WORKER = f"{LABEL_PREFIX}.worker"
LABEL_SCHEMA = f"{LABEL_PREFIX}.schema"
LABEL_LOG = f"{LABEL_PREFIX}.log"
LABEL_INSTANCE = f"{LABEL_PREFIX}.instance"
LABEL_LOG_LIMIT = f"{LABEL_PREFIX}.log-limit"
LABEL_LOG_RESERVE = f"{LABEL_PREFIX}.log-reserve"

DEFAULT_SHM = 8 << 30  # /dev/shm for data loaders; capped by the memory limit
_RUNNING_STATES = frozenset({"running", "paused", "restarting"})


# ---------------------------------------------------------------- pure helpers


def container_kwargs(launch: WorkerLaunch, nvidia: bool) -> dict[str, Any]:
    """The keyword arguments of ``client.containers.create`` for ``launch``.

    Pure: no daemon needed. ``nvidia`` says the engine has the NVIDIA runtime,
    so GPUs are handed over as a device request; without it only the
    environment names them (a machine without GPUs, or simulated ones).
    """
    if launch.image is None:
        raise ExecutorError(f"run {launch.run} has no image: the docker executor needs one")
    kwargs: dict[str, Any] = {
        "image": launch.image,
        "name": launch.key,
        "labels": worker_labels(launch),
        "environment": gpu_environment(launch, nvidia),
        "mounts": [
            docker.types.Mount(m.target, m.source, type="bind", read_only=m.read_only)
            for m in launch.mounts
        ],
        "user": f"{launch.uid}:{launch.gid}",
        # the member's supplementary groups, as a login gives them (a drive of mode 2770)
        "group_add": [str(g) for g in login_groups(launch.uid, launch.gid) if g != launch.gid],
        "security_opt": ["no-new-privileges"],
        "cap_drop": ["ALL"],
        "privileged": False,
        "auto_remove": False,
        "detach": True,
    }
    if launch.working_dir is not None:  # else the image's (no host folder goes in)
        kwargs["working_dir"] = launch.working_dir
    if launch.argv:
        kwargs["entrypoint"] = [launch.argv[0]]
        kwargs["command"] = list(launch.argv[1:])
    if launch.log_limit > 0:  # Docker's own copy, under /var/lib/docker, bounded too
        kwargs["log_config"] = engine_log_config(launch.log_limit)
    return kwargs | resource_kwargs(launch, nvidia)


ENGINE_LOG_FLOOR = 128 << 20  # bytes per file of the engine's own copy, at least


def engine_log_config(limit: int) -> docker.types.LogConfig:
    """The engine keeps at most two files of ``limit`` (at least 128 MiB) each: json-file
    rotates. More than the daemon's copy in ASTRAEUS_HOME/logs keeps, so that copy (which
    marks its cuts) sees every line of a burst while it catches up."""
    size = f"{max(limit, ENGINE_LOG_FLOOR) // 1024}k"
    return docker.types.LogConfig(type="json-file", config={"max-size": size, "max-file": "2"})


def resource_kwargs(launch: WorkerLaunch, nvidia: bool) -> dict[str, Any]:
    """GPUs (a device request with the NVIDIA runtime), CPU and memory limits, /dev/shm."""
    kwargs: dict[str, Any] = {
        "shm_size": min(DEFAULT_SHM, launch.memory) if launch.memory > 0 else DEFAULT_SHM,
    }
    if nvidia and launch.gpus:
        kwargs["device_requests"] = [
            docker.types.DeviceRequest(
                driver="nvidia",
                device_ids=list(launch.gpu_names),  # indexes, or UUIDs (MIG-…)
                capabilities=[["gpu"]],
            )
        ]
    if launch.cpu_milli > 0:
        kwargs["nano_cpus"] = launch.cpu_milli * 1_000_000
    if launch.memory > 0:
        kwargs["mem_limit"] = launch.memory
        kwargs["memswap_limit"] = launch.memory  # no swap beyond the limit
    return kwargs


def worker_labels(launch: WorkerLaunch) -> dict[str, str]:
    return {
        LABEL_RUN: launch.run,
        LABEL_RUN_UID: launch.run_uid,
        LABEL_ATTEMPT: str(launch.attempt),
        LABEL_WORKER: str(launch.worker),
        LABEL_SCHEMA: SCHEMA_VERSION,
        LABEL_LOG: str(launch.log_path),
        LABEL_INSTANCE: launch.instance,
        LABEL_LOG_LIMIT: str(launch.log_limit),
        LABEL_LOG_RESERVE: str(launch.log_reserve),
    }


def log_bounds(labels: dict[str, Any]) -> tuple[int, int]:
    """(log_limit, log_reserve) from a container's labels; 0 for one it lacks."""

    def number(key: str) -> int:
        value = str(labels.get(key) or "0")
        return int(value) if value.isdigit() else 0

    return number(LABEL_LOG_LIMIT), number(LABEL_LOG_RESERVE)


def gpu_environment(launch: WorkerLaunch, nvidia: bool) -> dict[str, str]:
    """``launch.env`` with the GPU variables the executor is responsible for.

    ``NVIDIA_VISIBLE_DEVICES`` is always overwritten (``void`` without GPUs): an
    image or a spec saying ``all`` must not reach GPUs the planner did not give.
    With the NVIDIA runtime the container sees only its GPUs, renumbered from 0,
    so ``CUDA_VISIBLE_DEVICES`` is overwritten with those numbers; without it,
    ``CUDA_VISIBLE_DEVICES`` names the host indices unless already set.
    """
    env = dict(launch.env)
    env["NVIDIA_VISIBLE_DEVICES"] = ",".join(launch.gpu_names) or "void"
    if nvidia:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(launch.gpus)))
    else:
        env.setdefault("CUDA_VISIBLE_DEVICES", ",".join(launch.gpu_names))
    return env


def status_from_state(state: dict[str, Any]) -> WorkerStatus:
    """Map Docker's ``State`` object (from inspect) to a WorkerStatus."""
    status = str(state.get("Status") or "")
    if state.get("Running") or status in _RUNNING_STATES:
        return WorkerStatus(Observed.RUNNING)
    if status == "created":
        return WorkerStatus(Observed.EXITED, None, "container was created but never started")
    exit_code = state.get("ExitCode")
    error: str | None = None
    if state.get("OOMKilled"):
        error = "out of memory"
    elif state.get("Error"):
        error = one_line(str(state["Error"]))
    elif status == "dead":
        error = "container is dead"
    return WorkerStatus(Observed.EXITED, int(exit_code) if exit_code is not None else None, error)


def listed_worker(summary: dict[str, Any]) -> ListedWorker | None:
    """A ListedWorker from a container summary (``GET /containers/json``); None if not ours."""
    labels = summary.get("Labels") or {}
    names = summary.get("Names") or []
    try:
        return ListedWorker(
            handle=str(names[0]).lstrip("/") if names else str(summary["Id"]),
            run=str(labels[LABEL_RUN]),
            attempt=int(labels[LABEL_ATTEMPT]),
            worker=int(labels[LABEL_WORKER]),
        )
    except (KeyError, ValueError):
        return None
