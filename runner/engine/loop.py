"""The daemon's tick: observe -> enforce -> settle -> snapshot -> plan -> apply.

Only the loop applies side effects (through the executor: here, in apply_plan.py
and starts.py), and each is written to the store before it is acted on. Stopping
never blocks: SIGTERM now, SIGKILL on a later tick once the stop grace has passed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from runner.clock import Clock, Now, as_clock
from runner.engine import apply_plan
from runner.engine.adopt import adopt
from runner.engine.backend import BackendCapabilities, LoopStatus
from runner.engine.collector import Collector
from runner.engine.crash import crash_point
from runner.engine.drain import drained_snapshot, explained
from runner.engine.idle import IdleWatch
from runner.engine.learned import Forecaster, Learned
from runner.engine.lifecycle import settle_run
from runner.engine.published import Publisher
from runner.engine.retention import (
    RETAIN_EVERY,
    forget_expired,
    forget_over_kept,
    remove_forgotten,
    tidy_log_folders,
)
from runner.engine.settings import LoopSettings
from runner.engine.sharing import shared_refusal
from runner.engine.snapshot import SpecCache, build_snapshot, plannable, snapshot_and_owners
from runner.engine.starts import StartContext, executor_reachable, launch_for
from runner.engine.withdrawals import record_withdrawal, withdrawals
from runner.executors.base import Executor, ExecutorError, Observed, worker_key
from runner.executors.logcap import worker_logs
from runner.model import RunSpec, RunState, StopReason, WorkerState
from runner.planner.estimates import Estimate, estimate_starts, estimate_steps
from runner.planner.plan import Plan, Snapshot, WaitingRun, plan
from runner.reasons import Reason, ReasonCode, RunRef
from runner.sessions import EnterRequest, Session
from runner.store.db import RunRow, Store, WorkerRow, is_run_uid

_LIMIT = ReasonCode.TIME_LIMIT
# stops asked of the loop, carried out here: SIGTERM now, SIGKILL once the grace is over
_STOPS_ASKED = (StopReason.DELETE, StopReason.FAILED, StopReason.RESTART, StopReason.REQUEUE,
                StopReason.IDLE)  # fmt: skip

log = logging.getLogger("astraeus.loop")

PLAN_EVERY = 15.0  # seconds: every waiting run is looked at least this often
PLAN_GAP = 0.1  # seconds: a burst of changes is planned once, not once per change ...
MIN_GAP = 0.005  # ... and after a cheap plan, this soon (see Loop.gap)
GAP_FACTOR = 2.0  # a burst's plans take at most a third of a core: the gap is twice the plan
TICK = 0.5  # seconds between observations of running work
KILL_AGAIN = 2.0  # seconds after the grace: a SIGKILL that did not end a worker is sent again


class Loop:
    """The built-in back end (runner/engine/backend.py): plans here, runs on an executor."""

    def __init__(
        self,
        store: Store,
        executor: Executor,
        settings: LoopSettings,
        clock: Clock | Callable[[], float] | None = None,
        groups: Callable[[float], bool] | None = None,
        planner: Callable[[Snapshot, float], Plan] = plan,
    ) -> None:
        self.store = store
        self.planner = planner  # the product's planner; a replay may put a baseline's here
        self.executor = executor
        self.settings = settings
        self.capabilities = BackendCapabilities("local", executor.name, True, True)
        self.clock = Clock() if clock is None else as_clock(clock)  # calling it reads the wall
        self.now: Now = self.clock.now()  # this tick's readings of both clocks
        self._planned_mono: float | None = None  # when it last planned, on the monotonic clock
        self._next_begin: float | None = None  # the next begin time (wall clock) of a run
        self._wake_mono: float | None = None  # the end of the first back-off (monotonic)
        self.wake = threading.Event()
        self.status = LoopStatus()
        self.specs = SpecCache()
        self._aside: dict[str, str] = {}  # runs set aside in a tick: the cause last said
        self._start_failed: set[str] = set()  # runs whose start failed in the last tick
        self._dirty = True
        self._engine_down = False
        self._next_retention = 0.0
        self._collector = Collector()  # a long queue kept out of the GC's full passes
        self._on_change: Callable[[], None] = lambda: None
        # the plan published at once, its estimates by a helper thread (run_forever's)
        self.publisher = Publisher(self.status, self.estimates, lambda: self._on_change())
        self.learned = Learned(store)  # run lengths from finished runs: the forecasts'
        self.forecaster = Forecaster(self.learned)
        self.groups = groups or (lambda now: False)  # schedules and replicas, each tick
        self.idle: IdleWatch | None = None  # idle GPUs: marks, events, the stop policy
        if settings.idle is not None and settings.idle_tracker is not None:
            self.idle = IdleWatch(store, settings.idle_tracker, settings.idle)
            self.status.idle = self.idle.marks

    def key(self, w: WorkerRow) -> str:
        """The worker's executor handle, also when the daemon died before recording it."""
        return w.handle or worker_key(w.run_uid, w.attempt, w.worker, self.settings.instance)

    def log_path(self, w: WorkerRow) -> Path:
        """Where the worker's output goes: ``logs/<run_uid>/<attempt>-<worker>.log``."""
        return self.settings.logs_dir / w.run_uid / f"{w.attempt}-{w.worker}.log"

    # ------------------------------------------------------------ running

    def run_forever(self, stop: threading.Event) -> None:
        self.publisher.start(stop)
        reconciled = False
        last_error = ""
        while not stop.is_set():
            try:
                if not reconciled:  # retried until the executor answers (Docker may be down)
                    reconciled = self.try_reconcile()
                if reconciled:
                    self.tick()
                last_error = ""
            except Exception as e:  # the loop must outlive any one bad tick
                text = f"{type(e).__name__}: {e}"
                if text != last_error:  # once, not twice a second (a full disk)
                    log.exception("tick failed")
                last_error = text
                self.status.errors = [*self.status.errors[-9:], text]
            if self.wake.wait(self.pause()):
                self.wake.clear()
                self._dirty = True

    def gap(self) -> float:
        """How long after a plan a change waits to be planned: twice what the last plan
        took, from MIN_GAP to PLAN_GAP. A burst of changes is planned at most every gap (a
        third of a core at most), and a change to a short queue is planned at once (a
        submit right after another waited up to PLAN_GAP for a plan of a millisecond)."""
        return min(PLAN_GAP, max(MIN_GAP, GAP_FACTOR * self.status.last_plan_ms / 1000))

    def pause(self) -> float:
        """How long to wait for a change before the next tick: a change not planned yet
        (it came within the gap after the last plan) waits only for the rest of the gap,
        not a whole one; otherwise a tick. A poke ends the wait at once either way."""
        last = self._planned_mono
        if not self._dirty or last is None:
            return TICK
        gap = self.gap()
        return min(gap, max(0.0, gap - (self.clock.now().mono - last)))

    def poke(self) -> None:
        """Something changed (submit, delete, priority): plan at once."""
        self._dirty = True
        self.wake.set()

    def watch(self, notify: Callable[[], None]) -> None:
        self._on_change = notify

    def check_spec(self, spec: RunSpec, workspace: str) -> str | None:
        if spec.interactive and not self.executor.capabilities.terminals:
            return f"interactive runs need the process executor, not {self.executor.name}"
        return shared_refusal(spec, self.settings.machine)  # GPUs shared by memory

    def estimates(self) -> dict[str, Estimate]:
        """The planner replayed forward, within the time budget at the last plan's cost
        (the publisher's helper thread calls it after a plan)."""
        snapshot, owners = snapshot_and_owners(
            self.store, self.settings, self.specs, self.clock.now()
        )
        now, steps = self.clock(), estimate_steps(self.status.last_plan_ms)
        bounds = estimate_starts(snapshot, now, steps)
        # the two forecasts' replays take half the steps each: a request that waits for
        # fresh estimates waits at most twice what the bound alone would take
        half = max(5, steps // 2)
        return self.forecaster.estimates(snapshot, now, bounds, lambda n: owners.get(n, ""), half)

    def log_files(self, run: RunRow) -> list[Path]:
        """Its workers' logs, by the run's id (never an earlier run's of that name)."""
        ok = is_run_uid(run.run_uid)
        return worker_logs(self.settings.logs_dir / run.run_uid) if ok else []

    def enter(self, handle: str, request: EnterRequest) -> Session:
        """A command inside a live worker, when the executor can run one there."""
        if not self.executor.capabilities.enters:
            raise ExecutorError(
                f"the {self.executor.name} executor cannot run commands in a worker"
            )
        return self.executor.enter(handle, request)

    def terminal(self, handle: str) -> Session:
        return self.executor.terminal(handle)

    def try_reconcile(self) -> bool:
        """Reconcile; False, with the outage said once, while the executor's engine does not
        answer (it stopped after the daemon connected, before the first reconcile)."""
        try:
            self.reconcile()
        except ExecutorError:
            if executor_reachable(self.executor):
                raise
            self._engine_away()
            return False
        return True

    def _engine_away(self) -> None:
        if not self._engine_down:
            self._engine_down = True
            text = f"the {self.executor.name} engine does not answer: waiting for it"
            log.warning("%s", text)
            self.status.errors = [*self.status.errors[-9:], text]

    def tick(self) -> None:
        """One round; the wall clock is only written down, intervals are monotonic."""
        self._round(at_once=False)

    def step(self) -> bool:
        """One round that plans a change at once, not after the gap; True when anything
        changed. A replay on a virtual clock, whose time does not pass while it plans,
        steps until nothing changes (runner/sim/replay.py)."""
        return self._round(at_once=True)

    def _round(self, *, at_once: bool) -> bool:
        self.now = self.clock.now()
        now, mono = self.now.wall, self.now.mono
        self.status.ticks += 1
        if not executor_reachable(self.executor):  # its engine is down: wait, do not fail runs
            self._engine_away()
            return False
        if self._engine_down:
            self._engine_down = False
            self._dirty = True
        changed = False
        for phase in self._phases:  # one that fails is logged; planning goes on
            try:
                changed |= phase(now)
            except Exception:
                log.exception("the tick's %s failed; the plan is made all the same",
                              getattr(phase, "__name__", phase))  # fmt: skip
                changed = True
        last = self._planned_mono
        self._dirty |= changed
        due = last is None or mono - last >= PLAN_EVERY
        due |= self._next_begin is not None and now >= self._next_begin  # a calendar time
        due |= self._wake_mono is not None and mono >= self._wake_mono  # a back-off ended
        soon = at_once or (last is not None and mono - last >= self.gap())
        if due or (self._dirty and soon):
            self._dirty = False
            self._planned_mono = mono
            self.plan_and_apply(now)
            changed = True
        if changed:
            self._on_change()
        return changed

    def next_due(self) -> float | None:
        """Seconds from this tick until the loop acts with nothing else changing: a time
        limit reached, a stop grace over, a begin time, a restart back-off's end (None:
        none). A replay's virtual clock jumps there; the daemon's ticks find them anyway."""
        t = self.now
        due = [] if self._next_begin is None else [self._next_begin - t.wall]
        if self._wake_mono is not None:
            due.append(self._wake_mono - t.mono)
        for w in self.store.workers.live():
            if w.state == WorkerState.STOPPING:
                if w.stop_deadline is not None and not w.killed:
                    due.append(t.until(w.stop_deadline, w.stop_deadline_mono, w.boot_id))
                continue
            run = self.store.runs.get(w.run)
            limit = None if run is None else self.specs.shown(run).task.time_limit_seconds
            if limit is not None:
                due.append(limit - t.elapsed(w.started_at, w.started_mono, w.boot_id))
        return min(due, default=None)

    @property
    def _phases(self) -> tuple[Callable[[float], bool], ...]:
        idle = self.idle
        watch = (lambda _: idle.tick(self.now, self.stop_workers)) if idle is not None else None
        steps = (self.observe, self.enforce, watch, self.settle, self.forget, self.groups)
        return tuple(step for step in steps if step is not None)

    def _set_aside(self, name: str, workspace: str, why: str, what: str, now: float) -> None:
        """One run set aside in this tick (``what`` failed): one event, again only when
        the cause changes; the daemon's log has the whole error."""
        if self._aside.get(name) == why:
            return
        self._aside[name] = why
        log.warning("run %s set aside: %s: %s", name, what, why)
        text = Reason(
            f"Set aside: {what} failed in the scheduler's tick (the daemon's log says why);"
            " tried again at the next tick, the other runs go on",
            code=ReasonCode.SET_ASIDE,
        )
        with contextlib.suppress(Exception), self.store.transaction() as tx:
            self.store.events.add(tx, name, workspace, ReasonCode.SET_ASIDE, text, now)

    # ------------------------------------------------------ 1. observe

    def observe(self, now: float) -> bool:
        """Record workers that exited or vanished since the last tick."""
        changed = False
        for w in self.store.workers.live():
            status = self.executor.status(self.key(w))
            if status.state is Observed.RUNNING:
                if w.state == WorkerState.STARTING:  # started before a crash: adopt it
                    self._mark_running(w)
                    changed = True
                continue
            changed = True
            self._record_end(w, status.state, status.exit_code, status.error, now)
        return changed

    def _mark_running(self, w: WorkerRow) -> None:
        with self.store.transaction() as tx:
            handle = worker_key(w.run_uid, w.attempt, w.worker, self.settings.instance)
            self.store.workers.set_running(tx, w.id, handle=handle)
            self.store.runs.started(tx, w.run)

    def _record_end(
        self, w: WorkerRow, state: Observed, code: int | None, error: str | None, now: float
    ) -> None:
        stop_reason = w.stop_reason
        if state is Observed.MISSING and w.state == WorkerState.STARTING and w.handle is None:
            error = "never started (the daemon stopped before starting it)"
            stop_reason = StopReason.NEVER_STARTED  # not the program's failure: no restart spent
        elif state is Observed.MISSING:
            error = error or "the worker is gone (lost)"
        elif stop_reason == StopReason.WITHDRAWN:
            # SIGTERM was sent: an end within its grace is the stop's
            left = self.now.until(w.stop_deadline or 0.0, w.stop_deadline_mono, w.boot_id)
            stop_reason = StopReason.PREEMPT if left > 0 else None
        run = self.store.runs.get(w.run)
        with self.store.transaction() as tx:
            ended = WorkerState.EXITED if state is Observed.EXITED else WorkerState.LOST
            self.store.workers.end(
                tx, w.id, ended, now, exit_code=code, error=error, stop_reason=stop_reason
            )
            if run is not None:
                seconds = max(0.0, self.now.elapsed(w.started_at, w.started_mono, w.boot_id))
                cpu = seconds * w.cpu_milli / 1000
                self.store.usage.add(tx, run, seconds * len(w.gpus), cpu)

    # ------------------------------------------------------ 2. enforce

    def enforce(self, now: float) -> bool:
        """Stop what must stop (delete, time limit) and SIGKILL past the grace.

        Time limits and graces are measured on the monotonic clock (runner/clock.py).
        """
        t, changed = self.now, False
        live = self.store.workers.live()
        by_run: dict[str, list[WorkerRow]] = {}
        for w in live:
            by_run.setdefault(w.run, []).append(w)
        for name, workers in by_run.items():
            run = self.store.runs.get(name)
            if run is None:
                continue
            limit = self.specs.shown(run).task.time_limit_seconds
            running = [w for w in workers if w.state != WorkerState.STOPPING]
            request = run.stop_request
            if request in _STOPS_ASKED and running:
                if request == StopReason.DELETE:
                    with self.store.transaction() as tx:
                        reason = Reason("Deleted: stopping", code=ReasonCode.DELETING)
                        self.store.runs.set_state(tx, run.name, RunState.STOPPING, reason)
                self.stop_workers(run.name, running, request, None, now)
                changed = True
            elif limit is not None and any(
                t.elapsed(w.started_at, w.started_mono, w.boot_id) >= limit for w in running
            ):
                self._time_limit(run.name, running, now)
                changed = True
            else:
                changed |= self._gang_preempted_again(run, running, now)
        for w in live:
            if w.state != WorkerState.STOPPING or w.stop_deadline is None:
                continue
            left = t.until(w.stop_deadline, w.stop_deadline_mono, w.boot_id)
            if not w.killed and left <= 0:
                self._sigkill(w, now)
                changed = True
            elif left <= -KILL_AGAIN:
                self._signal(w, signal.SIGKILL)  # the first one was lost: a crash, an outage
        return changed

    def _gang_preempted_again(self, run: RunRow, running: list[WorkerRow], now: float) -> bool:
        """A gang worker that ended in the grace of a withdrawn preemption was preempted:
        the rest of the gang is stopped too (a gang never runs in part)."""
        if not self.specs.gang(run.name) or not any(
            w.stop_reason == StopReason.WITHDRAWN for w in running
        ):
            return False
        attempt = max(w.attempt for w in running)
        ended = [
            w for w in self.store.workers.of(run.name)
            if w.attempt == attempt and w.state == WorkerState.CANCELLED
            and w.stop_reason == StopReason.PREEMPT
        ]  # fmt: skip
        if not ended:
            return False
        self.stop_workers(run.name, running, StopReason.PREEMPT, ended[0].stopping_for, now)
        return True

    def _time_limit(self, run: str, workers: list[WorkerRow], now: float) -> None:
        with self.store.transaction() as tx:
            self.store.runs.request_stop(
                tx,
                run,
                StopReason.TIMELIMIT,
                Reason("Time limit reached: stopping", code=_LIMIT),
                stopping=True,
            )
            row = self.store.runs.get(run)
            ws = row.workspace if row else ""
            self.store.events.add(
                tx, run, ws, ReasonCode.TIME_LIMIT, Reason("Time limit reached", code=_LIMIT), now
            )
        self.stop_workers(run, workers, StopReason.TIMELIMIT, None, now)

    def stop_workers(
        self,
        run: str,
        workers: list[WorkerRow],
        why: StopReason,
        for_run: RunRef | None,
        now: float,
    ) -> None:
        """Write Stopping, then SIGTERM: the SIGKILL follows when the grace ends."""
        t, grace = self.now, self.settings.machine.stop_grace
        with self.store.transaction() as tx:
            for w in workers:
                started = t.mono - t.elapsed(w.started_at, w.started_mono, w.boot_id)
                self.store.workers.stop(
                    tx, w.id, why, now + grace, for_run=for_run, deadline_mono=t.mono + grace,
                    started_mono=started, boot=t.boot,
                )  # fmt: skip
        crash_point("after-stop-recorded")
        for w in workers:
            self._signal(w, signal.SIGTERM)

    def _sigkill(self, w: WorkerRow, now: float) -> None:
        grace = self.settings.machine.stop_grace
        try:
            left = self.executor.remaining(self.key(w))
        except (ExecutorError, OSError):
            left = ()
        with self.store.transaction() as tx:
            self.store.workers.mark_killed(tx, w.id)
            run = self.store.runs.get(w.run)
            shell = None if run is None else _shell(self.specs.shown(run).task.command)
            message = Reason(killed_message(w.worker, grace, left, shell), code=ReasonCode.MESSAGE)
            self.store.events.add(
                tx, w.run, run.workspace if run else "", ReasonCode.KILLED, message, now
            )
        crash_point("after-kill-recorded")
        self._signal(w, signal.SIGKILL)

    def _signal(self, w: WorkerRow, signum: int) -> None:
        try:
            self.executor.signal(self.key(w), signum)
        except ExecutorError as e:
            log.warning("could not signal %s: %s", w.run, e)

    # ------------------------------------------------------ 3. settle

    def settle(self, now: float) -> bool:
        """Turn ended workers into run outcomes: requeue, restart, finish."""
        changed = False
        for run in self.store.runs.to_settle():
            workers = self.store.workers.of(run.name)
            spec = self.specs.shown(run)
            idle_after = None if self.idle is None else self.idle.settings.after
            cleanup = settle_run(self.store, run, spec, workers, self.now, idle_after,
                                 self.settings.restart_backoff)  # fmt: skip
            if cleanup is None:
                continue
            changed = True
            for handle in cleanup:
                try:
                    self.executor.cleanup(handle)
                except ExecutorError as e:
                    log.warning("cleanup of %s failed: %s", handle, e)
        return changed

    def forget(self, now: float) -> bool:
        """Forget finished runs kept past the retention time (every RETAIN_EVERY s), and
        remove the files of forgotten runs (runner/engine/retention.py)."""
        forgot = 0
        if now >= self._next_retention:
            self._next_retention = now + RETAIN_EVERY
            forgot = forget_expired(self.store, self.specs, self.settings.finished_retention, now)
            forgot += forget_over_kept(self.store, self.specs, self.settings.max_kept)
            self.specs.keep_only({r.name for r in self.store.runs.all(active_only=True)})
        removed = remove_forgotten(self.store, self.executor, self.settings.logs_dir)
        return bool(forgot) or removed

    # ---------------------------------------------- 4-6. plan and apply

    def plan_and_apply(self, now: float) -> None:
        t0 = time.perf_counter()
        found = plannable(self.store, self.settings, self.specs, self.now)
        for run in found.active:
            if run.name in self.specs.broken:
                self._set_aside(run.name, run.workspace, self.specs.broken[run.name],
                                "reading its stored spec", now)  # fmt: skip
        self._aside = {n: w for n, w in self._aside.items() if n in self.specs.broken
                       or n in self._start_failed}  # fmt: skip
        self._next_begin = found.next_begin  # a begin time passing plans again at once
        self._wake_mono = None if found.wake_in is None else self.now.mono + found.wake_in
        live = self.store.workers.live()
        deps, held, active, runs = found.deps, found.held, found.active, found.runs
        if deps.failing or deps.met:
            apply_plan.settle_dependencies(self.store, deps, active, now)  # fail, or mark met
        independent = found.independent
        resting = found.resting
        snapshot = build_snapshot(self.settings, runs, live, self.specs, independent, self.now,
                                  resting)  # fmt: skip
        waiting = drained_snapshot(snapshot, found.drain).waiting
        if self._withdraw(waiting, active, live, now):  # the victims run on: again
            live = self.store.workers.live()
            independent = {name: self.store.workers.of(name) for name in independent}
            snapshot = build_snapshot(self.settings, runs, live, self.specs, independent,
                                      self.now, resting)  # fmt: skip
        result = explained(
            self.planner(drained_snapshot(snapshot, found.drain), now), snapshot, found.drain
        )
        last = self.status.plan
        if last is not None and result == last:  # the same plan: kept, so what the API
            result = last  # made from it (a list, a stream's rendering) stays valid
        self.publisher.planned(result)
        self.status.last_plan_at = now
        self._collector.seen(len(found.active))
        self.status.last_plan_ms = (time.perf_counter() - t0) * 1000
        self.status.plan_times.observe(self.status.last_plan_ms)
        apply_plan.apply_reasons(self.store, result, active, now, {**deps.waiting, **held})
        grace = self.settings.machine.stop_grace
        apply_plan.apply_preemptions(
            self.store, self.specs, grace, result, live, now, self.stop_workers
        )
        ctx = StartContext(self.store, self.executor, self.settings, self.specs, self.now,
                           self.forecaster.first_shown)  # fmt: skip
        for start in result.starts:
            try:
                launch_for(ctx, start, now)
            except Exception as exc:  # this run's start, not the others'
                log.exception("starting %s failed in the tick", start.run)
                self._start_failed.add(start.run)
                found_run = next((r for r in found.active if r.name == start.run), None)
                if found_run is not None:
                    self._set_aside(start.run, found_run.workspace, f"{type(exc).__name__}: {exc}",
                                    "starting it", now)  # fmt: skip
            else:
                self._start_failed.discard(start.run)

    def _withdraw(
        self, waiting: tuple[WaitingRun, ...], runs: list[RunRow], live: list[WorkerRow],
        now: float,
    ) -> bool:  # fmt: skip
        """Withdraw the preemptions no waiting run needs any more (runner/engine/withdrawals.py)."""
        found = withdrawals(live, {r.name: r for r in runs}, {w.name: w for w in waiting},
                            self.specs)  # fmt: skip
        done = False
        for w in found:
            states = [self.executor.status(self.key(x)).state for x in w.workers]
            if any(s is not Observed.RUNNING for s in states):
                continue  # one has ended: its end counts as preempted (observe, next tick)
            record_withdrawal(self.store, w, live, now)
            done = True
        return done

    # ------------------------------------------------------- reconcile

    def reconcile(self) -> None:
        """After a restart: adopt what still runs, stop what the store does not know.

        A worker written Stopping, whose SIGTERM may not have been sent before the daemon
        died, gets it (again) now, so it can still save its work within the grace.
        """
        tidy_log_folders(self.store, self.settings.logs_dir)
        live = self.store.workers.live()
        known = {self.key(w): w for w in live}
        for w in live:
            if w.state == WorkerState.STOPPING and not w.killed:
                self._signal(w, signal.SIGTERM)
        adopt(self.executor, {h: self.log_path(w) for h, w in known.items()})


SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox"})


def _shell(command: str | None) -> str | None:
    """The shell a worker's first process is (``bash -c '…'``), or None."""
    name = os.path.basename(command or "")
    return name if name in SHELLS else None


def killed_message(worker: int, grace: float, left: Sequence[str], shell: str | None) -> str:
    """The ``Killed`` event: what was still running when the grace ended, and, when the
    worker's first process was a shell, to start the program with exec."""
    what = ", ".join(left[:4]) if left else "the program"
    text = (
        f"Sent SIGKILL to worker {worker}: {what} did not exit within the {grace:g} s stop "
        "grace after SIGTERM."
    )
    if shell is not None:
        text += (
            f" Its command is a shell ({shell}): start the program with exec so SIGTERM reaches it."
        )
    return text
