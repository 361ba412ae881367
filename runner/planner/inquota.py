"""In-quota preemption (invariant 4 of runner/planner/plan.py): a run over its
workspace's quota only because of that workspace's own lower-priority running work
preempts that work, where the workspace says so (``preempt_within_quota``; off by
default, as Kueue's ``withinClusterQueue: Never``). A part of the walk
(``plan._Walk``), kept here for its size.

While any GPU is shared (``pool.GpuPool``) the same rule is judged GPU by GPU: a shared
run is a unit, the victims must let the run be placed on each GPU's memory, and behind
a head the head's shadow is replayed GPU by GPU (``_preempt_own_pool``)."""

from __future__ import annotations

import math
from dataclasses import replace

from runner.model import Resources, amounts
from runner.planner.messages import preempting_message
from runner.planner.pool import (
    GpuPool,
    Hold,
    Placement,
    fewest_victims,
    replay_pool,
    start_hold,
    unit_hold,
    without_gpus,
)
from runner.planner.shadow import choose_victims, replay_shadow, take_gpus
from runner.planner.types import FITS, Head, Preempt, RunningUnit, WaitingRun
from runner.reasons import Reason, RunRef

_NOTHING = Resources()


class InQuota:
    """The walk's in-quota preemptions; the state is the walk's (``plan._Walk``)."""

    now: float
    grace: float
    free: Resources
    free_gpus: list[int]
    spare: Resources
    head: Head | None
    headroom: dict[str, Resources]
    quota_room: dict[str, Resources]
    lowest: dict[str, int]
    within: set[str]
    own_units: dict[str, list[RunningUnit]]
    claimed: set[str]
    awaited: set[str]
    refused: set[tuple[str, int, tuple[int, ...], float | None]]
    started_ends: list[tuple[float, Resources]]
    head_ends: dict[str, tuple[float, Resources]]
    preemptions: list[Preempt]
    running: tuple[RunningUnit, ...]
    pool: GpuPool | None
    pool_ends: list[tuple[float, Resources, Hold]]
    head_pool_ends: list[tuple[float, Resources, Hold]]
    head_run: WaitingRun | None
    head_quota: Resources | None

    def wait(self, run: WaitingRun, reason: Reason, *, follows_prefix: bool) -> None:
        raise NotImplementedError  # the walk's

    def preempt_own(self, run: WaitingRun, headroom: Resources) -> bool:
        """Over quota only because of its own workspace's lower-priority running work:
        preempt that work (strictly lower, fewest, newest, gangs whole). The run is
        never the head; behind one it takes only room the head does not need and
        never makes the head's shadow later (``_keeps_shadow``).

        A refusal holds for every run asking the same until the walk's room changes
        (a start, a preemption, the head), unless units already stop for the run."""
        if run.workspace not in self.within:  # the workspace's setting: off, it waits
            return False
        if run.priority <= self.lowest.get(run.workspace, run.priority):
            return False
        if not run.total.fits_in(self.quota_room[run.workspace]):  # more than it allows at all
            return False
        key = (run.workspace, run.priority, amounts(run.total), run.time_limit)
        cacheable = run.name not in self.awaited
        if cacheable and key in self.refused:
            return False
        head = self.head
        quota = self.head_quota if head is not None and head.workspace == run.workspace else None
        if quota is not None and not run.total.fits_in(quota):  # the head's, at its shadow time
            return False
        pool = self.pool
        if (
            self._preempt_own(run, headroom)
            if pool is None
            else self._preempt_own_pool(run, headroom, pool)
        ):
            self.refused.clear()
            if quota is not None:
                self.head_quota = quota - run.total
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
        victims = choose_victims(run, room, [u for u in own if not u.stopping])
        if victims is None or not (victims or stopping):
            return False
        freed = _NOTHING
        for unit in victims + stopping:
            freed = freed + unit.resources
        take = Resources(*(max(0, x) for x in amounts(run.total - freed)))
        ends = self._preemptor_end(run, take, victims + stopping)
        if self.head is None:  # the head chosen later counts on this run's end, as on a start's
            self.started_ends.append(ends)
        elif not self._keepsreplay_shadow(ends, victims + stopping):
            return False
        self.claimed.update(u.unit_id for u in victims + stopping)
        take_gpus(self.free_gpus, take.gpus)
        self.free = self.free - take
        self.headroom[run.workspace] = headroom - take
        return self._preempting(run, victims, stopping)

    def _preempt_own_pool(self, run: WaitingRun, headroom: Resources, pool: GpuPool) -> bool:
        """``_preempt_own`` GPU by GPU. The victims (a shared run is a unit) are the fewest,
        lowest-priority, newest of its own workspace that let the run be placed on the
        GPUs' memory within its quota. Until the run's end the walk holds both the room it
        takes and its victims' (and units already stopping for it): nothing else is placed
        there. Behind a head it preempts only when replaying the head's shadow GPU by GPU,
        with its victims' ends replaced by its own, leaves the shadow no later; behind a head
        whose start is unknown, it waits."""
        head = self.head
        if head is not None and head.shadow is None:
            return False
        own = [u for u in self.own_units.get(run.workspace, ())
               if u.priority < run.priority and u.unit_id not in self.claimed]  # fmt: skip
        stopping = [u for u in own if u.stopping and u.stopping_for == run.name]
        room = Resources(*map(min, amounts(headroom), amounts(self.free)))
        after_stops = pool.copy()
        for unit in stopping:
            room = room + unit.resources
            after_stops.release(unit_hold(unit))
        victims = _choose_victims_pool(
            run, after_stops, room, headroom.gpus, [u for u in own if not u.stopping]
        )
        if victims is None or not (victims or stopping):
            return False
        claimed = victims + stopping
        freed = _NOTHING
        trial = after_stops
        for unit in victims:
            trial.release(unit_hold(unit))
        for unit in claimed:
            freed = freed + unit.resources
        placement = _placed_on_claimed_first(trial, run, pool.empty())
        assert placement is not None, "victims chosen that do not let the run be placed"
        whole, shares = start_hold(run, placement)
        for unit in claimed:  # held for the run until it ends: no room for anyone else
            unit_whole, unit_shares = unit_hold(unit)
            trial.take(unit_hold(unit))
            whole, shares = whole + unit_whole, shares + unit_shares
        take = Resources(*(max(0, x) for x in amounts(run.total - freed)))
        end, held = self._preemptor_end(run, take, claimed)
        # the GPUs left empty are the trial pool's: a whole GPU the run takes may be one a
        # shared victim emptied, which ``take`` (its ask less its victims' whole GPUs) counts
        # as taken from the empty ones
        free = replace(self.free - take, gpus=len(trial.empty()))
        if head is not None:  # behind the head: its shadow, replayed, is no later
            assert self.head_run is not None and head.shadow is not None
            gone = {u.unit_id for u in claimed}
            kept = [e for u, e in zip(self.head_ends, self.head_pool_ends, strict=True)
                    if u not in gone]  # fmt: skip
            ends = [*kept, *self.pool_ends, (end, held, (whole, shares))]
            shadow = replay_pool(trial, free, self.head_run, ends, self.now)
            if shadow is None or shadow > head.shadow:
                return False
            self.head_pool_ends = kept
            for unit_id in gone:
                self.head_ends.pop(unit_id, None)
            spare = self.spare - without_gpus(take)
            self.spare = Resources(*(max(0, x) for x in amounts(spare)))
        self.claimed.update(u.unit_id for u in claimed)
        pool.used, pool.whole = trial.used, trial.whole
        self.free_gpus = pool.empty()
        self.free = free
        self.headroom[run.workspace] = headroom - take
        self.pool_ends.append((end, held, (whole, shares)))
        return self._preempting(run, victims, stopping)

    def _preempting(
        self, run: WaitingRun, victims: list[RunningUnit], stopping: list[RunningUnit]
    ) -> bool:
        """``run`` preempts ``victims`` of its own workspace (and waits for ``stopping``)."""
        for_run = RunRef(run.name, run.workspace)
        self.preemptions += [
            Preempt(v.unit_id, v.run, v.workspace, v.workers, for_run) for v in victims
        ]
        waiting_for = sum(u.workers for u in stopping)
        self.wait(run, preempting_message(victims, waiting_for) or FITS, follows_prefix=True)
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

    def _keepsreplay_shadow(self, end: tuple[float, Resources], claimed: list[RunningUnit]) -> bool:
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
        shadow, spare = replay_shadow(self.free - take, self.head.need, ends, self.now)
        before = self.head.shadow
        if before is not None and (shadow is None or shadow > before):
            return False
        for unit_id in gone:
            self.head_ends.pop(unit_id, None)
        self.started_ends.append(end)
        self.spare = Resources(*map(min, amounts(self.spare), amounts(spare)))
        return True


