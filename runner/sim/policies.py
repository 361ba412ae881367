"""Baseline schedulers for ``astra sim``, run through the engine in the planner's place.

Each is a pure function of the planner's snapshot and the time that returns the
planner's :class:`Plan`: ``fifo`` (submission order, no backfill: task-spooler, pueue),
``greedy`` (priority order, whatever fits starts: gflow) and ``easy`` (priority order,
EASY backfill behind one head: Slurm's sched/backfill with priority/basic). None of them
preempts or reads workspace quotas and fair share.

Placement is the planner's own: CPU, memory and worker slots come from the room every
running unit leaves (stopping units too), GPUs are placed through a ``GpuPool`` holding
every running unit, whole or shared, one tuple of GPU indices per worker. A run larger
than the machine waits with the planner's ``TOO_LARGE`` reason and blocks nobody. As in
the planner's plan, ``order`` lists every waiting run in the policy's order, the started
ones too, and every waiting run that does not start has a reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType

from runner.durations import utc_minute
from runner.model import (
    RESOURCE_NAMES,
    Resources,
    amounts,
    format_amount,
    format_size,
    machine_amounts,
)
from runner.planner.messages import too_large, too_large_shared
from runner.planner.pool import (
    GpuPool,
    Hold,
    Placement,
    replay_pool,
    start_hold,
    unit_hold,
    without_gpus,
)
from runner.planner.shadow import take_gpus, unit_end
from runner.planner.types import FITS, Head, Plan, Snapshot, Start, WaitingRun
from runner.reasons import Reason, ReasonCode, RunRef

__all__ = ["POLICIES", "Policy", "easy", "fifo", "greedy"]

Policy = Callable[[Snapshot, float], Plan]
_End = tuple[float, Resources, Hold]  # when a holder ends at the latest, what it holds
_Key = Callable[[WaitingRun], tuple[float | str, ...]]  # a policy's order
_BACKFILL = ReasonCode.BACKFILLED


def _by_submission(run: WaitingRun) -> tuple[float, str]:
    return (run.submitted_at, run.name)


def _by_priority(run: WaitingRun) -> tuple[int, float, str]:
    return (-run.priority, run.submitted_at, run.name)


class _Room:
    """The machine's room as a policy hands it out: CPU, memory and worker slots left by
    running work (stopping work too), the GPUs in a pool, and when each holder ends."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        machine = snapshot.machine
        self.now, self.grace = now, machine.stop_grace
        self.capacity = machine.capacity()
        self.free = self.capacity
        self.pool = GpuPool(machine.sizes())
        self.ends: list[_End] = []
        for unit in snapshot.running:
            hold = unit_hold(unit)
            self.free = self.free - unit.resources
            self.pool.take(hold)
            self.ends.append((unit_end(unit, self.grace), unit.resources, hold))

    def never_fits(self, run: WaitingRun) -> Reason | None:
        """Why ``run`` could not start even on the empty machine; None when it could."""
        found = too_large(run.total, self.capacity)
        if found is None and run.gpu_share and GpuPool(self.pool.size).place(run) is None:
            found = too_large_shared(run, self.pool.size)
        return found

    def fits(self, run: WaitingRun) -> bool:
        return without_gpus(run.total).fits_in(self.free) and self.pool.fits(run)

    def end_of(self, run: WaitingRun) -> float:
        """When ``run``, started now, ends at the latest: its time limit plus the grace."""
        return math.inf if run.time_limit is None else self.now + run.time_limit + self.grace

    def take(self, run: WaitingRun) -> Placement:
        placed = self.pool.place(run)
        assert placed is not None, "a start the pool cannot place"
        self.free = self.free - run.total
        self.ends.append((self.end_of(run), run.total, start_hold(run, placed)))
        return placed

    def shadow(self, head: WaitingRun) -> float | None:
        """When ``head`` starts at the latest as running and started work ends; None when
        that waits on work without a time limit."""
        return replay_pool(self.pool, self.free, head, self.ends, self.now)

    def keeps_shadow(self, run: WaitingRun, head: WaitingRun, shadow: float) -> bool:
        """Started now, ``run`` leaves ``head``'s shadow where it is: at the shadow time it
        holds only room the head does not need, GPU by GPU."""
        trial = self.pool.copy()
        placed = trial.place(run)
        if placed is None:
            return False
        ends = [*self.ends, (self.end_of(run), run.total, start_hold(run, placed))]
        after = replay_pool(trial, self.free - run.total, head, ends, self.now)
        return after is not None and after <= shadow

    def spare_now(self, run: WaitingRun, head: WaitingRun) -> bool:
        """``run`` takes only room free now beyond what ``head`` needs, per resource; any
        GPU it asks leaves the head's GPUs placeable beside it."""
        spare = self.free - without_gpus(head.total)
        if not without_gpus(run.total).fits_in(Resources(*(max(0, x) for x in amounts(spare)))):
            return False
        if not (run.worker.gpus or run.gpu_share):
            return True
        trial = self.pool.copy()
        return trial.place(run) is not None and trial.fits(head)

    def short_of(self, run: WaitingRun) -> str:
        """What ``run`` asks for that is not free now."""
        free = (len(self.pool.empty()), *machine_amounts(self.free)[1:])
        for name, asked, left in zip(RESOURCE_NAMES, machine_amounts(run.total), free, strict=True):
            if asked > left:
                a, f = format_amount(name, asked), format_amount(name, max(0, left))
                return f"asks for {name} {a}, {f} free"
        if run.gpu_share:
            return (
                f"asks for {format_size(run.gpu_share)} on each of {run.gpu_count} GPU(s) "
                f"per worker, the most free on one GPU is {format_size(self.pool.most_free())}"
            )
        return "its GPUs cannot be placed on the free ones"


