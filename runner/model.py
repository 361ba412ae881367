"""Plain data shared by every part of the runner: frozen, typed, no I/O.

Units used everywhere: CPU in millicores (``cpu_milli``), memory in bytes,
times in seconds since the epoch (floats), durations in seconds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum

from runner.states import RunState as RunState
from runner.states import StopReason as StopReason
from runner.states import WorkerState as WorkerState

MIN_PRIORITY = -1000
MAX_PRIORITY = 1000
DEFAULT_RESTART_LIMIT = 10
DEFAULT_STOP_GRACE = 30.0
GIB = 1024**3

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "ki": 1024,
    "kib": 1024,
    "mi": 1024**2,
    "mib": 1024**2,
    "gi": 1024**3,
    "gib": 1024**3,
    "ti": 1024**4,
    "tib": 1024**4,
    "p": 1000**5,
    "pb": 1000**5,
    "pi": 1024**5,
    "pib": 1024**5,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: object) -> int:
    """Bytes from an int or a string such as ``"64GiB"``, ``"512G"`` or ``"1024"``.

    Raises ValueError with a short reason on anything else.
    """
    if isinstance(value, bool):
        raise ValueError("must be a size in bytes or a string such as '64GiB'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("must not be negative")
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0 or value != int(value):
            raise ValueError("must be a whole, non-negative number of bytes")
        return int(value)
    if not isinstance(value, str):
        raise ValueError("must be a size in bytes or a string such as '64GiB'")
    match = _SIZE_RE.match(value)
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"{value!r} is not a size (use bytes or e.g. '64GiB', '512MiB')")
    number = float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if not math.isfinite(number):
        raise ValueError(f"{value[:40]!r} is too large")
    if number != int(number):
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(number)


def format_size(n: int) -> str:
    """``68719476736`` -> ``"64GiB"``; keeps one decimal where it matters."""
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            value = n / scale
            text = f"{value:.1f}".removesuffix(".0")
            return f"{text}{unit}"
    return f"{n}B"


def format_cores(milli: int) -> str:
    """``8000`` -> ``"8"``, ``1500`` -> ``"1.5"``."""
    return f"{milli / 1000:.3f}".rstrip("0").rstrip(".")


HELD_AS_WHOLE = -(1 << 62)  # Resources.held_gpus not given: as many as its whole GPUs


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of each schedulable resource. ``workers`` counts workers."""

    gpus: int = 0
    cpu_milli: int = 0
    memory: int = 0
    workers: int = 0
    # GPU memory promised, in bytes: a shared request's memory on each of its GPUs times
    # their count; a whole (exclusive) GPU counts as the machine's smallest GPU's memory
    # where the snapshot says so (runner/engine/snapshot.py). ``gpus`` counts whole GPUs.
    gpu_memory: int = 0
    # the GPUs held, whole or shared: what a ``gpus`` quota counts. A shared run holds
    # each of its GPUs for the quota, however little of its memory it asks (its fraction
    # of the GPU rounded up); not given: its whole GPUs. A machine's room and a quota
    # without a ``gpus`` limit have as many as no count reaches.
    held_gpus: int = HELD_AS_WHOLE

    def __post_init__(self) -> None:
        if self.held_gpus == HELD_AS_WHOLE:
            object.__setattr__(self, "held_gpus", self.gpus)

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.gpus + other.gpus,
            self.cpu_milli + other.cpu_milli,
            self.memory + other.memory,
            self.workers + other.workers,
            self.gpu_memory + other.gpu_memory,
            self.held_gpus + other.held_gpus,
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.gpus - other.gpus,
            self.cpu_milli - other.cpu_milli,
            self.memory - other.memory,
            self.workers - other.workers,
            self.gpu_memory - other.gpu_memory,
            self.held_gpus - other.held_gpus,
        )

    def times(self, n: int) -> Resources:
        return Resources(
            self.gpus * n,
            self.cpu_milli * n,
            self.memory * n,
            self.workers * n,
            self.gpu_memory * n,
            self.held_gpus * n,
        )

    def fits_in(self, room: Resources) -> bool:
        return (
            self.gpus <= room.gpus
            and self.cpu_milli <= room.cpu_milli
            and self.memory <= room.memory
            and self.workers <= room.workers
            and self.gpu_memory <= room.gpu_memory
            and self.held_gpus <= room.held_gpus
        )


RESOURCE_NAMES = ("gpus", "cpu_cores", "memory", "workers", "gpu_memory")
UNBOUNDED = 1 << 50  # a room's amount where nothing bounds it


def format_amount(resource: str, amount: int) -> str:
    """Render one resource amount the way messages show it."""
    if resource == "cpu_cores":
        return format_cores(amount)
    if resource in ("memory", "gpu_memory"):
        return format_size(amount)
    return str(amount)


def amounts(r: Resources) -> tuple[int, int, int, int, int, int]:
    """Every amount, in the order of the fields (``Resources(*amounts(r)) == r``)."""
    return (r.gpus, r.cpu_milli, r.memory, r.workers, r.gpu_memory, r.held_gpus)


def machine_amounts(r: Resources) -> tuple[int, int, int, int, int]:
    """The amounts the machine bounds, in the order of RESOURCE_NAMES (whole GPUs)."""
    return (r.gpus, r.cpu_milli, r.memory, r.workers, r.gpu_memory)


def quota_amounts(r: Resources) -> tuple[int, int, int, int, int]:
    """The amounts a quota counts, in the order of RESOURCE_NAMES and Quota.limits():
    its ``gpus`` are the GPUs held, whole or shared."""
    return (r.held_gpus, r.cpu_milli, r.memory, r.workers, r.gpu_memory)


