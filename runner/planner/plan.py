"""The planner: one pure function from a snapshot of the machine to a plan.

``plan(snapshot, now)`` reads nothing but its arguments and changes nothing.
The loop applies what it returns.

Invariants
----------
1. Nothing is given twice: every GPU index, core, byte and worker slot handed
   to a started run was free in the snapshot and is handed out once.
2. The head is protected: nothing started behind it moves its shadow time
   (the latest time it will start) later.
3. Only work of strictly lower priority than the head is ever a victim, and
   the victim set is minimal: drop any victim and the head no longer fits.
4. A run over its workspace's quota waits, blocks nobody, and is never the
   head. When it is over quota only because of its own workspace's
   lower-priority running work, it preempts that work (invariant 3's rules,
   judged against it, not the head; victims of its own workspace only). The
   room it waits for is held, and units stopped for it are no room for the
   head. Behind a head it takes, beyond its victims' room, only free room the
   head does not need, and only if replaying the head's shadow with its
   victims' ends replaced by its own end does not make the shadow later.
5. The same snapshot and ``now`` always give the same plan.

The walk
--------
Waiting runs are taken in order: priority (higher first), then their
workspace's dominant share divided by its weight (smaller first; the share
grows as the walk starts runs), then submission time. Each run either starts
now, or waits with a reason. The first run that cannot start now, but could on
this machine, is the head. The shadow time is found by replaying running work
ending at start + time limit + stop grace, earliest first, until the head fits.
Behind the head a run may start (backfill) only if it fits in free room and
either its own time limit ends it by the shadow time, or it fits in the room
the head does not need then, per resource.

Worked example
--------------
8 GPUs, stop grace 30 s, now 12:00. Running: ``a`` (6 GPUs, ends 13:00 plus
grace). Waiting, in order: ``big`` (8 GPUs), ``short`` (2 GPUs, 30 min limit),
``long`` (2 GPUs, no limit).

- ``big`` cannot start (2 free): it is the head. Replay: when ``a`` ends at
  13:00:30, 8 are free and ``big`` fits. Shadow 13:00:30 -> "starts by 13:01
  UTC". At the shadow time the head needs all 8; room it does not need: 0.
- ``short`` ends at 12:30:30, before the shadow time: it starts on the 2 free
  GPUs (backfill).
- ``long`` has no limit and there is no room the head does not need: "Queued
  behind big, which starts by … 13:01 UTC".
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from operator import attrgetter

from runner.model import (
    ADMIN,
    RESOURCE_NAMES,
    Quota,
    Reason,
    Resources,
    RunRef,
    Viewer,
    Workspace,
    amounts,
    format_amount,
)

NO_WORKER_LIMIT = 1 << 40
PREEMPTED_WAITING = "Preempted by higher-priority work ({0}); waiting to run again."
_FITS = Reason("first in the order that fits now")

# ---------------------------------------------------------------- snapshot


@dataclass(frozen=True, slots=True)
class Machine:
    gpus: tuple[int, ...]
    cpu_milli: int
    memory: int
    stop_grace: float = 30.0
    max_workers: int = NO_WORKER_LIMIT

    def capacity(self) -> Resources:
        return Resources(len(self.gpus), self.cpu_milli, self.memory, self.max_workers)


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
    why: Reason = field(default_factory=lambda: _FITS)  # the rule, for the decision log


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
    # each quota wait's own check (``Waits for namespace quota: …``), without the
    # preemption prefix its reason may carry: it names no run, so any viewer may read it
    quota_checks: Mapping[str, str] = field(default_factory=dict)

    @cached_property
    def positions(self) -> dict[str, int]:
        """Each waiting run's place in the order, from 1."""
        return {name: i + 1 for i, name in enumerate(self.order)}

    def reason(self, run: str, viewer: Viewer = ADMIN) -> str | None:
        found = self.reasons.get(run)
        return None if found is None else found.render(viewer)


# ------------------------------------------------------------- messages


