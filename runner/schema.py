"""The wire objects of docs/api.md, one typed schema for the daemon and its clients.

The daemon builds these (runner/api/views.py) and its clients decode into them
(astraeus_tui/client.py). Field order is the JSON key order ``--json`` prints, so
encoding a Struct gives the documented shape byte for byte; ``omit_defaults`` is off,
so a null is sent as null. A field that exists only for some objects (a sweep's
``size``, a schedule's ``cron``) is ``UNSET`` elsewhere and left out of the JSON.
Unknown fields from a newer daemon are ignored when decoding.

Cheap to import: msgspec, the standard library and runner.model only.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from runner.model import RunState

__all__ = [
    "UNSET",
    "Batch",
    "BatchError",
    "BatchItem",
    "Change",
    "Checkpoint",
    "Event",
    "Gpu",
    "GpuHolder",
    "GpuList",
    "Group",
    "GroupDetail",
    "GroupList",
    "History",
    "HistoryEntry",
    "Run",
    "RunDetail",
    "RunList",
    "RunTelemetry",
    "RunUsage",
    "Snapshot",
    "Telemetry",
    "TelemetryGpu",
    "TelemetryGpuSample",
    "TelemetryRun",
    "TelemetryRunSample",
    "UnsetType",
    "Usage",
    "UsageFigures",
    "UsageRow",
    "Worker",
]


class _Wire(msgspec.Struct, frozen=True, omit_defaults=False):
    """A wire object: immutable, its fields by name."""


class Run(_Wire, frozen=True, kw_only=True):
    """One run for one viewer: another workspace's run has ``visible`` false, its name
    ``a job in another namespace`` and no owner, uid or group. ``reason`` is for people,
    ``reason_code`` (a runner.model.ReasonCode value) for programs."""

    id: str
    uid: str | None = None
    name: str
    visible: bool = True
    workspace: str
    owner: str | None = None
    priority: int = 0
    state: RunState
    reason: str | None = None
    reason_code: str | None = None
    backfilled: bool = False
    paused: str | None = None
    gpus: list[int] = []
    gpus_requested: int = 0
    cpu_cores_requested: float = 0.0
    memory_requested: int = 0
    workers: int = 1
    workers_live: int = 0
    gang: bool = True
    restarts: int = 0
    restart_limit: int = 10
    preemptions: int = 0
    submitted_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    time_limit_seconds: int | None = None
    starts_by: str | None = None
    # forecasts from the lengths of finished runs (docs/scheduling.md, "Start estimates"):
    # the likely start, the start by which it starts 9 times in 10, and how many finished
    # runs they rest on; absent for another workspace's run and before any forecast, but
    # for how many finished runs there are and ``forecast_needs`` before there are enough
    likely_start: str | UnsetType = UNSET
    likely_start_90: str | UnsetType = UNSET
    learned_from: int | UnsetType = UNSET
    forecast_needs: int | UnsetType = UNSET
    head: bool = False
    position: int | None = None
    stop_grace_left_seconds: float | None = None
    stop_deadline: str | None = None
    stopping_for: str | None = None
    group: str | None = None
    after: list[str] = []
    held: bool = False
    begin_at: str | None = None
    # since when its GPUs have done nothing, once it is marked idle ([machine]
    # idle_gpu_after); left out of the JSON while it is not
    idle_since: str | UnsetType = UNSET
    # a shared request: the memory it asks on each of its GPUs; absent for whole GPUs
    gpu_memory_bytes: int | UnsetType = UNSET
    # a failed run waiting for its restart back-off: when it may start again (a worker of
    # it, for independent workers); absent when it does not wait
    restart_at: str | UnsetType = UNSET


class Worker(_Wire, frozen=True, kw_only=True):
    """One worker of one attempt (``workers_history``)."""

    attempt: int
    worker: int
    state: str
    gpus: list[int] = []
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    error: str | None = None
    stop_reason: str | None = None
    stopping_for: str | None = None
    killed: bool = False


class Event(_Wire, frozen=True, kw_only=True):
    """One line of the event log; ``code`` is a runner.model.ReasonCode value."""

    id: int
    run: str
    group: str | None = None
    workspace: str
    time: str | None = None
    kind: str
    message: str
    code: str = "MESSAGE"


class Checkpoint(_Wire, frozen=True, kw_only=True):
    """The newest file under ``<mount>/<run name>/`` on the run's read-write drives."""

    path: str
    drive: str
    modified: str | None = None
    size: int = 0


class UsageFigures(_Wire, frozen=True, kw_only=True):
    """A run's use: ``cpu_percent`` (100 = one core), ``memory_bytes`` (resident),
    ``gpu_memory_bytes``, ``gpu_util`` (percent, its GPUs' mean); null where unknown."""

    cpu_percent: float | None = None
    memory_bytes: int | None = None
    gpu_memory_bytes: int | None = None
    gpu_util: float | None = None