@dataclass(frozen=True, slots=True)
class Quota:
    """A workspace's hard ceiling; ``None`` leaves that resource unlimited."""

    gpus: int | None = None
    cpu_milli: int | None = None
    memory: int | None = None
    workers: int | None = None
    gpu_memory: int | None = None  # bytes; a whole GPU counts as its memory (Resources)

    def limits(self) -> tuple[int | None, int | None, int | None, int | None, int | None]:
        return (self.gpus, self.cpu_milli, self.memory, self.workers, self.gpu_memory)

    def is_empty(self) -> bool:
        return all(limit is None for limit in self.limits())


@dataclass(frozen=True, slots=True)
class Workspace:
    name: str
    quota: Quota | None = None
    weight: float = 1.0
    max_priority: int = 0
    members: tuple[str, ...] = ()
    default_image: str | None = None  # for runs naming none; before [machine] default_image
    # a run over the quota only because of this workspace's own lower-priority running
    # work preempts that work (off: it waits, as every run over its quota does)
    preempt_within_quota: bool = False


class MountMode(StrEnum):
    READ_WRITE = "ReadWrite"
    READ_ONLY = "ReadOnly"


@dataclass(frozen=True, slots=True)
class DriveRef:
    """A named drive from the config, mounted into each worker at ``mount_path``."""

    name: str
    mount_path: str
    mode: MountMode = MountMode.READ_WRITE


@dataclass(frozen=True, slots=True)
class TaskTemplate:
    image: str | None
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    time_limit_seconds: int | None = None
    drives: tuple[DriveRef, ...] = ()
    gpus: int = 0
    min_per_machine: int = 0
    per_gpu_cpu_milli: int = 0
    per_gpu_memory: int = 0
    cpu_milli: int = 0
    memory: int = 0
    # a shared GPU request: bytes wanted on each of its ``gpus`` GPUs (0: whole GPUs), or
    # Slurm shards of each GPU (``#SBATCH --gres=shard:N``), turned into bytes where the
    # machine is known (``[machine] gpu_shards``)
    gpu_share: int = 0
    gpu_shards: int = 0
    # the folder the command starts in: ``working_dir`` as asked (--chdir; a container's
    # working directory under Docker), else on the process executor the folder it was
    # submitted from (``submit_dir``, recorded by astra), else the member's home
    working_dir: str | None = None
    submit_dir: str | None = None
    # the caller's environment carried from the submit (astra run's --export=ALL, the
    # default): the process executor's runs start with it, under ``env``; not Docker's
    submit_env: tuple[tuple[str, str], ...] = ()

    @property
    def shared(self) -> bool:
        return bool(self.gpu_share or self.gpu_shards)

    def share_bytes(self, shard_bytes: int) -> int:
        """The memory wanted on each GPU, ``shard_bytes`` a shard's (0 when exclusive)."""
        return self.gpu_share or self.gpu_shards * shard_bytes


@dataclass(frozen=True, slots=True)
class RunSpec:
    """A validated run: what ``astra submit`` and the API accept."""

    name: str
    task: TaskTemplate
    workspace: str | None = None
    priority: int = 0
    workers: int = 1
    gang: bool = True
    restart_limit: int = DEFAULT_RESTART_LIMIT
    after: tuple[str, ...] = ()  # runs that must succeed before this one may start
    interactive: bool = False  # one worker with a terminal a client attaches to (run -it)
    hold: bool = False  # submitted held: out of the order until released (astra release)
    begin_at: float | None = None  # out of the order until then (wall clock, epoch seconds)
    # (Apprise URL, event names) to notify of this run's events (runner/notify)
    notify: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def worker_resources(self, whole_gpu: int = 0, shard_bytes: int = 0) -> Resources:
        """What one worker asks for. ``whole_gpu``: what an exclusive GPU counts as in
        GPU memory; ``shard_bytes``: a Slurm shard's memory. A shared request holds no
        whole GPU: it asks for its memory on each of its GPUs."""
        t = self.task
        share = t.share_bytes(shard_bytes)
        return Resources(
            gpus=0 if t.shared else t.gpus,
            cpu_milli=t.cpu_milli + t.per_gpu_cpu_milli * t.gpus,
            memory=t.memory + t.per_gpu_memory * t.gpus,
            workers=1,
            gpu_memory=(share if t.shared else whole_gpu) * t.gpus,
            held_gpus=t.gpus,
        )

    def total_resources(self) -> Resources:
        return self.worker_resources().times(self.workers)


def sql_list(states: frozenset[RunState] | frozenset[WorkerState]) -> str:
    """``states`` as an SQL list of literals, in the enum's order: ``('Queued', 'Running')``."""
    values = dict.fromkeys(s.value for s in (*RunState, *WorkerState) if s in states)
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


@dataclass(frozen=True, slots=True)
class Estimate:
    """A waiting run's start estimate (runner/planner/estimates.py makes it).

    ``starts_by``: the start if all work takes its whole limit, or None when work
    without a limit is in the way (``after`` then names it) or the replay ran out of steps.

    The forecasts from learned lengths (``with_forecasts``): ``likely``, the start when
    every run takes its likely (median) length, and ``likely_by``, when every run takes
    its 90th-percentile length (None: no forecast: too little history, or work of unknown
    length in the way); ``learned_from``: how many finished runs the lengths rest on, and
    ``forecast_needs`` how many they need while they rest on fewer (0: enough).
    ``promise``: the run is the head and ``starts_by`` its shadow time, which the planner
    protects; every other estimate can move later as more urgent work is submitted."""

    starts_by: float | None
    after: tuple[str, ...] = ()
    likely: float | None = None
    likely_by: float | None = None
    learned_from: int = 0
    promise: bool = False
    forecast_needs: int = 0
