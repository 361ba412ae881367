"""What the engine's loop is told at its start: the machine, workspaces, drives, logs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runner.engine.backoff import NO_BACKOFF, Backoff
from runner.engine.idle import IdleSettings
from runner.engine.revocation import Authorise
from runner.model import Workspace
from runner.planner.plan import Machine
from runner.telemetry.idle import IdleTracker

__all__ = ["LoopSettings"]


@dataclass
class LoopSettings:
    machine: Machine
    workspaces: Mapping[str, Workspace]
    drives: Mapping[str, Path]  # drive name -> host path
    logs_dir: Path
    executor_remaps_gpus: bool = False  # docker with the NVIDIA runtime numbers GPUs from 0
    gpu_devices: Mapping[int, str] = field(default_factory=dict)  # MIG: index -> UUID
    gpu_minors: Mapping[int, int] = field(default_factory=dict)  # index -> /dev/nvidia<n>
    gpu_numa: Mapping[int, int] = field(default_factory=dict)  # index -> its NUMA node
    instance: str = ""  # names this daemon's workers apart from another daemon's
    finished_retention: float | None = None  # seconds a finished run is kept; None: for ever
    # finished runs one user keeps, and their stored specs' bytes ([machine] max_kept_*);
    # None: no bound but the retention time
    max_kept: tuple[int, int] | None = None
    log_limit: int = 0  # bytes per worker's log ([machine] log_limit); 0: no limit
    log_reserve: int = 0  # bytes kept free on the logs' disk ([machine] log_reserve)
    mps: bool = False  # [machine] mps: a shared run's memory limit passed to CUDA MPS
    authorise: Authorise | None = (
        None  # may a run's owner still start it (runner.engine.revocation)
    )
    # idle GPUs ([machine] idle_gpu_*): the rule, and the telemetry's tracker; None: none
    idle: IdleSettings | None = None
    idle_tracker: IdleTracker | None = None
    # the wait before a failed run starts again ([machine] restart_backoff, _max)
    restart_backoff: Backoff = NO_BACKOFF
