"""In-quota preemption (invariant 4 of runner/planner/plan.py): a run over its
workspace's quota only because of that workspace's own lower-priority running work
preempts that work. A part of the walk (``plan._Walk``), kept here for its size."""

from __future__ import annotations

import math

from runner.model import Resources, amounts
from runner.planner.messages import preempting_message
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
    own_units: dict[str, list[RunningUnit]]
    claimed: set[str]
    awaited: set[str]
    refused: set[tuple[str, int, tuple[int, ...], float | None]]
    started_ends: list[tuple[float, Resources]]
    head_ends: dict[str, tuple[float, Resources]]
    preemptions: list[Preempt]

    def wait(self, run: WaitingRun, reason: Reason, *, follows_prefix: bool) -> None:
        raise NotImplementedError  # the walk's

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
        key = (run.workspace, run.priority, amounts(run.total), run.time_limit)
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
