"""When will each waiting run start? The planner, replayed forward in time.

Running work is assumed to run to its time limit (plus the stop grace), the latest
it can end. The head's estimate is then a bound (its shadow time, which the planner
protects); the others are what happens when every run takes its whole limit: work
that ends early can let a run behind the head backfill and delay them, and fair
share reorders workspaces as their use changes (docs/scheduling.md, "Start
estimates"). Where work without a time limit is in the way, the estimate names that
work instead (``after``) and gives no time.

Pure like the planner: a snapshot and ``now`` in, estimates out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from runner.model import Estimate as Estimate  # the planner's answer, plain data
from runner.model import Resources
from runner.planner.lengths import Lengths, RunKey
from runner.planner.plan import Plan, RunningUnit, Snapshot, WaitingRun, plan, unit_end
from runner.reasons import ReasonCode

# runs that start on no end of running work: larger than the machine, or than their quota
NEVER_HERE = frozenset({ReasonCode.TOO_LARGE, ReasonCode.QUOTA_OVER})
MAX_STEPS = 400  # planning cycles one estimate may replay; beyond, "unknown"
ESTIMATE_BUDGET_MS = 300.0  # planning time one round of estimates may take


def estimate_steps(last_plan_ms: float) -> int:
    """How many planning cycles fit in the estimate's time budget, at the last cycle's cost."""
    per_plan = max(last_plan_ms, 0.5)
    return int(min(MAX_STEPS, max(5, ESTIMATE_BUDGET_MS / per_plan)))


def _started_units(result: Plan, waiting: dict[str, WaitingRun], t: float) -> list[RunningUnit]:
    units = []
    for start in result.starts:
        run = waiting.pop(start.run)
        units.append(
            RunningUnit(
                f"sim:{run.name}", run.name, run.workspace, run.priority, run.ask(),
                tuple(g for gpus in start.gpus for g in gpus), t, run.time_limit,
                len(run.workers), gpu_share=run.gpu_share,
            )
        )  # fmt: skip
    return units


def _preempt(result: Plan, running: list[RunningUnit], t: float, grace: float) -> list[RunningUnit]:
    """Victims stop by ``t + grace``, or their limit's end if sooner; they wait again
    afterwards (see _finish)."""
    victims = {p.unit_id: p.for_run.name for p in result.preemptions}
    return [
        replace(
            u, stop_deadline=min(t + grace, unit_end(u, grace)), stopping_for=victims[u.unit_id]
        )
        if u.unit_id in victims
        else u
        for u in running
    ]


# how long a unit's run takes in all, in seconds from its start (None: not known); a
# forecast's replay ends work then rather than at its time limit
Length = Callable[[RunningUnit], float | None]


def estimate_starts(
    snapshot: Snapshot, now: float, max_steps: int = MAX_STEPS, length: Length | None = None
) -> dict[str, Estimate]:
    """An estimate for every waiting run of the snapshot.

    ``length``: a forecast rather than a bound: each run ends when ``length`` says (at its
    time limit at the latest), while the planner still plans with the time limits."""
    grace = snapshot.machine.stop_grace

    def end(unit: RunningUnit) -> float:
        bound = unit_end(unit, grace)
        took = None if length is None or unit.stopping else length(unit)
        return bound if took is None else min(bound, unit.started_at + took)

    waiting = {w.name: w for w in snapshot.waiting}
    originals = dict(waiting)
    running = list(snapshot.running)
    out: dict[str, Estimate] = {}
    t = now
    head: str | None = None
    never: set[str] = set()  # runs some plan found can never start (TOO_LARGE, QUOTA_OVER)
    for step in range(max_steps):
        state = replace(snapshot, running=tuple(running), waiting=tuple(waiting.values()))
        result = plan(state, t)
        never.update(n for n, r in result.reasons.items() if r.code in NEVER_HERE)
        if step == 0 and result.head is not None and result.head.shadow is not None:
            head = result.head.run
        for start in result.starts:
            out.setdefault(start.run, Estimate(t, promise=start.run == head))
        running = _preempt(result, running, t, grace) + _started_units(result, waiting, t)
        if not waiting:
            break
        ends = sorted({end(u) for u in running})
        if not ends or math.isinf(ends[0]):
            blockers = tuple(sorted({u.run for u in running if math.isinf(end(u))}))
            for name in waiting:  # but a run that can never start waits for no one (a
                # later plan may give it another reason first: its quota full, say)
                out.setdefault(name, Estimate(None, () if name in never else blockers))
            break
        t = max(t, ends[0])
        running, requeued = _finish(running, t, end)
        for unit in requeued:
            if unit.run not in waiting:
                waiting[unit.run] = originals.get(unit.run) or _as_waiting(unit)
    for name in originals:
        out.setdefault(name, Estimate(None))
    return out


def _finish(
    running: list[RunningUnit], t: float, end: Callable[[RunningUnit], float]
) -> tuple[list[RunningUnit], list[RunningUnit]]:
    """Drop the work that has ended by ``t``; what was preempted waits again."""
    kept, requeued = [], []
    for unit in running:
        if end(unit) > t:
            kept.append(unit)
        elif unit.stopping_for is not None:
            requeued.append(unit)
    return kept, requeued


def _as_waiting(unit: RunningUnit) -> WaitingRun:
    """A preempted running unit, waiting again (its submission time is not known
    here: its start time stands in, which only moves it later in the order)."""
    per = unit.resources
    n = max(unit.workers, 1)
    worker = Resources(per.gpus // n, per.cpu_milli // n, per.memory // n, 1, per.gpu_memory // n,
                       per.held_gpus // n)  # fmt: skip
    return WaitingRun(
        unit.run, unit.workspace, unit.priority, unit.started_at, worker,
        tuple(range(n)), unit.time_limit, gpu_share=unit.gpu_share,
        gpu_count=len(unit.gpus) // n if unit.gpu_share else 0,
    )  # fmt: skip


def with_forecasts(
    snapshot: Snapshot,
    now: float,
    bounds: Mapping[str, Estimate],
    lengths: Lengths,
    owner: Callable[[str], str],
    max_steps: int = MAX_STEPS,
    ran: Callable[[Iterable[str]], Mapping[str, float]] | None = None,
) -> dict[str, Estimate]:
    """``bounds`` (``estimate_starts``'s) with the likely and 90 % starts forecast from
    ``lengths``: the queue replayed twice more, every run ending when its learned length
    says (a running run's conditioned on how long it has run; at its limit at the latest).
    ``owner``: a run's owner, by its name (its length's group); ``ran``: asked once, with
    the running runs, the seconds each ran in its attempts before this one (a requeued run
    resumes: its learned length is of all its attempts, its remaining time what it has not
    run yet). Nothing is forecast (nor ``ran`` asked) before the lengths rest on
    ``lengths.min_runs`` runs. The head's forecast is never later than its promise, and the
    likely start never later than the 90 % one."""
    learned = lengths.runs
    if learned < lengths.min_runs:  # no history yet: said as such, not guessed
        needs = lengths.min_runs
        return {
            n: replace(e, learned_from=learned, forecast_needs=needs) for n, e in bounds.items()
        }
    earlier = {} if ran is None else ran(u.run for u in snapshot.running)

    def length(likely: bool) -> Length:
        def took(unit: RunningUnit) -> float | None:
            key = RunKey(unit.workspace, owner(unit.run), unit.run)
            before = earlier.get(unit.run, 0.0)
            elapsed = max(0.0, now - unit.started_at) + before
            found = lengths.forecast(key, elapsed, unit.time_limit)
            return None if found is None else (found.likely if likely else found.by) - before

        return took

    middle = estimate_starts(snapshot, now, max_steps, length(True))
    high = estimate_starts(snapshot, now, max_steps, length(False))
    out = {}
    for name, bound in bounds.items():
        by = _start(high.get(name))
        if by is not None and bound.promise and bound.starts_by is not None:
            by = min(by, bound.starts_by)
        at = _start(middle.get(name))
        if at is not None and by is not None:
            at = min(at, by)
        out[name] = replace(bound, likely=at, likely_by=by, learned_from=learned)
    return out


def _start(estimate: Estimate | None) -> float | None:
    return None if estimate is None else estimate.starts_by
