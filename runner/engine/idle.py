"""Runs whose GPUs do nothing: the loop's step that marks them idle, and stops them when
``[machine] idle_gpu_policy = "stop"`` (docs/scheduling.md, "Idle GPUs").

The telemetry's :class:`~runner.telemetry.idle.IdleTracker` says since when each run's
GPUs have been at or under the threshold (on the loop's monotonic clock). A run whose
stretch reaches ``idle_gpu_after`` is idle: once per stretch it gets a ``GpuIdle`` event
(GPU_IDLE) and its mark (``marks``: run uid -> the stretch's start on the wall clock, read
by the API as the run's ``idle_since``); under the stop policy it is also stopped with the
grace, its stop reason ``StopReason.IDLE``, and it fails (runner/engine/lifecycle.py). When
a marked run's GPUs work again it gets a ``GpuBusy`` event (GPU_BUSY) and loses the mark.

A mark is set before the event's transaction commits and dropped before the next one,
so a list kept for the store's generation (runner/api/lists.py) never outlives it. The
stretches live in memory: after a restart a run is idle again after a whole
``idle_gpu_after``. Events name only the run they are about.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runner.clock import Now
from runner.config.idle import IdlePolicy
from runner.durations import compact
from runner.model import RunState, StopReason, WorkerState
from runner.reasons import Reason, ReasonCode, RunRef
from runner.store.db import Store, WorkerRow
from runner.telemetry.idle import IdleTracker

__all__ = ["IdleSettings", "IdleWatch", "idle_stopped"]

StopWorkers = Callable[[str, list[WorkerRow], StopReason, RunRef | None, float], None]


@dataclass
class IdleSettings:
    """``after``: seconds idle before a run is marked (None: never); ``threshold``: % ."""

    after: float | None
    threshold: float
    policy: IdlePolicy = IdlePolicy.WARN


def idle_stopped(after: float | None) -> Reason:
    """A run's reason once the stop policy has ended it."""
    text = (
        f"Stopped: its GPUs were idle for {compact(after)} (idle_gpu_policy)"
        if after
        else "Stopped: its GPUs were idle (idle_gpu_policy)"  # the rule was turned off since
    )
    return Reason(text, code=ReasonCode.IDLE_STOPPED)


class IdleWatch:
    """The loop's idle step: reads the tracker, writes the events, asks for the stops."""

    def __init__(self, store: Store, tracker: IdleTracker, settings: IdleSettings) -> None:
        self.store, self.tracker, self.settings = store, tracker, settings
        self.marks: dict[str, float] = {}  # run uid -> idle since (wall clock), for the API

    def tick(self, t: Now, stop: StopWorkers) -> bool:
        """Mark runs idle (and stop them, by the policy), unmark those busy again; True
        when something was written."""
        settings = self.settings
        self.tracker.threshold = settings.threshold
        after = settings.after
        stretches = self.tracker.stretches()
        due = (
            {} if after is None else {uid: s for uid, s in stretches.items() if s.seconds >= after}
        )
        if due.keys() == self.marks.keys():
            return False  # nothing to mark or unmark (an ended run's mark goes with its
            # next sample; the API shows a mark only on a run with live workers)
        live: dict[str, list[WorkerRow]] = {}
        for w in self.store.workers.live():
            live.setdefault(w.run_uid, []).append(w)
        due = {uid: s for uid, s in due.items() if uid in live}  # an ended run is not idle
        changed = False
        for uid in [u for u in self.marks if u not in due]:
            since = self.marks.pop(uid)  # before the event commits (see the module's note)
            changed |= self._busy_again(live.get(uid, []), t, t.wall - since)
        for uid, stretch in due.items():
            if uid in self.marks:
                continue
            workers = live.get(uid, [])
            running = [w for w in workers if w.state != WorkerState.STOPPING]
            run = self.store.runs.get(workers[0].run) if workers else None
            if run is None or run.state != RunState.RUNNING or run.stop_request is not None:
                continue  # starting, stopping or going: not for this step
            self.marks[uid] = t.wall - (t.mono - stretch.since)
            under = f"under {settings.threshold:g} % utilisation"
            text = f"GPUs idle for {compact(stretch.seconds)} ({under})"
            with self.store.transaction() as tx:
                if settings.policy is IdlePolicy.STOP:
                    self.store.runs.request_stop(
                        tx, run.name, StopReason.IDLE,
                        Reason(f"Stopping: its GPUs were idle for {compact(stretch.seconds)} "
                               "(idle_gpu_policy)", code=ReasonCode.IDLE_STOPPED),
                        stopping=True,
                    )  # fmt: skip
                    text += "; stopping it (idle_gpu_policy)"
                self.store.events.add(
                    tx,
                    run.name,
                    run.workspace,
                    ReasonCode.GPU_IDLE,
                    Reason(text, code=ReasonCode.MESSAGE),
                    t.wall,
                )
            if settings.policy is IdlePolicy.STOP:
                stop(run.name, running, StopReason.IDLE, None, t.wall)
            changed = True
        return changed

    def _busy_again(self, workers: list[WorkerRow], t: Now, idle: float) -> bool:
        if not workers:
            return False  # it ended: its end says so
        run = self.store.runs.get(workers[0].run)
        if run is None or run.state != RunState.RUNNING or run.stop_request is not None:
            return False
        with self.store.transaction() as tx:
            message = Reason(
                f"GPUs in use again after {compact(idle)} idle", code=ReasonCode.MESSAGE
            )
            self.store.events.add(tx, run.name, run.workspace, ReasonCode.GPU_BUSY, message, t.wall)
        return True