class _Walk:
    """One policy's pass over the waiting runs in its order: the starts, the head (the
    first run that has to wait, for fifo and easy) and every other run's reason."""

    def __init__(self, snapshot: Snapshot, now: float, key: _Key) -> None:
        self.room = _Room(snapshot, now)
        self.runs = sorted(snapshot.waiting, key=key)
        self.starts: list[Start] = []
        self.reasons: dict[str, Reason] = {}
        self.head: Head | None = None
        self.head_run: WaitingRun | None = None
        self.behind_head = Reason("", code=ReasonCode.MESSAGE)

    def placeable(self) -> Iterator[WaitingRun]:
        """Each run in order that could start on this machine; the others wait, too large."""
        for run in self.runs:
            found = self.room.never_fits(run)
            if found is None:
                yield run
            else:
                self.reasons[run.name] = found

    def start(self, run: WaitingRun, why: Reason, *, backfill: bool = False) -> None:
        placed = self.room.take(run)
        self.starts.append(Start(run.name, run.workers, placed, backfill, why, run.gpu_share))

    def wait_for_room(self, run: WaitingRun) -> None:
        text = f"Waiting for room: {self.room.short_of(run)}"
        self.reasons[run.name] = Reason(text, code=ReasonCode.HEAD_WAITS)

    def crown(self, run: WaitingRun) -> None:
        """``run`` is the head: it waits for its shadow time; the runs after it wait behind it."""
        shadow = self.room.shadow(run)
        self.head = Head(run.name, run.workspace, run.priority, shadow, run.ask())
        self.head_run = run
        if shadow is None:
            when, by = "starts as running work without a time limit ends", ""
        else:
            when = f"starts by {utc_minute(shadow)} as running work ends"
            by = f", which starts by {utc_minute(shadow)}"
        text = f"Waiting for room: next to run, {self.room.short_of(run)}; {when}"
        self.reasons[run.name] = Reason(text, code=ReasonCode.HEAD_WAITS)
        self.behind_head = Reason.of(
            "Waiting for room: queued behind {0}" + by,
            RunRef(run.name, run.workspace),
            code=ReasonCode.QUEUED_BEHIND,
        )

    def behind(self, run: WaitingRun) -> None:
        self.reasons[run.name] = self.behind_head

    def backfill(self, run: WaitingRun) -> Reason | None:
        """Why ``run``, which fits now, may start behind the head without delaying it (EASY):
        it ends by the head's shadow time, or takes only room the head does not need
        then (now, when the shadow is unknown). None: it would delay the head."""
        head, head_run = self.head, self.head_run
        assert head is not None and head_run is not None
        ref = RunRef(head.run, head.workspace)
        if head.shadow is None:
            fits = self.room.spare_now(run, head_run)
        elif self.room.end_of(run) <= head.shadow:
            by = utc_minute(head.shadow)
            text = f"its time limit ends it before {{0}} starts (by {by})"
            return Reason.of(text, ref, code=_BACKFILL)
        else:
            fits = self.room.keeps_shadow(run, head_run, head.shadow)
        return Reason.of("it fits in room {0} does not need", ref, code=_BACKFILL) if fits else None

    def plan(self) -> Plan:
        head = self.head
        if head is not None:  # the free whole GPUs the head will take, as the planner shows
            empty = self.room.pool.empty()
            head = replace(head, held_gpus=take_gpus(empty, min(head.need.gpus, len(empty))))
        return Plan(
            starts=tuple(self.starts),
            preemptions=(),
            head=head,
            reasons=self.reasons,
            quota_waits=frozenset(),
            order=tuple(run.name for run in self.runs),
        )