def _placed_on_claimed_first(
    trial: GpuPool, run: WaitingRun, others: list[int]
) -> Placement | None:
    """Place ``run`` on ``trial`` (its victims released), on what they and the units
    stopping for it free before the GPUs empty without them (``others``): those stay held
    for the run until it ends all the same, and an empty GPU it need not take is left to
    the runs behind it, as ``take_gpus`` takes only what its victims do not give back."""
    first = trial.copy()
    first.take((tuple(others), ()))
    placement = first.place(run)
    if placement is None:
        return trial.place(run)
    trial.take(start_hold(run, placement))
    return placement


def _choose_victims_pool(
    run: WaitingRun,
    pool: GpuPool,
    room: Resources,
    gpu_room: int,
    candidates: list[RunningUnit],
) -> list[RunningUnit] | None:
    """As ``pool.choose_victims_pool`` (lowest priority first, among equals the newest;
    then every victim not needed dropped), within ``room`` (the quota's and the free
    room, whole GPUs counted against the quota's ``gpu_room``) and placed GPU by GPU."""
    need = run.total
    rest = without_gpus(need)

    def fits(chosen: list[RunningUnit]) -> bool:
        trial, r = pool.copy(), room
        for unit in chosen:
            trial.release(unit_hold(unit))
            r = r + unit.resources
        return (
            rest.fits_in(without_gpus(r))
            and need.gpus <= gpu_room + (r - room).gpus
            and trial.fits(run)
        )

    return fewest_victims(candidates, fits)
