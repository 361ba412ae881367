"""The virtual clock a replay jumps from event to event, and the executor whose workers
last as long as the trace says.

A worker runs for its run's duration from the trace (what is left of it, when the run
resumes from a checkpoint) and exits 0, unless it is stopped first. A worker exits at
once on SIGTERM (a program that saves and exits within the grace) or SIGKILL; nothing
costs time to start. What each attempt held and what a stop threw away is written down
for the report.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.clock import Clock
from runner.executors.base import (
    Capabilities,
    ExecutorError,
    ListedWorker,
    Observed,
    WorkerLaunch,
    WorkerStatus,
)
from runner.sessions import EnterRequest, Session

EPOCH = 1_700_000_000.0  # the wall time of a trace's second 0
STOPPED = 128 + signal.SIGTERM  # the exit code of a worker stopped by a signal


class VirtualClock(Clock):
    """Both readings move only when the replay moves them: ``at`` seconds into the trace."""

    def __init__(self) -> None:
        super().__init__()
        self.boot = "replay"
        self.at = 0.0

    def wall(self) -> float:
        return EPOCH + self.at

    def mono(self) -> float:
        return self.at

    def move_to(self, at: float) -> None:
        self.at = max(self.at, at)


@dataclass(slots=True)
class Attempt:
    """One worker's attempt: when it started and ended (None: running), on which GPUs."""

    run: str
    worker: int
    start: float
    end: float | None
    gpus: float  # GPUs held, a share counted as its fraction
    due: float  # when it ends if nothing stops it
    stopped: bool = False  # ended by a signal before its work was done


class VirtualExecutor:
    """Workers that end at their trace duration, or at once when signalled."""

    name = "virtual"
    capabilities = Capabilities()

    def __init__(
        self,
        clock: VirtualClock,
        durations: Mapping[str, float],
        shares: Mapping[str, float],
        resume: bool = True,
    ) -> None:
        self.clock = clock
        self.durations = durations  # run name -> seconds of work
        self.shares = shares  # run name -> the fraction of a GPU a shared run holds
        self.resume = resume  # a stopped run goes on from its checkpoint (else from scratch)
        self.done: dict[tuple[str, int], float] = {}  # work kept (checkpointed) per worker
        self.attempts: dict[str, Attempt] = {}  # by handle
        self.history: list[Attempt] = []  # every attempt, in start order

    # --------------------------------------------------------- the Executor protocol

    def reachable(self) -> bool:
        return True

    def follow_logs(self, handle: str, log_path: Path | None = None) -> bool:
        return False

    def start(self, launch: WorkerLaunch) -> str:
        handle = launch.key
        now = self.clock.at
        left = self.durations.get(launch.run, 0.0) - self.done.get((launch.run, launch.worker), 0.0)
        share = self.shares.get(launch.run)
        held = len(launch.gpus) * share if share is not None else float(len(launch.gpus))
        attempt = Attempt(launch.run, launch.worker, now, None, held, now + max(0.0, left))
        self.attempts[handle] = attempt
        self.history.append(attempt)
        return handle

    def signal(self, handle: str, signum: int) -> None:
        attempt = self.attempts.get(handle)
        if attempt is None or attempt.end is not None or signum not in (
            signal.SIGTERM, signal.SIGKILL
        ):  # fmt: skip
            return
        now = self.clock.at
        if now >= attempt.due:
            return  # its work was done: it exits 0 as it would have
        attempt.end, attempt.stopped = now, True
        if self.resume:
            key = (attempt.run, attempt.worker)
            self.done[key] = self.done.get(key, 0.0) + now - attempt.start

    def status(self, handle: str) -> WorkerStatus:
        attempt = self.attempts.get(handle)
        if attempt is None:
            return WorkerStatus(Observed.MISSING)
        if attempt.stopped:
            return WorkerStatus(Observed.EXITED, STOPPED)
        if self.clock.at >= attempt.due:
            if attempt.end is None:
                attempt.end = attempt.due
            return WorkerStatus(Observed.EXITED, 0)
        return WorkerStatus(Observed.RUNNING)

    def remaining(self, handle: str) -> tuple[str, ...]:
        return ()

    def list_workers(self) -> list[ListedWorker]:
        return []  # a replay starts with nothing running

    def cleanup(self, handle: str) -> None:
        self.attempts.pop(handle, None)

    def enter(self, handle: str, request: EnterRequest) -> Session:
        raise ExecutorError("a replay's workers run nothing")

    def terminal(self, handle: str) -> Session:
        raise ExecutorError("a replay's workers have no terminal")

    def not_enforced(self) -> str | None:
        return None

    def close(self) -> None:
        """Nothing held."""

    # ------------------------------------------------------------------ the replay's

    def next_end(self) -> float | None:
        """When the next running worker finishes its work (None: none runs)."""
        return min((a.due for a in self.attempts.values() if a.end is None), default=None)
