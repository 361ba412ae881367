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
   lower-priority running work, and the workspace says so
   (``preempt_within_quota``), it preempts that work (invariant 3's rules,
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
the head does not need then, per resource. A run of the head's own workspace
that does not end by the shadow time also takes only quota the head does not
need: the head must still fit its workspace's quota at its shadow time.

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

import math
from collections.abc import Iterable
from dataclasses import replace
from operator import attrgetter

from runner.durations import utc_minute
from runner.model import Resources, amounts, machine_amounts
from runner.planner.inquota import InQuota
from runner.planner.messages import (
    as_room,
    behind_message,
    head_message,
    quota_reason,
    shared_head_message,
    too_large,
    too_large_shared,
)
from runner.planner.order import Order, dominant_share
from runner.planner.pool import (
    GpuPool,
    Hold,
    choose_victims_pool,
    replay_pool,
    start_hold,
    unit_hold,
    without_gpus,
)
from runner.planner.shadow import choose_victims, replay_shadow, take_gpus, unit_end
from runner.planner.types import (
    FITS,
    NO_WORKER_LIMIT,
    PREEMPTED_WAITING,
    Head,
    Machine,
    Plan,
    Preempt,
    RunningUnit,
    Snapshot,
    Start,
    WaitingRun,
)
from runner.reasons import Reason, ReasonCode, RunRef

__all__ = [
    "NO_WORKER_LIMIT",
    "PREEMPTED_WAITING",
    "Head",
    "Machine",
    "Plan",
    "Preempt",
    "RunningUnit",
    "Snapshot",
    "Start",
    "WaitingRun",
    "dominant_share",
    "plan",
    "plan_generally",
    "take_gpus",
    "unit_end",
]

# ------------------------------------------------------------- the walk

_NOTHING = Resources()
_BACKFILL, _PREEMPTED = ReasonCode.BACKFILLED, ReasonCode.PREEMPTED_WAITING


class _Walk(InQuota):
    """The state of one walk over the waiting runs. Used once, by ``plan``."""

    ordering: Order  # the walk's order (set by ``walk``): told when a share moves

    def __init__(self, snapshot: Snapshot, now: float, pooled: bool = False) -> None:
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
        # What each workspace with a quota may still take; updated as runs start.
        self.quota_room = {
            name: as_room(ws.quota) for name, ws in self.workspaces.items() if ws.quota
        }
        self.headroom = {
            name: room - self.usage.get(name, _NOTHING) for name, room in self.quota_room.items()
        }
        # each workspace's share (only one with a quota has one; see Order)
        self.shares = {name: self._share(name) for name in self.headroom}
        self.quota_messages: dict[str, dict[tuple[int, ...], tuple[Reason, Reason]]] = {}
        self.started_ends: list[tuple[float, Resources]] = []
        self.starts: list[Start] = []
        self.preemptions: list[Preempt] = []
        self.reasons: dict[str, Reason] = {}
        self.quota_waits: set[str] = set()
        self.quota_reached: dict[str, Reason] = {}
        self.order: list[str] = []
        self.head: Head | None = None
        self.claimed: set[str] = set()  # units stopped for an in-quota preemption
        # the workspaces whose runs preempt their own lower-priority work within the quota
        self.within = {n for n, ws in self.workspaces.items() if ws.preempt_within_quota}
        self.lowest: dict[str, int] = {}  # each workspace's lowest running priority
        self.own_units: dict[str, list[RunningUnit]] = {}  # each workspace's running units
        for unit in snapshot.running:
            self.lowest[unit.workspace] = min(unit.priority, self.lowest.get(unit.workspace, 1001))
            self.own_units.setdefault(unit.workspace, []).append(unit)
        self.awaited = {u.stopping_for for u in snapshot.running if u.stopping_for is not None}
        # (workspace, priority, ask, time limit) of in-quota preemptions refused since
        # the walk's room last changed
        self.refused: set[tuple[str, int, tuple[int, ...], float | None]] = set()
        self.spare = _NOTHING
        self.behind = Reason("", code=ReasonCode.MESSAGE)
        # the running work the head's shadow counts on, by unit (set by make_head)
        self.head_ends: dict[str, tuple[float, Resources]] = {}
        # Shared GPUs (runner/planner/pool.py): while any run shares a GPU, each GPU's
        # memory is placed one by one; the head's shadow and backfill replay GPU by GPU.
        self.pool: GpuPool | None = None
        self.pool_ends: list[tuple[float, Resources, Hold]] = []  # the walk's starts
        self.head_pool_ends: list[tuple[float, Resources, Hold]] = []
        self.head_run: WaitingRun | None = None
        # the head's workspace's quota the head does not need at its shadow time (None:
        # no head, or its workspace has no quota): what runs of that workspace behind it
        # may keep past the shadow time
        self.head_quota: Resources | None = None
        shares = attrgetter("gpu_share")
        if pooled or any(map(shares, snapshot.running)) or any(map(shares, snapshot.waiting)):
            pool = self.pool = GpuPool(machine.sizes())
            for unit in snapshot.running:
                pool.take(unit_hold(unit))
            self.free_gpus = pool.empty()
            # free whole GPUs are the empty ones: a GPU shared runs are on is not free room
            # for a run of whole GPUs (the replays below place GPUs through the pool)
            self.free = replace(self.free, gpus=len(self.free_gpus))

    def _share(self, workspace: str) -> float:
        ws = self.workspaces.get(workspace)
        if ws is None or ws.quota is None:
            return 0.0
        share = dominant_share(self.usage.get(workspace, _NOTHING), ws.quota)
        return share / max(ws.weight, 1e-9)

    def walk(self, waiting: Iterable[WaitingRun], fast: bool = True) -> None:
        """Visit each run in order. The visits most of a long queue gets are made here,
        as ``visit`` would make them: over its quota and refused by ``preempt_own``
        before it looks at running work, a run waits for its quota (step 1); behind the
        head, a run within its quota that fits on the machine but not in the free room
        waits behind the head (step 4)."""
        record, visit, reasons, headroom = (
            self.order.append,
            self.visit,
            self.reasons,
            self.headroom,
        )
        lowest, quota_waits, quota_reached = self.lowest.get, self.quota_waits, self.quota_reached
        quota_room, awaited, refused, within = (
            self.quota_room,
            self.awaited,
            self.refused,
            self.within,
        )
        cap_gpus, cap_cpu, cap_memory, cap_workers, cap_gpu_memory = machine_amounts(self.capacity)
        head, free, behind, pool = self.head, self.free, self.behind, self.pool
        self.ordering = Order(waiting, self.shares, headroom)
        for piece in self.ordering.pieces():
            for run in piece:
                name = run.name
                record(name)
                if fast and run.preempted_by is None:
                    ask, room = run.total, headroom.get(run.workspace)
                    if room is not None and not ask.fits_in(room):
                        ws, priority = run.workspace, run.priority
                        if (  # as preempt_own refuses it, before it looks at running work
                            ws not in within
                            or priority <= lowest(ws, priority)
                            or not ask.fits_in(quota_room[ws])
                            or (
                                name not in awaited
                                and (ws, priority, amounts(ask), run.time_limit) in refused
                            )
                        ):
                            reasons[name], reached = self._quota_message(ws, ask)
                            quota_waits.add(name)
                            quota_reached[name] = reached
                            continue
                    elif (
                        head is not None
                        and (ask.gpus > free.gpus or not ask.fits_in(free))
                        and ask.gpus <= cap_gpus
                        and ask.cpu_milli <= cap_cpu
                        and ask.memory <= cap_memory
                        and ask.workers <= cap_workers
                        and ask.gpu_memory <= cap_gpu_memory
                        # a shared ask no GPU can hold is too large (visit's step 2)
                        and not (run.gpu_share and pool is not None and pool.never_fits(run))
                    ):
                        reasons[name] = behind
                        continue
                visit(run)
                head, free, behind = self.head, self.free, self.behind

    def visit(self, run: WaitingRun) -> None:
        ask = run.total
        # 1. Over its workspace's quota: waits, blocks nobody, never the head.
        headroom = self.headroom.get(run.workspace)
        if headroom is not None and not ask.fits_in(headroom):
            if self.preempt_own(run, headroom):  # GPU by GPU while GPUs are shared
                return
            self.quota_waits.add(run.name)
            check, self.quota_reached[run.name] = self._quota_message(run.workspace, ask)
            self.wait(run, check, follows_prefix=True)
            return
        # 2. Larger than the machine: can never run here, never the head.
        pool = self.pool
        if pool is not None and pool.never_fits(run):
            self.wait(run, too_large_shared(run, pool.size), follows_prefix=True)
            return
        if not ask.fits_in(self.capacity):
            self.wait(
                run,
                too_large(ask, self.capacity) or Reason("", code=ReasonCode.MESSAGE),
                follows_prefix=True,
            )
            return
        fits = ask.fits_in(self.free) and (pool is None or pool.fits(run))
        # 3. No head yet: start whatever fits; the first that does not is the head.
        if self.head is None:
            if fits:
                self.start(run, backfill=False, why=FITS)
            else:
                self.make_head(run)
            return
        # 4. Behind the head: backfill, or wait behind it.
        if fits:
            end = math.inf if run.time_limit is None else self.now + run.time_limit + self.grace
            head = RunRef(self.head.run, self.head.workspace)
            if self.head.shadow is not None and end <= self.head.shadow:
                by = utc_minute(self.head.shadow)
                self.start(
                    run,
                    backfill=True,
                    why=Reason.of(
                        f"its time limit ends it before {{0}} starts (by {by})",
                        head,
                        code=_BACKFILL,
                    ),
                )
                return
            if self._in_head_quota(run) and self._in_spare(run, end):
                # while GPUs are shared the replay judges GPUs: the spare keeps the rest
                taken = (
                    ask
                    if self.pool is None
                    else Resources(0, ask.cpu_milli, ask.memory, ask.workers)
                )
                self.spare = self.spare - taken
                self._take_head_quota(run)
                self.start(
                    run,
                    backfill=True,
                    why=Reason.of("it fits in room {0} does not need", head, code=_BACKFILL),
                )
                return
        if run.preempted_by is None:
            self.reasons[run.name] = self.behind
        else:
            self.wait(run, self.behind, follows_prefix=False)

    def _in_head_quota(self, run: WaitingRun) -> bool:
        """Behind the head, a run of its workspace that may still run at the shadow time
        takes only quota the head does not need then."""
        room = self.head_quota
        assert self.head is not None
        return room is None or run.workspace != self.head.workspace or run.total.fits_in(room)

    def _take_head_quota(self, run: WaitingRun) -> None:
        head, quota = self.head, self.head_quota
        if quota is not None and head is not None and run.workspace == head.workspace:
            self.head_quota = quota - run.total

    def _quota_for_head(self, run: WaitingRun, shadow: float | None) -> None:
        """The quota ``run``, made the head, leaves its workspace at its shadow time:
        the headroom now, plus what its workspace's running work gives back by then
        (work ending by the shadow time; not what an in-quota preemptor claimed), less
        what it needs. Started runs are counted as never ending."""
        room = self.headroom.get(run.workspace)
        if room is None:
            self.head_quota = None
            return
        if shadow is not None:
            for unit in self.own_units.get(run.workspace, ()):
                end = self.head_ends.get(unit.unit_id)
                if end is not None and end[0] <= shadow:
                    room = room + unit.resources
        self.head_quota = Resources(*(max(0, x) for x in amounts(room - run.total)))

    def _in_spare(self, run: WaitingRun, end: float) -> bool:
        """Backfill rule (b): ``run`` takes only room the head does not need. GPU by
        GPU while GPUs are shared: started now, it leaves the head's shadow where it is
        (replayed); behind a head whose start is unknown, it takes no GPU."""
        ask = run.total
        if self.pool is None or not (ask.gpus or run.gpu_share):
            return ask.fits_in(self.spare)
        assert self.head is not None and self.head_run is not None
        if self.head.shadow is None:
            return False
        trial = self.pool.copy()
        placement = trial.place(run)
        if placement is None:
            return False
        ends = [*self.head_pool_ends, *self.pool_ends, (end, ask, start_hold(run, placement))]
        shadow = replay_pool(trial, self.free - ask, self.head_run, ends, self.now)
        return shadow is not None and shadow <= self.head.shadow

    def _quota_message(self, workspace: str, ask: Resources) -> tuple[Reason, Reason]:
        """The quota message, shared by every run of the workspace asking the same."""
        cache = self.quota_messages.setdefault(workspace, {})
        key = amounts(ask)  # hashed faster than the Resources
        found = cache.get(key)
        if found is None:
            quota = self.workspaces[workspace].quota
            used = self.usage.get(workspace, _NOTHING)
            # room held for an in-quota preemptor is not in ``used``, but it is taken: it
            # reads as in use (what the quota allows less what is still free in it)
            held = self.quota_room[workspace] - self.headroom[workspace]
            found = quota_reason(used, ask, quota) or quota_reason(held, ask, quota)
            assert found is not None, "a quota wait the quota allows"
            cache[key] = found
        return found

    def wait(self, run: WaitingRun, reason: Reason, *, follows_prefix: bool) -> None:
        if run.preempted_by is not None:
            prefix = Reason.of(PREEMPTED_WAITING, run.preempted_by, code=_PREEMPTED)
            reason = prefix.then(reason) if follows_prefix else prefix
        self.reasons[run.name] = reason

    def start(self, run: WaitingRun, *, backfill: bool, why: Reason) -> None:
        ask = run.total
        self.refused.clear()
        end = math.inf if run.time_limit is None else self.now + run.time_limit + self.grace
        if self.pool is None:
            gpus = tuple(take_gpus(self.free_gpus, run.worker.gpus) for _ in run.workers)
        else:
            placed = self.pool.place(run)
            assert placed is not None, "a start the pool cannot place"
            gpus = placed
            self.free_gpus = self.pool.empty()
            self.pool_ends.append((end, ask, start_hold(run, placed)))
        self.free = self.free - ask
        if self.pool is not None:
            self.free = replace(self.free, gpus=len(self.free_gpus))
        self.usage[run.workspace] = self.usage.get(run.workspace, _NOTHING) + ask
        if run.workspace in self.headroom:
            self.headroom[run.workspace] = self.headroom[run.workspace] - ask
            self.quota_messages.pop(run.workspace, None)
        share = self._share(run.workspace)
        if share != self.shares.get(run.workspace, 0.0):
            self.shares[run.workspace] = share
            self.ordering.moved()
        self.started_ends.append((end, ask))
        self.starts.append(Start(run.name, run.workers, gpus, backfill, why, run.gpu_share))

    def _crown(
        self, run: WaitingRun, need: Resources, shadow: float | None,
        victims: list[RunningUnit], stopping: list[RunningUnit],
    ) -> tuple[Head, int]:  # fmt: skip
        """``run`` is the head, starting at ``shadow``, preempting ``victims``; and how
        many workers of units already stopping for it it waits for."""
        self._quota_for_head(run, shadow)
        waiting_for = sum(u.workers for u in stopping if u.stopping_for == run.name)
        preempting = bool(victims) or waiting_for > 0
        self.head = head = Head(
            run.name, run.workspace, run.priority, shadow, need, preempting=preempting
        )
        for_run = RunRef(run.name, run.workspace)
        self.preemptions += [
            Preempt(v.unit_id, v.run, v.workspace, v.workers, for_run) for v in victims
        ]
        return head, waiting_for

    def make_head(self, run: WaitingRun) -> None:
        if self.pool is not None:
            self._make_pool_head(run, self.pool)
            return
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
            victims = choose_victims(run, room_after_stops, candidates) or []
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
        shadow, spare = replay_shadow(self.free, need, ends + self.started_ends, self.now)
        head, waiting_for = self._crown(run, need, shadow, victims, stopping)
        self.spare = spare
        self.behind = behind_message(head)
        self.wait(run, head_message(head, victims, waiting_for), follows_prefix=True)

    def _make_pool_head(self, run: WaitingRun, pool: GpuPool) -> None:
        """``make_head`` GPU by GPU: victims, shadow and held room placed on each GPU."""
        need = run.ask()
        self.refused.clear()
        stopping = [u for u in self.running if u.stopping]
        room_after_stops, after_stops = self.free, pool.copy()
        for unit in stopping:
            if unit.unit_id not in self.claimed:
                room_after_stops = room_after_stops + unit.resources
                after_stops.release(unit_hold(unit))
        victims: list[RunningUnit] = []
        if not (without_gpus(need).fits_in(room_after_stops) and after_stops.fits(run)):
            candidates = [
                u
                for u in self.running
                if not u.stopping and u.priority < run.priority and u.unit_id not in self.claimed
            ]
            victims = choose_victims_pool(run, after_stops, room_after_stops, candidates) or []
        deadline = self.now + self.grace
        victim_ids = {v.unit_id for v in victims}
        self.head_ends = {}
        self.head_pool_ends = []
        for u in self.running:
            if u.unit_id in self.claimed:
                continue
            end = unit_end(u, self.grace)
            if u.unit_id in victim_ids:
                end = min(end, deadline)
            self.head_ends[u.unit_id] = (end, u.resources)
            self.head_pool_ends.append((end, u.resources, unit_hold(u)))
        self.claimed |= victim_ids
        ends = self.head_pool_ends + self.pool_ends
        shadow = replay_pool(pool, self.free, run, ends, self.now)
        head, waiting_for = self._crown(run, need, shadow, victims, stopping)
        self.head_run = run
        # the room the head does not need at its shadow time, as make_head counts it: what
        # is free now and what ends by then (a run behind it taking only that never
        # delays it; GPUs are judged GPU by GPU, in _in_spare)
        room = self.free
        if shadow is not None:
            for end, freed, _ in ends:
                if end <= shadow:
                    room = room + freed
        self.spare = Resources(*(max(0, x) for x in amounts(room - need)))
        self.behind = behind_message(head)
        message = head_message(head, victims, waiting_for)
        if run.gpu_share and not head.preempting:
            message = shared_head_message(head, run, pool.most_free())
        self.wait(run, message, follows_prefix=True)

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
            quota_reached=self.quota_reached,
        )


def plan(snapshot: Snapshot, now: float) -> Plan:
    """Decide what starts, what is preempted, and why everything else waits."""
    walk = _Walk(snapshot, now)
    walk.walk(snapshot.waiting)
    return walk.result()


def plan_generally(
    snapshot: Snapshot, now: float, *, pooled: bool = True, fast: bool = False
) -> Plan:
    """The plan made the general way, as the rules are written once: every GPU placed
    through the pool of shares (as while any GPU is shared: the whole-GPU rules are its
    faster twins), every run visited (the walk's fast path, which repeats ``visit``'s
    steps 1 and 4, off). ``plan`` makes the same plan faster; the tests bind the two
    (tests/unit/test_planner_differential.py)."""
    walk = _Walk(snapshot, now, pooled=pooled)
    walk.walk(snapshot.waiting, fast=fast)
    return walk.result()