def format_utc(t: float) -> str:
    """The shadow time as users read it: rounded up to the minute, UTC."""
    minute = math.ceil(t / 60) * 60
    return datetime.fromtimestamp(minute, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _preempting_message(victims: list[RunningUnit], stopping_workers: int) -> Reason | None:
    if victims:
        runs: dict[str, RunRef] = {}
        for unit in victims:
            runs.setdefault(unit.run, RunRef(unit.run, unit.workspace))
        count = sum(unit.workers for unit in victims)
        text = f"Preempting {count} lower-priority worker(s) of {{0}} to start"
        return Reason.of(text, tuple(runs.values()))
    if stopping_workers:
        return Reason(f"Starting: waiting for {stopping_workers} preempted worker(s) to stop")
    return None


def _head_message(head: Head, victims: list[RunningUnit], stopping_workers: int) -> Reason:
    preempting = _preempting_message(victims, stopping_workers)
    if preempting is not None:
        return preempting
    if head.shadow is None:
        return Reason(f"Next to run (priority {head.priority}): waits for running work to end")
    return Reason(
        f"Next to run (priority {head.priority}): starts by "
        f"{format_utc(head.shadow)} as running work ends."
    )


def _behind_message(head: Head) -> Reason:
    ref = RunRef(head.run, head.workspace)
    if head.shadow is None:
        return Reason.of("Queued behind {0}, which waits for running work to end", ref)
    return Reason.of("Queued behind {0}, which starts by " + format_utc(head.shadow), ref)


# ------------------------------------------------------------ fair share


def dominant_share(used: Resources, quota: Quota | None) -> float:
    if quota is None:
        return 0.0
    share = 0.0
    for amount, limit in zip(amounts(used), quota.limits(), strict=True):
        if limit is None:
            continue
        if limit == 0:
            share = max(share, math.inf if amount > 0 else 0.0)
        else:
            share = max(share, amount / limit)
    return share


def _quota_reason(used: Resources, ask: Resources, quota: Quota | None) -> str | None:
    """The quota message for ``ask`` on top of ``used``, or None when it fits."""
    if quota is None:
        return None
    if (used + ask).fits_in(_as_room(quota)):
        return None
    for name, asked, limit in zip(RESOURCE_NAMES, amounts(ask), quota.limits(), strict=True):
        if limit is not None and asked > limit:
            a, lim = format_amount(name, asked), format_amount(name, limit)
            return (
                "Waits for more than the namespace's quota allows at all "
                f"({name} {a} > {lim}): raise the quota or ask for less."
            )
    rows = zip(RESOURCE_NAMES, amounts(used), amounts(ask), quota.limits(), strict=True)
    for name, in_use, asked, limit in rows:
        if limit is not None and in_use + asked > limit:
            u, a = format_amount(name, in_use), format_amount(name, asked)
            return (
                f"Waits for namespace quota: {name} {u} in use + {a} asked > "
                f"{format_amount(name, limit)}"
            )
    return None


def _as_room(quota: Quota) -> Resources:
    """The quota as an amount of room; an unset limit is unlimited."""
    big = NO_WORKER_LIMIT << 20
    return Resources(*(big if limit is None else limit for limit in quota.limits()))


def _too_large(ask: Resources, capacity: Resources) -> str | None:
    rows = zip(RESOURCE_NAMES, amounts(ask), amounts(capacity), strict=True)
    for name, asked, total in rows:
        if asked > total:
            a, t = format_amount(name, asked), format_amount(name, total)
            return (
                f"Cannot run on this machine: asks for {name} {a}, the machine has {t} "
                "in all. Ask for less."
            )
    return None


class _Order:
    """Yields waiting runs in planner order; the share updates as runs start.

    One FIFO per (priority, workspace); within a priority the workspaces are
    merged by a heap on (share / weight, submission time, name). Workspaces
    without a quota always have share 0: their runs form one FIFO together.
    """

    def __init__(
        self, waiting: Iterable[WaitingRun], shares: dict[str, float], fixed: set[str]
    ) -> None:
        by_level: dict[int, dict[str, list[WaitingRun]]] = {}
        for run in waiting:
            key = "" if run.workspace in fixed else run.workspace
            by_level.setdefault(run.priority, {}).setdefault(key, []).append(run)
        self._levels = sorted(by_level.items(), key=lambda item: -item[0])
        shares[""] = 0.0  # the pooled FIFO (no workspace is named "")
        self._shares = shares  # the walk's own dict: it changes as runs start

    def __iter__(self) -> Iterator[WaitingRun]:
        by_name, by_time = attrgetter("name"), attrgetter("submitted_at")
        for _priority, queues in self._levels:
            fifo: dict[str, list[WaitingRun]] = {}
            for key, runs in queues.items():
                runs.sort(key=by_name)  # two stable sorts: by time, then name
                runs.sort(key=by_time)
                fifo[key] = runs
            if len(fifo) == 1:  # one FIFO: nothing to merge
                yield from next(iter(fifo.values()))
                continue
            yield from self._merge(fifo)

    def _merge(self, fifo: dict[str, list[WaitingRun]]) -> Iterator[WaitingRun]:
        shares = self._shares
        heap = [
            (shares[key], runs[0].submitted_at, runs[0].name, key, 0) for key, runs in fifo.items()
        ]
        heapq.heapify(heap)
        replace = heapq.heapreplace
        while heap:
            _share, _t, _name, key, i = heap[0]
            runs = fifo[key]
            yield runs[i]
            i += 1
            if i < len(runs):
                nxt = runs[i]
                replace(heap, (shares[key], nxt.submitted_at, nxt.name, key, i))
            else:
                heapq.heappop(heap)


# ---------------------------------------------------------- GPU indices


def take_gpus(free: list[int], n: int) -> tuple[int, ...]:
    """Take ``n`` indices from the sorted ``free`` list (removed in place).

    Best fit: the smallest block of consecutive free GPUs that holds ``n``,
    so large runs later find whole blocks; when no block is big enough, the
    largest blocks first (fewest gaps).
    """
    if n == 0:
        return ()
    blocks: list[list[int]] = []
    for index in free:
        if blocks and blocks[-1][-1] + 1 == index:
            blocks[-1].append(index)
        else:
            blocks.append([index])
    fitting = [b for b in blocks if len(b) >= n]
    if fitting:
        chosen = min(fitting, key=lambda b: (len(b), b[0]))[:n]
    else:
        chosen = []
        for block in sorted(blocks, key=lambda b: (-len(b), b[0])):
            chosen.extend(block[: n - len(chosen)])
            if len(chosen) == n:
                break
    taken = set(chosen)
    free[:] = [i for i in free if i not in taken]
    return tuple(sorted(chosen))


# ----------------------------------------------------------- the head


def unit_end(unit: RunningUnit, grace: float) -> float:
    """When running work ends at the latest: its stop deadline, or limit plus grace."""
    if unit.stop_deadline is not None:
        return unit.stop_deadline
    if unit.time_limit is None:
        return math.inf
    return unit.started_at + unit.time_limit + grace


def _shadow(
    free: Resources, need: Resources, ends: list[tuple[float, Resources]], now: float
) -> tuple[float | None, Resources]:
    """Replay work ending, earliest first, until ``need`` fits.

    Returns the shadow time (None when it depends on work without a time
    limit) and the room the head does not need, per resource.
    """
    room = free
    shadow: float | None = None
    for end, freed in sorted(ends, key=lambda e: e[0]):
        if shadow is not None and end > shadow:
            break
        if math.isinf(end):
            break
        room = room + freed
        if shadow is None and need.fits_in(room):
            shadow = max(end, now)
    if shadow is None:
        room = free
    spare = room - need
    return shadow, Resources(*(max(0, x) for x in amounts(spare)))


def _choose_victims(
    head: WaitingRun, room: Resources, candidates: list[RunningUnit]
) -> list[RunningUnit] | None:
    """The fewest lower-priority units whose stop lets ``head`` fit in ``room``.

    Lowest priority first, among equals the most recently started; then drop
    every victim not needed. None when even all of them would not do.
    """
    need = head.ask()
    order = sorted(candidates, key=lambda u: (u.priority, -u.started_at, u.unit_id))
    chosen: list[RunningUnit] = []
    for unit in order:
        if need.fits_in(room):
            break
        chosen.append(unit)
        room = room + unit.resources
    if not need.fits_in(room):
        return None
    for unit in list(chosen):
        if need.fits_in(room - unit.resources):
            chosen.remove(unit)
            room = room - unit.resources
    return chosen


# ------------------------------------------------------------- the walk

_NOTHING = Resources()


class _Walk:
    """The state of one walk over the waiting runs. Used once, by ``plan``."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        machine = snapshot.machine
        self.now = now
        self.grace = machine.stop_grace
        self.capacity = machine.capacity()
        self.workspaces = snapshot.workspaces
        self.running = snapshot.running
        held = {g for unit in snapshot.running for g in unit.gpus}
        self.free_gpus = [g for g in sorted(machine.gpus) if g not in held]
        self.free = self.capacity
        self.usage: dict[str, Resources] = {}
        for unit in snapshot.running:
            self.free = self.free - unit.resources
            self.usage[unit.workspace] = self.usage.get(unit.workspace, _NOTHING) + unit.resources
        self.shares = {ws: self._share(ws) for ws in {run.workspace for run in snapshot.waiting}}
        # What each workspace with a quota may still take; updated as runs start.
        self.quota_room = {
            name: _as_room(ws.quota) for name, ws in self.workspaces.items() if ws.quota
        }
        self.headroom = {
            name: room - self.usage.get(name, _NOTHING) for name, room in self.quota_room.items()
        }
        self.quota_messages: dict[str, dict[Resources, Reason]] = {}
        self.started_ends: list[tuple[float, Resources]] = []
        self.starts: list[Start] = []
        self.preemptions: list[Preempt] = []
        self.reasons: dict[str, Reason] = {}
        self.quota_waits: set[str] = set()
        self.quota_checks: dict[str, str] = {}
        self.order: list[str] = []
        self.head: Head | None = None
        self.claimed: set[str] = set()  # units stopped for an in-quota preemption
        self.lowest: dict[str, int] = {}  # each workspace's lowest running priority
        self.own_units: dict[str, list[RunningUnit]] = {}  # each workspace's running units
        for unit in snapshot.running:
            self.lowest[unit.workspace] = min(unit.priority, self.lowest.get(unit.workspace, 1001))
            self.own_units.setdefault(unit.workspace, []).append(unit)
        self.awaited = {u.stopping_for for u in snapshot.running if u.stopping_for is not None}
        # (workspace, priority, ask, time limit) of in-quota preemptions refused since
        # the walk's room last changed
        self.refused: set[tuple[str, int, Resources, float | None]] = set()
        self.spare = _NOTHING
        self.behind = Reason("")
        # the running work the head's shadow counts on, by unit (set by make_head)
        self.head_ends: dict[str, tuple[float, Resources]] = {}

    def _share(self, workspace: str) -> float:
        ws = self.workspaces.get(workspace)
        if ws is None or ws.quota is None:
            return 0.0
        share = dominant_share(self.usage.get(workspace, _NOTHING), ws.quota)
        return share / max(ws.weight, 1e-9)

    def walk(self, waiting: Iterable[WaitingRun]) -> None:
        record, visit = self.order.append, self.visit
        fixed = {ws for ws in self.shares if ws not in self.headroom}
        for run in _Order(waiting, self.shares, fixed):
            record(run.name)
            visit(run)

    def visit(self, run: WaitingRun) -> None:
        ask = run.total
        # 1. Over its workspace's quota: waits, blocks nobody, never the head.
        headroom = self.headroom.get(run.workspace)
        if headroom is not None and not ask.fits_in(headroom):
            if self.preempt_own(run, headroom):
                return
            self.quota_waits.add(run.name)
            check = self._quota_message(run.workspace, ask)
            self.quota_checks[run.name] = check.template
            self.wait(run, check, follows_prefix=True)
            return
        # 2. Larger than the machine: can never run here, never the head.
        if not ask.fits_in(self.capacity):
            self.wait(run, Reason(_too_large(ask, self.capacity) or ""), follows_prefix=True)
            return
        # 3. No head yet: start whatever fits; the first that does not is the head.
        if self.head is None:
            if ask.fits_in(self.free):
                self.start(run, backfill=False, why=_FITS)
            else:
                self.make_head(run)
            return
        # 4. Behind the head: backfill, or wait behind it.
        if ask.fits_in(self.free):
            end = math.inf if run.time_limit is None else self.now + run.time_limit + self.grace
            head = RunRef(self.head.run, self.head.workspace)
            if self.head.shadow is not None and end <= self.head.shadow:
                by = format_utc(self.head.shadow)
                self.start(
                    run,
                    backfill=True,
                    why=Reason.of(f"its time limit ends it before {{0}} starts (by {by})", head),
                )
                return
            if ask.fits_in(self.spare):
                self.spare = self.spare - ask
                self.start(
                    run, backfill=True, why=Reason.of("it fits in room {0} does not need", head)
                )
                return
        if run.preempted_by is None:
            self.reasons[run.name] = self.behind
        else:
            self.wait(run, self.behind, follows_prefix=False)

    def preempt_own(self, run: WaitingRun, headroom: Resources) -> bool:
        """Over quota only because of its own workspace's lower-priority running work:
        preempt that work (strictly lower, fewest, newest, gangs whole). The run is
        never the head; behind one it takes only room the head does not need and
        never makes the head's shadow later (``_keeps_shadow``).

        A refusal holds for every run asking the same until the walk's room changes
        (a start, a preemption, the head), unless units already stop for the run."""
        if run.priority <= self.lowest.get(run.workspace, run.priority):
            return False
        if not run.total.fits_in(self.quota_room[run.workspace]):  # more than it allows at all
            return False
        key = (run.workspace, run.priority, run.total, run.time_limit)
        cacheable = run.name not in self.awaited
        if cacheable and key in self.refused:
            return False
        if self._preempt_own(run, headroom):
            self.refused.clear()
            return True
        if cacheable:
            self.refused.add(key)
        return False

    def _preempt_own(self, run: WaitingRun, headroom: Resources) -> bool:
        own = [u for u in self.own_units.get(run.workspace, ())
               if u.priority < run.priority and u.unit_id not in self.claimed]  # fmt: skip
        stopping = [u for u in own if u.stopping and u.stopping_for == run.name]
        room = Resources(*map(min, amounts(headroom), amounts(self.free)))
        if self.head is not None:  # backfill rule (b): only room the head does not need
            room = Resources(*map(min, amounts(room), amounts(self.spare)))
        for unit in stopping:
            room = room + unit.resources
        victims = _choose_victims(run, room, [u for u in own if not u.stopping])
        if victims is None or not (victims or stopping):
            return False
        freed = _NOTHING
        for unit in victims + stopping:
            freed = freed + unit.resources
        take = Resources(*(max(0, x) for x in amounts(run.total - freed)))
        ends = self._preemptor_end(run, take, victims + stopping)
        if self.head is None:  # the head chosen later counts on this run's end, as on a start's
            self.started_ends.append(ends)
        elif not self._keeps_shadow(ends, victims + stopping):
            return False
        self.claimed.update(u.unit_id for u in victims + stopping)
        take_gpus(self.free_gpus, take.gpus)
        self.free = self.free - take
        self.headroom[run.workspace] = headroom - take
        for_run = RunRef(run.name, run.workspace)
        self.preemptions += [
            Preempt(v.unit_id, v.run, v.workspace, v.workers, for_run) for v in victims
        ]
        waiting_for = sum(u.workers for u in stopping)
        self.wait(run, _preempting_message(victims, waiting_for) or _FITS, follows_prefix=True)
        return True

    def _preemptor_end(
        self, run: WaitingRun, take: Resources, claimed: list[RunningUnit]
    ) -> tuple[float, Resources]:
        """When an in-quota preemptor gives its room back, and how much: it starts once
        the claimed units have stopped (their stop deadline, or the grace from now), and
        holds ``take`` and all the claimed units' room until its limit plus grace later."""
        start_by = max([self.now + self.grace] + [u.stop_deadline or 0.0 for u in claimed])
        limit = run.time_limit
        end = math.inf if limit is None else start_by + limit + self.grace
        held = take
        for unit in claimed:
            held = held + unit.resources
        return end, held

    def _keeps_shadow(self, end: tuple[float, Resources], claimed: list[RunningUnit]) -> bool:
        """Behind the head: replay its shadow with the claimed units' ends replaced by
        the preemptor's ``end``; True (and the spare updated) when the shadow is no later.
        """
        assert self.head is not None
        take = end[1]
        for unit in claimed:
            take = take - unit.resources
        gone = {u.unit_id for u in claimed}
        ends = [e for unit_id, e in self.head_ends.items() if unit_id not in gone]
        ends += [*self.started_ends, end]
        shadow, spare = _shadow(self.free - take, self.head.need, ends, self.now)
        before = self.head.shadow
        if before is not None and (shadow is None or shadow > before):
            return False
        for unit_id in gone:
            self.head_ends.pop(unit_id, None)
        self.started_ends.append(end)
        self.spare = Resources(*map(min, amounts(self.spare), amounts(spare)))
        return True

    def _quota_message(self, workspace: str, ask: Resources) -> Reason:
        """The quota message, shared by every run of the workspace asking the same."""
        cache = self.quota_messages.setdefault(workspace, {})
        if ask not in cache:
            quota = self.workspaces[workspace].quota
            used = self.usage.get(workspace, _NOTHING)
            cache[ask] = Reason(_quota_reason(used, ask, quota) or "")
        return cache[ask]

    def wait(self, run: WaitingRun, reason: Reason, *, follows_prefix: bool) -> None:
        if run.preempted_by is not None:
            prefix = Reason.of(PREEMPTED_WAITING, run.preempted_by)
            reason = prefix.then(reason) if follows_prefix else prefix
        self.reasons[run.name] = reason

    def start(self, run: WaitingRun, *, backfill: bool, why: Reason) -> None:
        ask = run.total
        self.refused.clear()
        gpus = tuple(take_gpus(self.free_gpus, run.worker.gpus) for _ in run.workers)
        self.free = self.free - ask
        self.usage[run.workspace] = self.usage.get(run.workspace, _NOTHING) + ask
        if run.workspace in self.headroom:
            self.headroom[run.workspace] = self.headroom[run.workspace] - ask
            self.quota_messages.pop(run.workspace, None)
        self.shares[run.workspace] = self._share(run.workspace)
        end = math.inf if run.time_limit is None else self.now + run.time_limit + self.grace
        self.started_ends.append((end, ask))
        self.starts.append(Start(run.name, run.workers, gpus, backfill, why))

    def make_head(self, run: WaitingRun) -> None:
        need = run.ask()
        self.refused.clear()
        stopping = [u for u in self.running if u.stopping]
        room_after_stops = self.free
        for unit in stopping:
            if unit.unit_id not in self.claimed:
                room_after_stops = room_after_stops + unit.resources
        victims: list[RunningUnit] = []
        if not need.fits_in(room_after_stops):
            candidates = [
                u
                for u in self.running
                if not u.stopping and u.priority < run.priority and u.unit_id not in self.claimed
            ]
            victims = _choose_victims(run, room_after_stops, candidates) or []
        deadline = self.now + self.grace
        victim_ids = {v.unit_id for v in victims}
        self.head_ends = {
            u.unit_id: (
                min(unit_end(u, self.grace), deadline)
                if u.unit_id in victim_ids
                else unit_end(u, self.grace),
                u.resources,
            )
            for u in self.running
            if u.unit_id not in self.claimed
        }
        self.claimed |= victim_ids  # the head's victims: no in-quota preemption takes them
        ends = list(self.head_ends.values())
        shadow, spare = _shadow(self.free, need, ends + self.started_ends, self.now)
        waiting_for = sum(u.workers for u in stopping if u.stopping_for == run.name)
        self.head = Head(
            run.name,
            run.workspace,
            run.priority,
            shadow,
            need,
            preempting=bool(victims) or waiting_for > 0,
        )
        for_run = RunRef(run.name, run.workspace)
        self.preemptions += [
            Preempt(v.unit_id, v.run, v.workspace, v.workers, for_run) for v in victims
        ]
        self.spare = spare
        self.behind = _behind_message(self.head)
        self.wait(run, _head_message(self.head, victims, waiting_for), follows_prefix=True)

    def result(self) -> Plan:
        head = self.head
        if head is not None:
            held = take_gpus(list(self.free_gpus), min(head.need.gpus, len(self.free_gpus)))
            head = Head(
                head.run,
                head.workspace,
                head.priority,
                head.shadow,
                head.need,
                held,
                head.preempting,
            )
        return Plan(
            starts=tuple(self.starts),
            preemptions=tuple(self.preemptions),
            head=head,
            reasons=self.reasons,
            quota_waits=frozenset(self.quota_waits),
            order=tuple(self.order),
            quota_checks=self.quota_checks,
        )


def plan(snapshot: Snapshot, now: float) -> Plan:
    """Decide what starts, what is preempted, and why everything else waits."""
    walk = _Walk(snapshot, now)
    walk.walk(snapshot.waiting)
    return walk.result()