class RunUsage(_Wire, frozen=True, kw_only=True):
    """What a run used, from its telemetry: ``now`` (its last sample, while it runs; else
    null), ``mean`` and ``peak`` over the ``samples`` kept of it, ``since`` to ``until``."""

    samples: int = 0
    since: str | None = None
    until: str | None = None
    now: UsageFigures | None = None
    mean: UsageFigures | None = None
    peak: UsageFigures | None = None


class RunDetail(Run, frozen=True, kw_only=True):
    """``GET /v1/runs/{name}``: the run object, its spec, workers, events and checkpoint;
    ``usage`` once the run has been sampled (absent before, and in front of Slurm)."""

    spec: dict[str, Any] = {}
    workers_history: list[Worker] = []
    events: list[Event] = []
    checkpoint: Checkpoint | None = None
    usage: RunUsage | UnsetType = UNSET


class Group(_Wire, frozen=True, kw_only=True):
    """A sweep (``size, params``), replica group (``replicas, running``) or schedule
    (``cron, policy, paused, next_at, last_fired_at``); ``states`` counts its runs."""

    name: str
    kind: str
    workspace: str
    owner: str
    created_at: str | None = None
    priority: int = 0
    runs: list[str] = []
    states: dict[str, int] = {}
    size: int | UnsetType = UNSET
    params: list[dict[str, Any]] | UnsetType = UNSET
    replicas: int | UnsetType = UNSET
    running: int | UnsetType = UNSET
    cron: str | UnsetType = UNSET
    policy: str | UnsetType = UNSET
    paused: bool | UnsetType = UNSET
    next_at: str | UnsetType | None = UNSET
    last_fired_at: str | UnsetType | None = UNSET


class GroupDetail(Group, frozen=True, kw_only=True):
    """``GET /v1/groups/{name}``: the group with its runs' objects and its events."""

    run_objects: list[Run] = []
    events: list[Event] = []


class GpuHolder(_Wire, frozen=True, kw_only=True):
    run: str
    worker: int
    state: str


class GpuShare(_Wire, frozen=True, kw_only=True):
    """A shared run's memory on one GPU."""

    run: str
    worker: int
    bytes: int


class Gpu(_Wire, frozen=True, kw_only=True):
    """One GPU and who holds it; ``held_for``: the head it is kept for; ``shares``: the
    shared runs on it and their memory (absent on a GPU no run shares)."""

    index: int
    uuid: str = ""
    name: str = ""
    simulated: bool = False
    remote: bool = False
    memory_total: int = 0
    memory_used: int = 0
    utilization: int | None = None  # percent
    temperature: int | None = None  # °C
    holder: GpuHolder | None = None
    held_for: str | None = None
    foreign_pids: list[int] = []
    drained: str | None = None  # kept out of every plan by an admin: the drain's reason
    mig: str | None = None  # a MIG instance: "GPU:instance" as nvidia-smi numbers it ("0:1")
    shares: list[GpuShare] | UnsetType = UNSET


class GpuList(_Wire, frozen=True, kw_only=True):
    """``GET /v1/gpus``."""

    source: str = ""
    simulated: bool = False
    not_enforced: str | None = None  # what a run is not held to here, and why
    gpus: list[Gpu] = []


class RunList(_Wire, frozen=True, kw_only=True):
    """``GET /v1/runs``."""

    runs: list[Run]


class GroupList(_Wire, frozen=True, kw_only=True):
    """``GET /v1/groups``."""

    groups: list[Group]


class BatchError(_Wire, frozen=True, kw_only=True):
    """One refused document of a batch: what ``POST /v1/runs`` would have answered."""

    status: int
    code: str
    message: str


class BatchItem(_Wire, frozen=True, kw_only=True):
    """One document of a batch, at its ``index`` (from 0): its run, or its error."""

    index: int
    run: Run | None = None
    error: BatchError | None = None


class Batch(_Wire, frozen=True, kw_only=True):
    """``POST /v1/runs:batch``: every document's outcome, in the order sent."""

    accepted: int
    refused: int
    results: list[BatchItem] = []


class Snapshot(_Wire, frozen=True, kw_only=True):
    """The stream's first message: every active run."""

    version: int
    runs: list[Run]


class Change(_Wire, frozen=True, kw_only=True):
    """The stream's later messages: runs changed (by ``id``), ids gone, and ``moved``:
    ``[id, position]`` of each run whose object changed only in its ``position`` (one run
    held near the head of 10,000 moves every run behind it: not 10,000 whole objects)."""

    version: int
    upsert: list[Run] = []
    remove: list[str] = []
    moved: list[tuple[str, int | None]] = []


class UsageRow(_Wire, frozen=True, kw_only=True):
    """One row of ``GET /v1/usage``: a workspace, or a user in a workspace (``by=user``).
    ``visible`` false: the other workspaces together, neither named (``workspace`` and
    ``user`` null); the ``total`` row is not visible either."""

    workspace: str | None = None
    user: str | None = None
    visible: bool = True
    runs: int = 0
    outcomes: dict[str, int] = {}
    gpu_hours: float = 0.0
    core_hours: float = 0.0
    preemptions: int = 0
    restarts: int = 0
    wait_p50_seconds: float | None = None
    wait_p95_seconds: float | None = None
    daily_gpu_hours: list[float] | UnsetType = UNSET  # with ?daily=1: a day each, oldest first