def fifo(snapshot: Snapshot, now: float) -> Plan:
    """First in, first out, as task-spooler and pueue run their queues: runs start in
    submission order while the next one fits; the first that does not is the head and
    every run after it waits (no backfill). Leaves out priority, quotas, fair share and
    preemption."""
    walk = _Walk(snapshot, now, _by_submission)
    for run in walk.placeable():
        if walk.head is not None:
            walk.behind(run)
        elif walk.room.fits(run):
            walk.start(run, FITS)
        else:
            walk.crown(run)
    return walk.plan()


def greedy(snapshot: Snapshot, now: float) -> Plan:
    """Priority order, whatever fits starts, as gflow does: a run that does not fit is
    passed over, and runs after it start if they fit (marked backfill). Leaves out any
    head protection (a large run can wait for ever), quotas, fair share and preemption."""
    walk = _Walk(snapshot, now, _by_priority)
    passed: RunRef | None = None  # the first run passed over
    for run in walk.placeable():
        if not walk.room.fits(run):
            walk.wait_for_room(run)
            passed = passed or RunRef(run.name, run.workspace)
        elif passed is None:
            walk.start(run, FITS)
        else:
            why = Reason.of("it fits now, passing {0}, which does not", passed, code=_BACKFILL)
            walk.start(run, why, backfill=True)
    return walk.plan()


def easy(snapshot: Snapshot, now: float) -> Plan:
    """EASY backfill, as Slurm's sched/backfill with priority/basic: runs start in priority
    order while they fit; the first that does not is the one head, its shadow time found
    from running and started work's time limits (plus the stop grace). A later run starts
    now only if it fits now and either ends by the shadow time or fits in the room the head
    does not need then; a run without a time limit only in that room. Leaves out
    preemption, quotas, fair share and reservations beyond the one head."""
    walk = _Walk(snapshot, now, _by_priority)
    for run in walk.placeable():
        fits = walk.room.fits(run)
        if walk.head is None:
            if fits:
                walk.start(run, FITS)
            else:
                walk.crown(run)
            continue
        why = walk.backfill(run) if fits else None
        if why is None:
            walk.behind(run)
        else:
            walk.start(run, why, backfill=True)
    return walk.plan()


POLICIES: Mapping[str, Policy] = MappingProxyType({"fifo": fifo, "greedy": greedy, "easy": easy})
