"""A workload replayed through the daemon's own loop on a virtual clock.

The replay builds what the daemon builds (its config's workspaces, quotas, weights and
grace; a store in a fresh SQLite file; the loop; the service that checks each submit)
with two parts swapped: the clock, which jumps from one event to the next, and the
executor, whose workers last as long as the trace says. Each run is submitted through
the service at its trace time; at every moment something happens (a submit, a worker's
end, a time limit, a grace running out, a begin time, a back-off's end) the loop ticks
until nothing more changes, planning at once. A baseline policy takes the planner's
place in the same loop (``runner/sim/policies.py``): everything else is the same code.

Not modelled: start-up cost, I/O contention, work that ignores SIGTERM (a worker exits at
once when stopped), the periodic re-plan between events.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import os
import random
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.config.files import config_path, default_home
from runner.config.load import Config, load_config, parse_config
from runner.engine.backoff import Backoff
from runner.engine.loop import Loop
from runner.engine.settings import LoopSettings
from runner.engine.snapshot import snapshot_now
from runner.model import MAX_PRIORITY, StopReason
from runner.planner.estimates import MAX_STEPS, estimate_starts
from runner.planner.plan import Plan, Snapshot, plan
from runner.planner.types import SIMULATED_GPU_MEMORY, Machine
from runner.runspec.build import run_document
from runner.service.caller import Caller, ServiceError, start_refusal
from runner.service.drain import drain, resume
from runner.service.runs import Service
from runner.sim.policies import POLICIES
from runner.sim.report import Calibration, Outcome
from runner.sim.trace import TraceRun
from runner.sim.virtual import EPOCH, Attempt, VirtualClock, VirtualExecutor
from runner.store.db import Store

POLICY_NAMES = ("astraeus", *POLICIES)
SAME_MOMENT = 50  # ticks at one moment before the replay moves on (a loop that keeps changing)
DEFAULT_GPUS, CORES_PER_GPU, MEMORY_PER_GPU = 8, 16, 128 * 1024**3
NUDGE = 1e-3  # seconds: the step past a moment that rounding put at now
COMMAND = ("replay",)  # never run: the virtual executor only times it
CALLER = "root"  # who submits every run of a replay (an admin)


@dataclass(frozen=True, slots=True)
class SimMachine:
    """The machine replayed on: its GPUs (each ``gpu_memory`` bytes), cores and memory."""

    gpus: int
    gpu_memory: int
    cpus: int
    memory: int

    def planner_machine(self, grace: float) -> Machine:
        return Machine(
            tuple(range(self.gpus)),
            self.cpus * 1000,
            self.memory,
            grace,
            gpu_memory=(self.gpu_memory,) * self.gpus,
        )


@dataclass(frozen=True, slots=True)
class SimDrain:
    """The machine (``gpus`` None) or those GPUs drained from ``start`` to ``end``
    (seconds from the trace's start), as an admin's ``astra admin drain`` and resume."""

    start: float
    end: float
    gpus: tuple[int, ...] | None = None

    @classmethod
    def parse(cls, text: str, parse_seconds: Callable[[str], float]) -> SimDrain:
        """``10d+12h`` (the machine from day 10 for 12 hours) or ``10d+12h:0,1`` (GPUs 0
        and 1); ValueError in one line."""
        bad = f"--drain {text[:40]!r}: expected START+LENGTH[:GPUS], e.g. 10d+12h:0,1"
        when, _, gpus = text.partition(":")
        start, plus, length = when.partition("+")
        try:
            first, span = parse_seconds(start), parse_seconds(length)
            chosen = tuple(int(g) for g in gpus.split(",")) if gpus else None
        except ValueError:
            raise ValueError(bad) from None
        if not plus or span <= 0:
            raise ValueError(bad)
        return cls(first, first + span, chosen)


@dataclass(frozen=True, slots=True)
class Replayed:
    """What a replay measured: every run's outcome, and when the replay stopped."""

    policy: str
    outcomes: tuple[Outcome, ...]
    ended_at: float  # seconds from the trace's start
    plans: int
    refused: dict[str, str]  # run name -> why the service refused it
    attempts: tuple[Attempt, ...] = ()  # every worker's every attempt, in start order
    calibration: Calibration | None = None  # the learned forecasts against the real starts


class Replay:
    """One policy over one trace: ``run()`` replays it to the end."""

    def __init__(
        self,
        trace: Sequence[TraceRun],
        config: Config,
        machine: SimMachine,
        *,
        policy: str = "astraeus",
        resume: bool = True,
        estimate_every: float | None = None,
        drains: Sequence[SimDrain] = (),
        folder: Path | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        if policy not in POLICY_NAMES:
            raise ValueError(f"no policy {policy!r}: one of {', '.join(POLICY_NAMES)}")
        self.trace = sorted(trace, key=lambda r: (r.submit, r.name))
        self.config = config
        self.machine = machine
        self.policy = policy
        self.estimate_every = estimate_every  # seconds of trace time; None: no estimates
        self._folder = folder
        self._progress = progress  # called after each submit: (runs submitted, waiting then)
        self.drains = sorted(drains, key=lambda d: d.start)
        for d in self.drains:
            missing = sorted(set(d.gpus or ()) - set(range(machine.gpus)))
            if missing:
                raise ValueError(f"--drain: no GPU {missing[0]} on a machine of {machine.gpus}")
        self.clock = VirtualClock()
        self.executor = VirtualExecutor(
            self.clock,
            {r.name: r.duration for r in self.trace},
            {r.name: r.gpu_memory / machine.gpu_memory for r in self.trace if r.gpu_memory},
            resume,
        )
        # run -> every "starts by" it was shown: (shown at, starts by, it was the head)
        self.shown: dict[str, list[tuple[float, float, bool]]] = {}
        # run -> its forecasts: (made at, likely start, 90 % start, the bound or None)
        self.forecasts: dict[str, list[tuple[float, float, float, float | None]]] = {}
        self.plans = 0

    def run(self) -> Replayed:
        """Replay every run of the trace; the store lives in a folder removed afterwards."""
        base = self._folder or (Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None)
        with tempfile.TemporaryDirectory(prefix="astra-sim-", dir=base) as home:
            return self._run(Path(home))

    def _run(self, home: Path) -> Replayed:
        grace = self.config.machine.stop_grace_seconds
        (home / "logs").mkdir()
        store = Store(home / "state.db")
        try:
            settings = LoopSettings(
                machine=self.machine.planner_machine(grace),
                workspaces=self.config.workspaces,
                drives={},
                logs_dir=home / "logs",
                instance="replay",
                authorise=lambda user, workspace: start_refusal(self.config, user, workspace),
                restart_backoff=Backoff(
                    self.config.machine.restart_backoff, self.config.machine.restart_backoff_max
                ),
            )
            planner = plan if self.policy == "astraeus" else POLICIES[self.policy]
            loop = Loop(store, self.executor, settings, self.clock, planner=self._counted(planner))
            service = Service(store, self.config, loop.poke, "process", settings=loop.settings)
            refused = self._drive(loop, service)
            outcomes = self._outcomes(store)
            return Replayed(self.policy, outcomes, self.clock.at, self.plans, refused,
                            tuple(self.executor.history), self.calibration(outcomes))  # fmt: skip
        finally:
            store.close()

    def _counted(self, planner: Callable[[Snapshot, float], Plan]) -> Callable[..., Plan]:
        def counted(snapshot: Snapshot, now: float) -> Plan:
            self.plans += 1
            return planner(snapshot, now)

        return counted

    def _drive(self, loop: Loop, service: Service) -> dict[str, str]:
        caller = Caller(0, 0, CALLER, True, frozenset(self.config.workspaces))
        refused: dict[str, str] = {}
        pending, i = self.trace, 0
        next_estimate = 0.0
        # (when, drain or resume, the drain): each drain's two moments, in time order
        drains = sorted(
            [(d.start, True, d) for d in self.drains] + [(d.end, False, d) for d in self.drains],
            key=lambda x: (x[0], x[1]),
        )
        gpus = self.machine.planner_machine(0).gpus
        while True:
            while drains and drains[0][0] <= self.clock.at:
                _, starts, d = drains.pop(0)
                if starts:
                    drain(service.store, caller, "replayed drain", _listed(d.gpus), gpus)
                else:
                    resume(service.store, caller, _listed(d.gpus), gpus)
                loop.poke()
            while i < len(pending) and pending[i].submit <= self.clock.at:
                run = pending[i]
                i += 1
                try:
                    service.submit(document(run), caller, now=self.clock.wall())
                except ServiceError as e:
                    refused[run.name] = e.message
                if self._progress is not None:
                    last = loop.status.plan
                    self._progress(i, 0 if last is None else len(last.order))
            for _ in range(SAME_MOMENT):
                if not loop.step():
                    break
            if self.estimate_every is not None and self.clock.at >= next_estimate:
                next_estimate = self.clock.at + self.estimate_every
                self._estimate(loop)
            due = loop.next_due()
            moments = [] if due is None else [self.clock.at + due]
            ends = self.executor.next_end()
            moments += [] if ends is None else [ends]
            if i < len(pending):
                moments.append(pending[i].submit)
            if drains:
                moments.append(drains[0][0])
            if not moments:
                return refused
            at = min(moments)
            # a moment rounded to now (it was handled, or is a hair away): move on a little
            self.clock.move_to(at if at > self.clock.at else self.clock.at + NUDGE)

    def _estimate(self, loop: Loop) -> None:
        """Every waiting run's "starts by" as the daemon would show it now, and its likely
        and 90 % starts forecast from the lengths learned so far, kept to check against
        when it really starts."""
        snapshot = snapshot_now(loop.store, loop.settings, loop.specs, self.clock.now())
        now = self.clock()
        bounds = estimate_starts(snapshot, now, MAX_STEPS)
        plan = loop.status.plan
        head = None if plan is None or plan.head is None else plan.head.run
        for name, estimate in bounds.items():
            if estimate.starts_by is not None:
                shown = (self.clock.at, estimate.starts_by - EPOCH, name == head)
                self.shown.setdefault(name, []).append(shown)
        made = loop.forecaster.estimates(snapshot, now, bounds, lambda _: CALLER, MAX_STEPS)
        for name, e in made.items():
            if e.likely is None or e.likely_by is None:
                continue  # no history yet, or work of unknown length in the way
            was = None if e.starts_by is None else e.starts_by - EPOCH
            self.forecasts.setdefault(name, []).append(
                (self.clock.at, e.likely - EPOCH, e.likely_by - EPOCH, was)
            )

    def calibration(self, outcomes: Sequence[Outcome]) -> Calibration | None:
        """The forecasts made against the real starts (None: none were made)."""
        if self.estimate_every is None:
            return None
        return calibration(self.forecasts, outcomes)

    def _outcomes(self, store: Store) -> tuple[Outcome, ...]:
        out = []
        overtaking = _Overtaking([(a.run, a.start) for a in self.executor.history], self.trace)
        for trace_run in self.trace:
            row = store.runs.get(trace_run.name)
            if row is None:
                continue
            workers = store.workers.of(row.name)
            share = self.executor.shares.get(row.name)
            per_gpu = share if share is not None else 1.0
            held = lost = 0.0
            starts: list[float] = []
            for w in workers:
                starts.append(w.started_at - EPOCH)
                end = self.clock.wall() if w.finished_at is None else w.finished_at
                seconds = max(0.0, end - w.started_at) * len(w.gpus) * per_gpu
                held += seconds
                if w.stop_reason == StopReason.PREEMPT and not self.executor.resume:
                    lost += seconds
            start = min(starts, default=None)
            attempts = sorted({w.attempt: w.started_at - EPOCH for w in workers}.values())
            finished = row.state.finished and row.finished_at is not None
            shown = self.shown.get(row.name, [])
            missed = []  # (shown at, it was the head) of the estimates its next start missed
            for at, by, was_head in shown:
                began = _next_start(attempts, at)
                if began is not None and began > by + 1e-6 and not overtaking.before(at, began):
                    missed.append(was_head)
            late = sum(1 for at, by, _ in shown if (b := _next_start(attempts, at)) is not None
                       and b > by + 1e-6)  # fmt: skip
            overtaken = late - len(missed)
            out.append(
                Outcome(
                    row.name, trace_run.submit, start,
                    (row.finished_at - EPOCH) if finished and row.finished_at else None,
                    str(row.state), row.preemptions, row.restarts, row.priority, row.workspace,
                    trace_run.workers * (per_gpu * trace_run.gpus), trace_run.duration,
                    held, lost, len(shown), len(missed), overtaken, tuple(attempts),
                    sum(1 for *_, was_head in shown if was_head), sum(missed),
                )
            )  # fmt: skip
        return tuple(out)


class _Overtaking:
    """Did a run submitted after a moment start before another time? (A start estimate
    made at that moment did not know of it.)"""

    def __init__(self, starts: Sequence[tuple[str, float]], trace: Sequence[TraceRun]) -> None:
        first: dict[str, float] = {}
        for run, at in starts:
            first[run] = min(at, first.get(run, at))
        ordered = sorted(trace, key=lambda r: r.submit)
        self.submits = [r.submit for r in ordered]
        # the earliest first start among the runs submitted from each index on
        self.earliest = [math.inf] * (len(ordered) + 1)
        for i in range(len(ordered) - 1, -1, -1):
            self.earliest[i] = min(self.earliest[i + 1], first.get(ordered[i].name, math.inf))

    def before(self, moment: float, start: float) -> bool:
        return self.earliest[bisect.bisect_right(self.submits, moment)] < start


def calibration(
    forecasts: Mapping[str, Sequence[tuple[float, float, float, float | None]]],
    outcomes: Sequence[Outcome],
) -> Calibration:
    """``forecasts`` (by run: made at, likely start, 90 % start, the limits' bound or None)
    against the start that followed each: a run preempted and waiting again is checked
    against its next start, not the first it had before the forecast."""
    attempts = {o.name: list(o.starts) for o in outcomes}
    priority = {o.name: o.priority for o in outcomes}
    likely_errors: list[float] = []
    bound_errors: list[float] = []
    kept = 0
    by_run: list[tuple[int, int]] = []  # each run's forecasts kept, and checked
    by_priority: dict[int, list[int]] = {}  # priority -> [kept, checked]
    for name, made in forecasts.items():
        checked_before, kept_before = len(likely_errors), kept
        for at, first, last, bound in made:
            start = _next_start(attempts.get(name, []), at)
            if start is None:
                continue
            likely_errors.append(abs(start - first))
            kept += start <= last + 1e-6
            if bound is not None:
                bound_errors.append(abs(start - bound))
        if len(likely_errors) > checked_before:
            run = (kept - kept_before, len(likely_errors) - checked_before)
            by_run.append(run)
            counts = by_priority.setdefault(priority.get(name, 0), [0, 0])
            counts[0], counts[1] = counts[0] + run[0], counts[1] + run[1]
    return Calibration(
        len(likely_errors), kept, _median(likely_errors), len(bound_errors),
        _median(bound_errors), kept_interval(by_run),
        tuple((p, k, n) for p, (k, n) in sorted(by_priority.items(), reverse=True)),
    )  # fmt: skip


def kept_interval(by_run: Sequence[tuple[int, int]], draws: int = 1000) -> tuple[float, float]:
    """The 95 % interval of the share of forecasts kept, from ``by_run`` (each run's
    forecasts kept, and checked) drawn again ``draws`` times, a run with all its forecasts
    (a run's forecasts hour after hour are not independent draws). Seeded: a replay says
    the same interval each time."""
    if not by_run:
        return (0.0, 0.0)
    rng, shares = random.Random(0), []
    for _ in range(draws):
        drawn = rng.choices(by_run, k=len(by_run))
        shares.append(sum(k for k, _ in drawn) / sum(n for _, n in drawn))
    shares.sort()
    return (shares[int(0.025 * draws)], shares[math.ceil(0.975 * draws) - 1])


def _next_start(starts: list[float], at: float) -> float | None:
    """The first start at or after ``at`` (what an estimate made then was of)."""
    i = bisect.bisect_left(starts, at)
    return starts[i] if i < len(starts) else None


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _listed(gpus: tuple[int, ...] | None) -> list[int] | None:
    return None if gpus is None else list(gpus)


def document(run: TraceRun) -> dict[str, object]:
    """The spec document a member would submit for the trace's run."""
    limit = None if run.time_limit is None else max(1, math.ceil(run.time_limit))
    return run_document(
        run.name,
        COMMAND,
        image="local",
        gpus=run.gpus,
        cpus=run.cpus,
        memory=str(run.memory) if run.memory else None,
        time_limit_seconds=limit,
        priority=run.priority,
        workspace=run.workspace,
        workers=run.workers if run.workers != 1 else None,
        gpu_memory=str(run.gpu_memory) if run.gpu_memory else None,
    )


def sim_config(config: Config) -> Config:
    """The daemon's config as a replay uses it: no bound on what one user has queued or
    keeps, nothing forgotten, no disk reserve (a replay's store is its own), and every
    priority allowed (a trace's priorities are what its people were allowed)."""
    machine = dataclasses.replace(
        config.machine,
        executor="process",
        finished_retention=None,
        max_submit_per_user=1 << 30,
        max_kept_per_user=1 << 30,
        max_kept_bytes_per_user=1 << 50,
        state_reserve=0,
    )
    workspaces = {
        name: dataclasses.replace(ws, max_priority=MAX_PRIORITY)
        for name, ws in config.workspaces.items()
    }
    return dataclasses.replace(config, machine=machine, workspaces=workspaces)


def load_sim_config(path: Path | None) -> Config:
    """The config a replay plans under: ``path``, else the daemon's (``$ASTRAEUS_CONFIG``
    or the home's), else the defaults; raises ConfigError."""
    if path is None:
        found = config_path(default_home())
        path = found if found.is_file() else None
    config = parse_config("") if path is None else load_config(path)
    return sim_config(config)


def sim_machine(
    config: Config,
    gpus: int | None = None,
    gpu_memory: int | None = None,
    cpus: int | None = None,
    memory: int | None = None,
) -> SimMachine:
    """The machine replayed on: what is given, else the config's, else 8 × 80 GiB GPUs
    with 16 cores and 128 GiB of memory per GPU (a trace's runs ask for both)."""
    count = gpus if gpus is not None else config.machine.gpus
    count = DEFAULT_GPUS if count is None else count
    if count < 1:
        raise ValueError("--gpus: a replay needs at least one GPU")
    cores = cpus or config.machine.cpu_cores or CORES_PER_GPU * count
    room = memory or config.machine.memory or MEMORY_PER_GPU * count
    return SimMachine(count, gpu_memory or SIMULATED_GPU_MEMORY, cores, room)
