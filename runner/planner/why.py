"""Why a run waits, and what would make it start sooner, from the planner itself.

``explain`` answers for one waiting run: where it stands in the order and
what put it there, what it waits for, then levers. Every lever is checked by
re-planning with the change applied; none is guessed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from runner.durations import spoken, utc_minute
from runner.model import Resources, amounts
from runner.planner.plan import (
    Plan,
    RunningUnit,
    Snapshot,
    WaitingRun,
    dominant_share,
    plan,
    unit_end,
)
from runner.reasons import ANONYMOUS_RUN, ReasonCode, Viewer

_C = ReasonCode


@dataclass(frozen=True)
class Verdict:
    """Why a waiting run preempts nothing: a code for programs, text for people."""

    code: ReasonCode
    text: str


@dataclass(frozen=True)
class Why:
    run: str
    reason: str
    chain: tuple[str, ...]
    levers: tuple[str, ...]
    preemption: Verdict | None = None


class _Namer:
    def __init__(self, viewer: Viewer, snapshot: Snapshot) -> None:
        self.viewer = viewer
        self.ws = {w.name: w.workspace for w in snapshot.waiting}
        self.ws.update({u.run: u.workspace for u in snapshot.running})

    def __call__(self, run: str) -> str:
        return run if self.viewer.sees(self.ws.get(run, "")) else ANONYMOUS_RUN


def _started(result: Plan, name: str) -> bool:
    return any(s.run == name for s in result.starts)


def _with(snapshot: Snapshot, run: WaitingRun) -> Snapshot:
    waiting = tuple(run if w.name == run.name else w for w in snapshot.waiting)
    return replace(snapshot, waiting=waiting)


def _share(snapshot: Snapshot, workspace: str) -> float:
    """The measure the planner orders workspaces by: dominant share / weight."""
    ws = snapshot.workspaces.get(workspace)
    if ws is None or ws.quota is None:
        return 0.0
    used = Resources()
    for unit in snapshot.running:
        if unit.workspace == workspace:
            used = used + unit.resources
    return dominant_share(used, ws.quota) / ws.weight


def _ahead_line(snapshot: Snapshot, result: Plan, run: WaitingRun, name: _Namer) -> str:
    order = result.order
    position = order.index(run.name) + 1
    line = f"Position {position} of {len(order)} in the queue, priority {run.priority}"
    if position == 1:
        return line + ": first in the order."
    ahead = next(w for w in snapshot.waiting if w.name == order[position - 2])
    who = name(ahead.name)
    if ahead.priority > run.priority:
        return line + f": behind {who} (priority {ahead.priority} > {run.priority})."
    mine, theirs = _share(snapshot, run.workspace), _share(snapshot, ahead.workspace)
    if ahead.workspace != run.workspace and theirs < mine:
        return line + (
            f": behind {who}: namespace {ahead.workspace}'s share/weight {theirs:.2f} is below "
            f"{run.workspace}'s {mine:.2f}."
        )
    when = datetime.fromtimestamp(ahead.submitted_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return line + f": behind {who}, submitted earlier ({when})."


def _frees_what_head_lacks(result: Plan, free: Resources) -> Callable[[RunningUnit], bool]:
    """Whether a running unit's end frees some resource the head is short of now.

    Short: the head's need beyond ``free``, what is free once this plan's starts are
    placed (``_free_after_starts``).
    """
    need = result.head.need if result.head else Resources()
    short = [i for i, (n, f) in enumerate(zip(amounts(need), amounts(free), strict=True)) if n > f]

    def helps(unit: RunningUnit) -> bool:
        held = amounts(unit.resources)
        return any(held[i] > 0 for i in short)

    return helps


def _waits_for(snapshot: Snapshot, result: Plan, name: _Namer, now: float) -> str | None:
    head = result.head
    if head is None:
        return None
    grace = snapshot.machine.stop_grace
    helps = _frees_what_head_lacks(result, _free_after_starts(snapshot, result))
    ends = []
    for unit in sorted(filter(helps, snapshot.running), key=lambda u: unit_end(u, grace)):
        end = unit_end(unit, grace)
        what = "has no time limit" if math.isinf(end) else f"ends by {utc_minute(end)}"
        ends.append(f"{name(unit.run)} ({_gpus(unit.resources.gpus)}) {what}")
        if head.shadow is not None and end >= head.shadow:
            break
    if not ends:
        return None
    return f"The head, {name(head.run)}, waits for: " + "; ".join(ends[:4]) + "."


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _free_after_starts(snapshot: Snapshot, result: Plan) -> Resources:
    free = snapshot.machine.capacity()
    for unit in snapshot.running:
        free = free - unit.resources
    started = {s.run: len(s.workers) for s in result.starts}
    for w in snapshot.waiting:
        if w.name in started:
            free = free - w.worker.times(started[w.name])
    return free


def _head_verdict(
    snapshot: Snapshot, result: Plan, run: WaitingRun, name: _Namer, drained: frozenset[int]
) -> Verdict | None:
    """The head waits without preempting: what is in its way and why none of it is
    stopped for it."""
    head = result.head
    if head is None or head.run != run.name or head.preempting:
        return None
    free = _free_after_starts(snapshot, result)
    helps = _frees_what_head_lacks(result, free)
    in_way = [u for u in snapshot.running if not u.stopping and helps(u)]
    equal = sorted((u for u in in_way if u.priority >= run.priority),
                   key=lambda u: (-u.priority, u.run))  # fmt: skip
    lower = sorted((u for u in in_way if u.priority < run.priority), key=lambda u: u.priority)
    parts = []
    for u in equal[:3]:
        how = "equal" if u.priority == run.priority else "higher"
        parts.append(f"{name(u.run)} has priority {u.priority} ({how}, never preempted)")
    need = head.need
    freed = free
    for u in lower:
        freed = freed + u.resources
    short_gpus = max(0, need.gpus - max(0, free.gpus))
    if lower:
        shown = ", ".join(
            f"{name(u.run)} (priority {u.priority}, {_gpus(u.resources.gpus)})" for u in lower[:3]
        )
        gained = min(short_gpus, sum(u.resources.gpus for u in lower))
        what = (
            f"would free {gained} of the {_gpus(short_gpus)} needed"
            if short_gpus
            else "would not free enough of what it needs"
        )
        parts.append(f"stopping {shown} {what}")
    code = _C.NO_PREEMPTION_PRIORITY if equal else _C.NO_PREEMPTION_ROOM
    workers = len(run.workers)
    if workers > 1 and run.worker.fits_in(freed) and not need.fits_in(freed):
        parts.append(f"a gang needs room for all its {workers} workers at once")
        code = code if equal else _C.NO_PREEMPTION_GANG
    if drained:  # lower-priority work that frees nothing it lacks: on drained GPUs, or CPU only
        off = [u for u in snapshot.running
               if u.priority < run.priority and not u.stopping and not helps(u)]  # fmt: skip
        if off or not parts:
            shown = ", ".join(str(g) for g in sorted(drained))
            parts.append(f"GPUs {shown} are drained: work on them frees no GPU it can use")
            code = code if parts[:-1] else _C.NO_PREEMPTION_DRAINED
    if not parts:
        return None
    return Verdict(code, "No preemption: " + "; ".join(parts))


def _quota_verdict(snapshot: Snapshot, run: WaitingRun) -> Verdict:
    """A run over its quota: it waits (only the head preempts), or its workspace's own
    lower-priority work would not bring it within the quota."""
    ws = snapshot.workspaces.get(run.workspace)
    if ws is None or not ws.preempt_within_quota:
        text = (
            "No preemption: a run over its namespace's quota waits for it; only the head "
            "preempts (the namespace's preempt_within_quota is off)"
        )
        return Verdict(_C.NO_PREEMPTION_QUOTA, text)
    lower = [u for u in snapshot.running
             if u.workspace == run.workspace and u.priority < run.priority]  # fmt: skip
    if not lower:
        text = "No preemption: none of its namespace's running work has a lower priority"
    else:
        text = (
            "No preemption: stopping its namespace's lower-priority work would not bring it "
            "within the quota, or the room it would free is not free on the machine"
        )
    return Verdict(_C.NO_PREEMPTION_QUOTA, text)


def explain(
    snapshot: Snapshot,
    now: float,
    run_name: str,
    viewer: Viewer,
    max_priority: int,
    drained: frozenset[int] = frozenset(),
) -> Why | None:
    """None when the run is not waiting in this snapshot. ``drained``: the GPUs kept out
    of the plan (the snapshot is the drained one)."""
    run = next((w for w in snapshot.waiting if w.name == run_name), None)
    if run is None:
        return None
    result = plan(snapshot, now)
    name = _Namer(viewer, snapshot)
    reason = result.reason(run_name, viewer) or "Starts at the next planning cycle."
    chain = [_ahead_line(snapshot, result, run, name)]
    if run_name not in result.quota_waits and not _started(result, run_name):
        waits = _waits_for(snapshot, result, name, now)
        if waits:
            chain.append(waits)
    if _started(result, run_name):
        return Why(run_name, reason, tuple(chain), ())
    verdict = (
        _quota_verdict(snapshot, run)
        if run_name in result.quota_waits
        else _head_verdict(snapshot, result, run, name, drained)
    )
    if verdict is not None:
        chain.append(verdict.text + ".")
    levers = [
        lever
        for lever in (
            _time_limit_lever(snapshot, result, run, now),
            _gpu_lever(snapshot, run, now),
            _priority_lever(snapshot, result, run, now, max_priority, name),
            _share_lever(snapshot, result, run, now, name),
        )
        if lever
    ]
    return Why(run_name, reason, tuple(chain), tuple(levers), verdict)


def _time_limit_lever(snapshot: Snapshot, result: Plan, run: WaitingRun, now: float) -> str | None:
    head = result.head
    if head is None or head.shadow is None or head.run == run.name:
        return None
    limit = math.floor((head.shadow - now - snapshot.machine.stop_grace) / 60) * 60
    if limit <= 0 or (run.time_limit is not None and run.time_limit <= limit):
        return None
    if not _started(plan(_with(snapshot, replace(run, time_limit=limit)), now), run.name):
        return None
    return f"A time limit of at most {spoken(limit)} lets it start now by backfill."


def _gpu_lever(snapshot: Snapshot, run: WaitingRun, now: float) -> str | None:
    each = run.worker.gpu_memory // max(1, run.worker.gpus)  # what a whole GPU counts as
    for gpus in range(run.worker.gpus - 1, 0, -1):
        fewer = replace(run, worker=replace(run.worker, gpus=gpus, gpu_memory=each * gpus,
                                            held_gpus=gpus))  # fmt: skip
        if _started(plan(_with(snapshot, fewer), now), run.name):
            return f"With {gpus} GPU(s) per worker instead of {run.worker.gpus} it starts now."
    return None


def _priority_lever(
    snapshot: Snapshot, result: Plan, run: WaitingRun, now: float, cap: int, name: _Namer
) -> str | None:
    position = result.order.index(run.name)
    if position == 0:
        return None
    ahead = result.order[position - 1]
    candidates = sorted({w.priority + 1 for w in snapshot.waiting if w.priority >= run.priority})
    for priority in candidates:
        if priority <= run.priority or priority > min(cap, 1000):  # never one it may not ask
            continue
        moved = plan(_with(snapshot, replace(run, priority=priority)), now)
        if moved.order.index(run.name) < position or _started(moved, run.name):
            return (
                f"Priority {priority} would put it ahead of {name(ahead)} "
                f"(within your maximum of {cap})."
            )
    return None


def _share_lever(
    snapshot: Snapshot, result: Plan, run: WaitingRun, now: float, name: _Namer
) -> str | None:
    grace = snapshot.machine.stop_grace
    own = sorted(
        (u for u in snapshot.running if u.workspace == run.workspace and u.time_limit),
        key=lambda u: unit_end(u, grace),
    )
    position = result.order.index(run.name)
    for unit in own[:3]:
        end = unit_end(unit, grace)
        later = replace(snapshot, running=tuple(u for u in snapshot.running if u is not unit))
        moved = plan(later, end)
        if moved.order.index(run.name) < position:
            return (
                f"When {name(unit.run)} of your namespace ends (by {utc_minute(end)}) its share "
                "drops and it moves ahead."
            )
    return None


def as_json(why: Why) -> dict[str, object]:
    verdict = why.preemption
    preemption = None if verdict is None else {"code": verdict.code.value, "text": verdict.text}
    return {"run": why.run, "reason": why.reason, "chain": list(why.chain),
            "levers": list(why.levers), "preemption": preemption}  # fmt: skip