class Usage(_Wire, frozen=True, kw_only=True):
    """``GET /v1/usage``: what runs that finished from ``since`` to ``until`` used."""

    since: str | None = None
    until: str | None = None
    by: str = "workspace"
    rows: list[UsageRow] = []
    total: UsageRow = UsageRow(visible=False)


class HistoryEntry(_Wire, frozen=True, kw_only=True):
    """One finished run (one life of a replica) of ``GET /v1/history``; kept after the run
    is forgotten. ``elapsed_seconds``: from its first start to its finish. ``gpus``: what
    its last attempt held, all workers together.

    What it asked, for a replay (``astra sim --history``): ``priority`` (as it finished),
    ``time_limit_seconds`` (null: none), ``workers``; per worker, ``cpus`` (cores) and
    ``memory_bytes`` (null: none asked); ``gpu_memory_bytes``: a shared run's memory on
    each of its GPUs (null: whole GPUs). ``run_seconds``: how long its workers ran, for
    one worker: each attempt's mean worker time from start to end, summed over its
    attempts (0 if it never started); null on a record written before it was kept, of a
    run that held no GPU (GPU-seconds over GPUs tell it for the others).
    """

    uid: str
    name: str
    workspace: str
    owner: str
    outcome: RunState
    exit_code: int | None = None
    submitted_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    elapsed_seconds: float | None = None
    wait_seconds: float | None = None
    gpus: int = 0
    gpu_hours: float = 0.0
    core_hours: float = 0.0
    preemptions: int = 0
    restarts: int = 0
    priority: int = 0
    time_limit_seconds: int | None = None
    workers: int = 1
    gpu_memory_bytes: int | None = None
    cpus: float = 0.0
    memory_bytes: int | None = None
    run_seconds: float | None = None


class History(_Wire, frozen=True, kw_only=True):
    """``GET /v1/history``: finished runs, oldest first."""

    since: str | None = None
    runs: list[HistoryEntry] = []


class TelemetryGpuSample(_Wire, frozen=True, kw_only=True):
    """One GPU at one time (``GET /v1/telemetry?history=1``). ``time``: Unix seconds."""

    time: float
    utilization: int | None = None
    memory_used: int | None = None
    temperature: int | None = None
    power_watts: float | None = None


class TelemetryGpu(_Wire, frozen=True, kw_only=True):
    """A GPU's last readings: ``utilization`` in percent, memory in bytes, ``temperature``
    in °C, ``power_watts`` in W; null where unknown. ``simulated``: made up from the runs
    holding it. ``history``: the last hour's samples, only when asked."""

    index: int
    uuid: str = ""
    name: str = ""
    simulated: bool = False
    utilization: int | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    temperature: int | None = None
    power_watts: float | None = None
    history: list[TelemetryGpuSample] | UnsetType = UNSET


class TelemetryRunSample(_Wire, frozen=True, kw_only=True):
    time: float
    cpu_percent: float | None = None
    memory_bytes: int | None = None
    gpu_memory_bytes: int | None = None
    gpu_util: float | None = None


class TelemetryRun(_Wire, frozen=True, kw_only=True):
    """A running run's use, summed over its live workers: ``cpu_percent`` (100 = one
    core) and ``memory_bytes`` (resident) over its process trees, ``gpu_memory_bytes``
    (NVML's per-process memory of its processes; on simulated GPUs, theirs),
    ``gpu_util`` (its GPUs' mean). Another workspace's run is named as in
    ``GET /v1/runs``: ``visible`` false, ``a job in another namespace``, no uid."""

    uid: str | None = None
    name: str
    visible: bool = True
    workspace: str
    gpus: list[int] = []
    cpu_percent: float | None = None
    memory_bytes: int | None = None
    gpu_memory_bytes: int | None = None
    gpu_util: float | None = None
    history: list[TelemetryRunSample] | UnsetType = UNSET


class Telemetry(_Wire, frozen=True, kw_only=True):
    """``GET /v1/telemetry``: the last sample (``time`` null before the first one),
    taken every ``interval_seconds``."""

    time: str | None = None
    interval_seconds: float | None = None
    simulated: bool = False
    gpus: list[TelemetryGpu] = []
    runs: list[TelemetryRun] = []


class RunTelemetry(_Wire, frozen=True, kw_only=True):
    """``GET /v1/runs/{name}/telemetry``: one run's ``usage`` and its samples over its life
    (or ``?history=`` back), at most 2000, averaged over equal spans when there are more."""

    uid: str
    name: str
    workspace: str
    interval_seconds: float | None = None
    usage: RunUsage | None = None
    history: list[TelemetryRunSample] = []
