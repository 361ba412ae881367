"""The rows the store keeps, as typed values: what the engine, the service and the API
read of runs, workers, events, groups, drains and usage records. Plain data; how they are
stored and read back is the store's (runner/store/rows.py)."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from runner.model import RunState, StopReason, WorkerState
from runner.reasons import Reason, ReasonCode, RunRef
from runner.runspec.templates import run_document


def new_run_uid(now: float | None = None) -> str:
    """A run's immutable id: 32 hex digits, the submit time in ms first (ids sort by it)."""
    ms = int((time.time() if now is None else now) * 1000)
    return f"{ms:012x}{secrets.token_hex(10)}"


def is_run_uid(text: str) -> bool:
    """Whether ``text`` has the shape of a run's id (a safe file name, nothing else)."""
    return len(text) == 32 and all(c in "0123456789abcdef" for c in text)


@dataclass(frozen=True, slots=True)
class RunRow:
    name: str
    workspace: str
    owner: str
    uid: int
    gid: int
    spec_text: str  # the run spec as JSON; parsed only when needed (see spec())
    priority: int
    state: RunState
    reason: Reason | None
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    restarts: int
    preemptions: int
    attempts: int
    preempted_by: RunRef | None
    stop_request: StopReason | None
    quota_noted: bool
    grp: str | None = None  # the sweep, replica group or schedule that made it
    streak: int = 0  # replicas: quick exits in a row (the restart back-off grows with it)
    deps_met: bool = False  # every run of spec.after has succeeded (checked no more)
    run_uid: str = ""  # immutable, unique, from the submit: names the run's files on disk
    # a group's run: spec_text is only its part, the rest is this template's (templates.py)
    template: int | None = None
    template_doc: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    backfilled: bool = False  # its latest attempt was started by backfill, behind the head
    held_by: str | None = None  # who holds it (astra hold): out of the order until released
    # the restart back-off (runner/engine/backoff.py): failures in a row, quick ones in a
    # row, and the end of its wait (wall clock, monotonic clock, boot); None: no wait
    fails: int = 0
    quick: int = 0
    restart_at: float | None = None
    restart_mono: float | None = None
    restart_boot: str | None = None

    def spec(self) -> dict[str, Any]:
        """The run's whole spec document."""
        value: dict[str, Any] = json.loads(self.spec_text)
        return value if self.template_doc is None else run_document(self.template_doc, value)


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: int
    run: str
    attempt: int
    worker: int
    state: WorkerState
    handle: str | None
    gpus: tuple[int, ...]
    cpu_milli: int
    memory: int
    started_at: float
    stop_reason: StopReason | None
    stop_deadline: float | None
    stopping_for: RunRef | None
    killed: bool
    exit_code: int | None
    error: str | None
    finished_at: float | None
    run_uid: str = ""  # the run's id (see RunRow.run_uid): names the worker's handle
    started_mono: float | None = None  # CLOCK_MONOTONIC at the start, on boot ``boot_id``
    stop_deadline_mono: float | None = None  # and at the SIGKILL time, while it stops
    boot_id: str | None = None
    executor: str | None = None  # who started it; None: a row from before migration 7


def latest_workers(workers: list[WorkerRow]) -> dict[int, WorkerRow]:
    """Each worker index's row of its latest attempt."""
    latest: dict[int, WorkerRow] = {}
    for w in workers:
        if w.worker not in latest or w.attempt > latest[w.worker].attempt:
            latest[w.worker] = w
    return latest


@dataclass(frozen=True, slots=True)
class EventRow:
    id: int
    run: str
    workspace: str
    time: float
    kind: str
    message: Reason
    grp: str | None = None  # set on a group's own events (``run`` is then the group's name)
    code: ReasonCode = ReasonCode.MESSAGE  # what the event says, for code to decide on


@dataclass(frozen=True, slots=True)
class GroupRow:
    name: str
    kind: str  # sweep | replicas | schedule
    workspace: str
    owner: str
    uid: int
    gid: int
    spec_text: str  # the group document as JSON, its run template included
    created_at: float
    replicas: int = 0  # replicas: how many are wanted
    paused: bool = False  # schedules
    next_at: float | None = None  # schedules: the next firing
    last_fired_at: float | None = None
    template: int | None = None  # its run template's row (runner/runspec/templates.py)

    def document(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.spec_text)
        return value


MACHINE = "machine"  # the target of a whole-machine drain; a GPU's is its index


@dataclass(frozen=True, slots=True)
class DrainRow:
    target: str  # MACHINE, or a GPU's index as text
    reason: str
    by: str  # the admin who drained it
    at: float  # when, on the wall clock (written down only)

    @property
    def gpu(self) -> int | None:
        return None if self.target == MACHINE else int(self.target)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One finished run (or one life of a replica), as the accounting keeps it."""

    id: int
    run_uid: str
    run: str
    workspace: str
    owner: str
    outcome: RunState
    exit_code: int | None
    submitted_at: float
    started_at: float | None  # its first start, None if it never started
    finished_at: float
    gpus: int  # GPUs its last attempt held
    gpu_seconds: float
    cpu_seconds: float
    wait_seconds: float | None  # submit (or a replica's restart) to first start
    preemptions: int
    restarts: int
    priority: int = 0
    time_limit_seconds: int | None = None
    workers: int = 1
    gpu_memory: int | None = None  # a shared run: bytes on each of its GPUs; None: whole GPUs
    cpus: float = 0.0  # cores one worker asked
    memory: int | None = None  # bytes one worker asked; None: none asked
    # how long its workers ran: per attempt of this life, the mean of its workers' times
    # from start to end, summed over the attempts; None on a record written before it was
    # kept, of a run that held no GPU (migration 16 tells it for the others)
    run_seconds: float | None = None
