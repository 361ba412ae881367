"""Run states, worker states and stop reasons: the enums whose values the store, the wire
and messages hold (runner/model.py exports them with the rest of the runner's data).

Their own module, importing only ``enum``, so a command people run often (`astra ls`)
reads a state without loading model.py's dataclasses.
"""

from __future__ import annotations

from enum import StrEnum

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from typing import ClassVar


class RunState(StrEnum):
    """A run's state; the value is what the store, the wire and messages hold."""

    QUEUED = "Queued"
    STARTING = "Starting"
    RUNNING = "Running"
    STOPPING = "Stopping"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"

    FINISHED: ClassVar[frozenset[RunState]]  # over: it moves no more
    ACTIVE: ClassVar[frozenset[RunState]]  # not finished: queued or with workers
    LIVE: ClassVar[frozenset[RunState]]  # started, not finished: it has workers

    @property
    def finished(self) -> bool:
        return self in RunState.FINISHED

    @property
    def active(self) -> bool:
        return self in RunState.ACTIVE


RunState.FINISHED = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED})
RunState.ACTIVE = frozenset(RunState) - RunState.FINISHED
RunState.LIVE = RunState.ACTIVE - {RunState.QUEUED}


class WorkerState(StrEnum):
    """A worker's state (one row per worker and attempt)."""

    STARTING = "Starting"
    RUNNING = "Running"
    STOPPING = "Stopping"
    EXITED = "Exited"  # ended, not yet classified
    LOST = "Lost"  # gone without an exit status
    DONE = "Done"
    FAILED = "Failed"
    CANCELLED = "Cancelled"

    LIVE: ClassVar[frozenset[WorkerState]]  # holds its resources: may still run


WorkerState.LIVE = frozenset({WorkerState.STARTING, WorkerState.RUNNING, WorkerState.STOPPING})


class StopReason(StrEnum):
    """Why a worker stops (its ``stop_reason``), or a run (its ``stop_request``)."""

    PREEMPT = "preempt"
    TIMELIMIT = "timelimit"
    DELETE = "delete"
    FAILED = "failed"  # the run could not start
    RESTART = "restart"  # a gang's worker failed: its attempt stops, to start again
    NEVER_STARTED = "never-started"  # ended before it began: not the program's failure
    WITHDRAWN = "withdrawn"  # its preemption was withdrawn: it runs on
    REQUEUE = "requeue"  # astra requeue: stopped with the grace, queued again, no restart spent
    IDLE = "idle-gpus"  # its GPUs were idle ([machine] idle_gpu_policy = "stop"): it fails
