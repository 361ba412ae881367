"""The daemon as a front for Slurm (``executor = "slurm"``): Slurm plans, Astraeus shows.

Every tick: read the queue (``squeue``), submit the runs that have no job yet
(``sbatch``, a worker row written before it and given the job id after), carry
each job's state, reason, GPUs, start estimate and restarts into the run, and
carry the runs' requests the other way: a delete becomes ``scancel``, a
priority change ``scontrol update nice``. Submits keep every check of the
built-in daemon (the workspace's cap, drives) before Slurm sees anything.

The order, the head and the estimates shown are Slurm's: pending jobs by
Slurm's priority, the head is the job Slurm holds room for (reason
``Resources``) and its start is ``squeue --start``'s. A job Slurm requeues
(preemption, a node failure) stays the same job and counts as a restart, as
Slurm counts it; a job that fails is submitted again while the run's restart
budget lasts, as the built-in daemon restarts it.

Crash safety: a job is written Starting (no handle) before sbatch; after a
crash, a run with such a worker adopts the job of its name that Astraeus
submitted (``--comment=astraeus:<workspace>``), or submits again if there is none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from runner.clock import Clock, as_clock
from runner.config.slurm import SlurmConfig
from runner.engine.apply_plan import settle_dependencies
from runner.engine.backend import BackendCapabilities, LoopStatus
from runner.engine.dependencies import Dependencies, check_dependencies
from runner.engine.holds import Kept, kept_out
from runner.engine.published import Published
from runner.engine.snapshot import SpecCache
from runner.executors.base import ExecutorError
from runner.model import RunSpec, RunState, StopReason, WorkerState
from runner.reasons import Reason, ReasonCode
from runner.sessions import EnterRequest, Session
from runner.slurm.client import SlurmClient
from runner.slurm.errors import SlurmError
from runner.slurm.jobs import SlurmJob
from runner.slurm.outcomes import ended, lost
from runner.slurm.requests import Requests
from runner.slurm.script import build_batch, workspace_of_comment
from runner.slurm.view import slurm_plan
from runner.store.db import (
    RunRow,
    Store,
    WorkerRow,
    is_run_uid,
    latest_workers,
)
from runner.store.tx import KEEP

log = logging.getLogger("astraeus.slurm")
FRONT_TICK = 1.0  # seconds between looks at Slurm's queue
SUBMIT_TRIES = 5  # sbatch failures in a row before a run fails (an outage passes sooner)
HANDLE = "slurm:"


def job_id(worker: WorkerRow) -> int | None:
    handle = worker.handle or ""
    tail = handle.removeprefix(HANDLE)
    return int(tail) if handle.startswith(HANDLE) and tail.isdigit() else None


class SlurmFront:
    """A back end (runner/engine/backend.py) whose work Slurm plans and runs: nothing
    starts on this machine, so it has no executor and no planner of its own."""

    capabilities = BackendCapabilities("slurm", "slurm", local_gpus=False, plans_locally=False)

    def __init__(
        self,
        store: Store,
        config: SlurmConfig,
        stop_grace: float,
        client: SlurmClient | None = None,
        clock: Clock | Callable[[], float] = time.time,
        groups: Callable[[float], bool] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.stop_grace = stop_grace  # a partition's grace when Slurm will not say it
        self.client = client or SlurmClient(bin_dir=config.bin_dir)
        self.clock = as_clock(clock)
        self.groups = groups or (lambda now: False)  # schedules and replicas, each tick
        self.status = LoopStatus()
        self.specs = SpecCache()
        self.jobs: dict[int, SlurmJob] = {}
        self.requests = Requests(store, self.client, config.settings)
        self._wake = threading.Event()
        self._on_change: Callable[[], None] = lambda: None
        self._deps = Dependencies()
        self._kept = Kept({}, None)  # held, or before their begin time: not submitted yet
        self._graces: dict[str, float] = {}
        self._failures: dict[str, int] = {}  # run -> sbatch failures in a row

    # ------------------------------------------------------------ the seam

    def run_forever(self, stop: threading.Event) -> None:
        """Nothing to adopt on this machine first: Slurm keeps the jobs."""
        last_error = ""
        while not stop.is_set():
            try:
                self.tick()
                last_error = ""
            except Exception as e:  # the front must outlive a bad tick (slurmctld away)
                text = f"{type(e).__name__}: {e}"
                if text != last_error:
                    log.warning("tick failed: %s", text)
                last_error = text
                self.status.errors = [*self.status.errors[-9:], text]
            if self._wake.wait(FRONT_TICK):
                self._wake.clear()

    def poke(self) -> None:
        self._wake.set()

    def watch(self, notify: Callable[[], None]) -> None:
        self._on_change = notify

    def check_spec(self, spec: RunSpec, workspace: str) -> str | None:
        """What sbatch would refuse for the cluster's settings, refused at submit instead."""
        if spec.interactive:
            return "interactive runs are not available on the Slurm front: use srun --pty"
        try:
            build_batch(spec, self.config.settings, workspace=workspace)
        except SlurmError as e:
            return f"Slurm cannot run it: {e}"
        return None

    def log_files(self, run: RunRow) -> list[Path]:
        """Slurm writes each job's output to the shared log folder, named as _submit names it."""
        shared = self.config.settings.log_dir
        stem = run.run_uid if is_run_uid(run.run_uid) else run.name
        path = Path(shared) / f"{stem}.log" if shared else None
        return [path] if path is not None and path.is_file() else []

    def enter(self, handle: str, request: EnterRequest) -> Session:
        """Slurm's own ``srun --jobid … --overlap`` does this on a cluster; not through here."""
        raise ExecutorError("exec is not available on the Slurm front: use srun --jobid --overlap")

    def terminal(self, handle: str) -> Session:
        raise ExecutorError("interactive runs are not available on the Slurm front: use srun --pty")

    def tick(self) -> None:
        now = self.clock()
        self.status.ticks += 1
        t0 = time.perf_counter()
        self.jobs = {j.job_id: j for j in self.client.jobs() if workspace_of_comment(j.comment)}
        changed = self.groups(now)
        watched = self._watched()
        self._deps = check_dependencies(watched, self.specs.get, self.store.runs.states)
        if self._deps.failing or self._deps.met:
            settle_dependencies(self.store, self._deps, watched, now)
            watched, changed = self._watched(), True  # failed ones must not be submitted
        self._kept = kept_out(watched, self.specs.get, self.clock.now())
        for run in watched:
            changed |= self._follow(run, now)
        for run in self._watched():  # as _follow left them: requests act on fresh rows
            changed |= self._requests(run, now)
        self._plan(now)
        self.status.last_plan_at = now
        self.status.last_plan_ms = (time.perf_counter() - t0) * 1000
        self.status.plan_times.observe(self.status.last_plan_ms)
        if changed:
            self._on_change()

    def _watched(self) -> list[RunRow]:
        """Active runs, and finished ones whose job still lives (deleted while queued)."""
        runs = {r.name: r for r in self.store.runs.all(active_only=True)}
        for w in self.store.workers.live():
            if w.run not in runs and (row := self.store.runs.get(w.run)) is not None:
                runs[w.run] = row
        return list(runs.values())

    # ------------------------------------------------------------ one run

    def _latest(self, run: RunRow) -> WorkerRow | None:
        latest = latest_workers(self.store.workers.of(run.name))
        return latest.get(0)

    def _follow(self, run: RunRow, now: float) -> bool:
        worker = self._latest(run)
        live = worker is not None and worker.state in WorkerState.LIVE
        if worker is not None and live and worker.handle is None:
            return self._adopt_or_forget(run, worker, now)
        if not live:
            if run.state != RunState.QUEUED or run.stop_request is not None:
                return False
            waits = self._deps.waiting.get(run.name) or self._kept.reasons.get(run.name)
            if waits is not None:  # held here until its dependencies succeed (or released)
                if run.reason != waits:
                    with self.store.transaction() as tx:
                        self.store.runs.set_reason(tx, run.name, waits)
                    return True
                return False
            self._submit(run, now)
            return True
        assert worker is not None
        number = job_id(worker)
        job = self.jobs.get(number) if number is not None else None
        if job is None:
            return lost(self.store, run, worker, now)
        return self._carry(run, worker, job, now)

    def _submit(self, run: RunRow, now: float) -> None:
        spec = replace(self.specs.get(run), priority=run.priority)  # as it is now
        try:
            batch = build_batch(spec, self.config.settings, workspace=run.workspace,
                                uid=run.uid, gid=run.gid, log_name=run.run_uid or None)  # fmt: skip
        except SlurmError as e:  # this run cannot go to this cluster: no retry helps
            self._fail_submit(run, None, str(e), now)
            return
        attempt = run.attempts + 1
        worker = spec.worker_resources()
        with self.store.transaction() as tx:  # written before sbatch: see the module's doc
            self.store.workers.insert(tx, run.name, attempt, 0, (), worker.cpu_milli,
                                     worker.memory, now)  # fmt: skip
            self.store.runs.set_attempts(tx, run.name, attempt)
        try:
            number = self.client.submit(batch)
        except SlurmError as e:
            self._submit_failed(run, attempt, str(e), now)
            return
        self._failures.pop(run.name, None)
        self._record_job(run, attempt, number, now)

    def _submit_failed(self, run: RunRow, attempt: int, error: str, now: float) -> None:
        """sbatch failed: maybe Slurm refused it, maybe it never answered (and the job may
        exist). The worker stays without a job id, so the next tick adopts a job of the
        run's name or submits again; after SUBMIT_TRIES failures in a row the run fails."""
        tries = self._failures[run.name] = self._failures.get(run.name, 0) + 1
        if tries >= SUBMIT_TRIES:
            self._failures.pop(run.name, None)
            self._fail_submit(run, attempt, error, now)
            return
        if tries == 1:
            text = Reason(f"sbatch failed ({error}); trying again", code=ReasonCode.MESSAGE)
            with self.store.transaction() as tx:
                self.store.runs.set_reason(tx, run.name, text)
                self.store.events.add(tx, run.name, run.workspace, ReasonCode.SLURM, text, now)

    def _record_job(self, run: RunRow, attempt: int, number: int, now: float) -> None:
        with self.store.transaction() as tx:
            self.store.workers.set_job_handle(tx, run.name, attempt, f"{HANDLE}{number}")
            text = Reason(f"Submitted to Slurm as job {number}", code=ReasonCode.MESSAGE)
            self.store.runs.set_reason(tx, run.name, text)
            self.store.events.add(tx, run.name, run.workspace, ReasonCode.SLURM, text, now)

    def _fail_submit(self, run: RunRow, attempt: int | None, error: str, now: float) -> None:
        text = Reason(f"Failed: Slurm refused it: {error}", code=ReasonCode.MESSAGE)
        with self.store.transaction() as tx:
            if attempt is not None:  # the worker written for this sbatch
                self.store.workers.fail_job(tx, run.name, attempt, error, now)
            self.store.runs.finish(tx, run.name, RunState.FAILED, now, text)
            self.store.events.add(tx, run.name, run.workspace, ReasonCode.FAILED, text, now)

    def _adopt_or_forget(self, run: RunRow, worker: WorkerRow, now: float) -> bool:
        """A worker written before sbatch whose job id was never recorded (a crash)."""
        mine = [j for j in self.jobs.values() if j.name == run.name]
        known = {job_id(w) for w in self.store.workers.of(run.name)}
        found = [
            j
            for j in mine
            if j.job_id not in known and j.submitted and j.submitted >= worker.started_at - 5
        ]
        if found:
            self._record_job(run, worker.attempt, max(j.job_id for j in found), now)
        else:
            with self.store.transaction() as tx:
                never = "never submitted (the daemon stopped first)"
                self.store.workers.end(tx, worker.id, WorkerState.CANCELLED, now, error=never)
        return True

    def _carry(self, run: RunRow, worker: WorkerRow, job: SlurmJob, now: float) -> bool:
        """The job's news into the run and its worker row."""
        state = job.state
        if state in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "CONFIGURING"):
            restarted = job.restarts > run.restarts
            queue = run.state not in (RunState.QUEUED, *RunState.FINISHED)
            if restarted or queue:
                self._requeued(run, worker, job, queue, now)
            if worker.state != WorkerState.STARTING:
                with self.store.transaction() as tx:
                    self.store.workers.waits(tx, worker.id)
            return restarted or queue
        if state in ("RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING"):
            return self._running(run, worker, job, now)
        limit = self.specs.get(run).restart_limit
        return ended(self.store, run, worker, job, limit, list(self.jobs.values()), now)

    def _running(self, run: RunRow, worker: WorkerRow, job: SlurmJob, now: float) -> bool:
        if job.preempt_time is not None and job.state == "RUNNING":
            return self._preempting(run, worker, job, now)
        target = RunState.STOPPING if job.state == "COMPLETING" else RunState.RUNNING
        gpus = tuple(job.gpu_indices)
        if run.state == target and worker.state == WorkerState.RUNNING and worker.gpus == gpus:
            return False
        with self.store.transaction() as tx:
            self.store.workers.set_running(tx, worker.id, gpus=gpus)
            if run.state not in RunState.FINISHED and run.state != target:
                self.store.runs.set_state(tx, run.name, target, None, job.start or now)
                if target == RunState.RUNNING:
                    shown = ",".join(map(str, gpus)) or "none"
                    text = Reason(
                        f"Started by Slurm: job {job.job_id} on {job.nodes or '?'}, GPUs {shown}",
                        code=ReasonCode.MESSAGE,
                    )
                    self.store.events.add(
                        tx, run.name, run.workspace, ReasonCode.STARTED, text, now
                    )
        return True

    def _preempting(self, run: RunRow, worker: WorkerRow, job: SlurmJob, now: float) -> bool:
        """Slurm preempts the job: its grace runs (the partition's GraceTime), then a requeue."""
        if worker.state == WorkerState.STOPPING:
            return False
        assert job.preempt_time is not None
        deadline = job.preempt_time + self._grace(job.partition)
        text = Reason(
            f"Preempted by higher-priority work (Slurm: job {job.job_id} is requeued when the "
            f"{job.partition} partition's grace ends)",
            code=ReasonCode.MESSAGE,
        )
        with self.store.transaction() as tx:
            self.store.workers.stop(tx, worker.id, StopReason.PREEMPT, deadline)
            if run.state not in RunState.FINISHED:
                self.store.runs.set_state(tx, run.name, RunState.STOPPING, text)
                self.store.events.add(tx, run.name, run.workspace, ReasonCode.PREEMPTED, text, now)
        return True

    def _grace(self, partition: str) -> float:
        if partition not in self._graces:
            try:
                self._graces[partition] = float(self.client.partition_grace(partition))
            except SlurmError:
                return self.stop_grace
        return self._graces[partition]

    def _requeued(
        self, run: RunRow, worker: WorkerRow, job: SlurmJob, queue: bool, now: float
    ) -> None:
        """Slurm queued the job again (``job.restarts`` counts it), or holds it pending."""
        with self.store.transaction() as tx:
            if job.restarts > run.restarts:
                # seen in its grace: a preemption too
                preempted = worker.stop_reason == StopReason.PREEMPT
                preemptions = run.preemptions + 1 if preempted else KEEP
                self.store.runs.note_restarts(tx, run.name, job.restarts, preemptions)
            if queue:
                self.store.runs.requeue(tx, run.name)
            if job.restarts > run.restarts:
                text = Reason(
                    f"Requeued by Slurm (restart {job.restarts})", code=ReasonCode.MESSAGE
                )
                self.store.events.add(tx, run.name, run.workspace, ReasonCode.REQUEUED, text, now)

    # ------------------------------------------------------------ requests

    def _requests(self, run: RunRow, now: float) -> bool:
        worker = self._latest(run)
        number = job_id(worker) if worker is not None else None
        job = self.jobs.get(number) if number is not None else None
        return self.requests.carry(run, job, now)

    # ------------------------------------------------------------ the view

    def _plan(self, now: float) -> None:
        """Slurm's order and head, in the shape the API shows the built-in planner's."""
        runs = {r.name: r for r in self.store.runs.all(active_only=True)}
        plan, estimates = slurm_plan(self.jobs, runs, now)  # squeue --start's estimates
        self._write_reasons(plan.reasons, runs)
        was = self.status.published
        if plan != was.plan or estimates != was.estimates:  # both at once: always current
            self.status.published = Published(was.version + 1, plan, estimates, True)

    def _write_reasons(self, reasons: Mapping[str, Reason], runs: dict[str, RunRow]) -> None:
        changes = {
            n: r
            for n, r in reasons.items()
            if runs[n].reason != r and runs[n].state == RunState.QUEUED
        }
        if changes:
            with self.store.transaction() as tx:
                for name, reason in changes.items():
                    self.store.runs.set_reason(tx, name, reason)
