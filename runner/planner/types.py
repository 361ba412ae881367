"""What the planner reads and what it returns: the snapshot and the plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from runner.model import UNBOUNDED, Resources, Workspace
from runner.reasons import ADMIN, Reason, ReasonCode, RunRef, Viewer

NO_WORKER_LIMIT = 1 << 40
SIMULATED_GPU_MEMORY = 80 * 1024**3  # a GPU whose memory the snapshot does not give
PREEMPTED_WAITING = "Preempted by higher-priority work ({0}); waiting to run again."
FITS = Reason("first in the order that fits now", code=ReasonCode.FITS)

# ---------------------------------------------------------------- snapshot


@dataclass(frozen=True, slots=True)
class Machine:
    gpus: tuple[int, ...]
    cpu_milli: int
    memory: int
    stop_grace: float = 30.0
    max_workers: int = NO_WORKER_LIMIT
    # each GPU's memory in bytes, in the order of ``gpus`` (empty: 80 GiB each)
    gpu_memory: tuple[int, ...] = ()
    gpu_shards: int = 8  # [machine] gpu_shards: a Slurm shard is a GPU's memory / this

    def capacity(self) -> Resources:
        return Resources(
            len(self.gpus),
            self.cpu_milli,
            self.memory,
            self.max_workers,
            sum(self.sizes().values()),
            held_gpus=UNBOUNDED,  # the machine bounds GPUs by whole GPUs and memory
        )

    def sizes(self) -> dict[int, int]:
        """Each GPU's memory by index."""
        if len(self.gpu_memory) == len(self.gpus):
            return dict(zip(self.gpus, self.gpu_memory, strict=True))
        return dict.fromkeys(self.gpus, SIMULATED_GPU_MEMORY)

    @property
    def whole_gpu(self) -> int:
        """What a whole GPU counts as in GPU memory: the smallest GPU's memory."""
        return min(self.sizes().values(), default=0)

    @property
    def shard_bytes(self) -> int:
        return self.whole_gpu // max(1, self.gpu_shards)


@dataclass(frozen=True, slots=True)
class RunningUnit:
    """What preemption stops as one: a whole gang, or one independent worker.

    ``stop_deadline`` is set while the unit stops (the SIGKILL time);
    ``stopping_for`` names the run it makes room for, when preempted.
    """

    unit_id: str
    run: str
    workspace: str
    priority: int
    resources: Resources
    gpus: tuple[int, ...]
    started_at: float
    time_limit: float | None = None
    workers: int = 1
    stop_deadline: float | None = None
    stopping_for: str | None = None
    gpu_share: int = 0  # shared: the bytes it holds on each of ``gpus`` (0: whole GPUs)

    @property
    def stopping(self) -> bool:
        return self.stop_deadline is not None


@dataclass(frozen=True, slots=True)
class WaitingRun:
    """A run, or the workers of a run, waiting to start.

    ``worker`` is what one worker asks for; ``workers`` are the indices of the
    workers to start (all of them, unless independent workers were preempted).
    """

    name: str
    workspace: str
    priority: int
    submitted_at: float
    worker: Resources
    workers: tuple[int, ...] = (0,)
    time_limit: float | None = None
    preempted_by: RunRef | None = None
    gpu_share: int = 0  # shared: bytes wanted on each of ``gpu_count`` GPUs per worker
    gpu_count: int = 0
    total: Resources = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.worker.times(len(self.workers)))

    def ask(self) -> Resources:
        """What all the workers to start ask for together."""
        return self.total


@dataclass(frozen=True, slots=True)
class Snapshot:
    machine: Machine
    workspaces: Mapping[str, Workspace] = field(default_factory=dict)
    running: tuple[RunningUnit, ...] = ()
    waiting: tuple[WaitingRun, ...] = ()


# -------------------------------------------------------------------- plan


@dataclass(frozen=True, slots=True)
class Start:
    run: str
    workers: tuple[int, ...]
    gpus: tuple[tuple[int, ...], ...]  # one tuple of GPU indices per worker
    backfill: bool = False
    why: Reason = field(default_factory=lambda: FITS)  # the rule, for the decision log
    gpu_share: int = 0  # shared: the bytes it takes on each of its GPUs


@dataclass(frozen=True, slots=True)
class Preempt:
    unit_id: str
    run: str
    workspace: str
    workers: int
    for_run: RunRef


@dataclass(frozen=True, slots=True)
class Head:
    run: str
    workspace: str
    priority: int
    shadow: float | None  # None: unknown, some work it needs has no time limit
    need: Resources
    held_gpus: tuple[int, ...] = ()
    preempting: bool = False


@dataclass(frozen=True)
class Plan:
    starts: tuple[Start, ...]
    preemptions: tuple[Preempt, ...]
    head: Head | None
    reasons: Mapping[str, Reason]
    quota_waits: frozenset[str]
    order: tuple[str, ...]
    # each quota wait's ``QuotaReached`` event message (``Quota reached: …``), from its own
    # check without the preemption prefix its reason may carry: it names no run
    quota_reached: Mapping[str, Reason] = field(default_factory=dict)

    @cached_property
    def positions(self) -> dict[str, int]:
        """Each run's place in the planner's order, from 1 (the runs it starts too)."""
        return {name: i + 1 for i, name in enumerate(self.order)}

    @cached_property
    def queue_positions(self) -> dict[str, int]:
        """Each run left waiting, its place among them, from 1: what people are shown (a
        run this plan starts holds no place, and the head is 1 once the runs before it
        started)."""
        started = {s.run for s in self.starts}
        waiting = (name for name in self.order if name not in started)
        return {name: i + 1 for i, name in enumerate(waiting)}

    def reason(self, run: str, viewer: Viewer = ADMIN) -> str | None:
        found = self.reasons.get(run)
        return None if found is None else found.render(viewer)


# ------------------------------------------------------------- messages
