"""What a replay measured: per run, then for the machine, per priority and per workspace."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runner.durations import compact
from runner.service.usage import percentile


@dataclass(frozen=True, slots=True)
class Outcome:
    """One run of a replay; times in seconds from the trace's start.

    ``start``: its first start (None: never started); ``end``: when it ended for good (None:
    still running or waiting when the replay stopped). ``gpus``: the GPUs it holds while it
    runs, all workers together, a shared GPU counted as its fraction. ``held``: GPU-seconds
    held over all its attempts; ``lost``: of those, the GPU-seconds whose work was thrown
    away (attempts preempted without resuming). ``estimates``: how many start estimates
    (``starts by``) it was shown while it waited; ``late``: how many of them it started
    after though no run submitted after the estimate started before it;
    ``overtaken``: how many it started after because later work went first. ``promises``:
    the estimates made while it was the head (its reason's "starts by"); ``broken``: those
    late. Each estimate is checked against the start that followed it (a preempted run
    waits for its next).
    """

    name: str
    submit: float
    start: float | None
    end: float | None
    state: str
    preemptions: int
    restarts: int
    priority: int
    workspace: str
    gpus: float
    duration: float
    held: float
    lost: float
    estimates: int = 0
    late: int = 0
    overtaken: int = 0
    starts: tuple[float, ...] = ()  # when each of its attempts started
    promises: int = 0  # of ``estimates``, those made while it was the head ("starts by")
    broken: int = 0  # of ``late``, those made while it was the head


@dataclass(frozen=True, slots=True)
class Calibration:
    """The learned start forecasts against the real starts: of ``forecasts`` (a waiting
    run's forecast at one moment, for runs that started), how many started by their 90 %
    forecast (``kept``); the median error of the likely (50 %) start, and of the time
    limits' bound ("starts by") over the ``bounds`` of those moments that had one."""

    forecasts: int
    kept: int
    likely_error: float
    bounds: int
    bound_error: float
    # the 95 % interval of the share kept, the runs drawn again with their forecasts (a
    # run's forecasts hour after hour rise and fall together: they are not independent)
    kept_interval: tuple[float, float] = (0.0, 0.0)
    # by the runs' priority, high to low: (priority, kept, forecasts); a class may miss
    # one way and another the other way while all together are in the band
    kept_by_priority: tuple[tuple[int, int, int], ...] = ()

    @property
    def kept_share(self) -> float:
        return self.kept / self.forecasts if self.forecasts else 0.0

    def kept_of(self, priority: int) -> tuple[int, int] | None:
        """The forecasts kept, and checked, of runs of ``priority`` (None: none checked)."""
        return next(((k, n) for p, k, n in self.kept_by_priority if p == priority), None)


@dataclass(frozen=True, slots=True)
class Waits:
    """How long one group of runs waited (all runs, a priority class or a workspace).

    A run's wait is its first start less its submit, in seconds; a run that never started
    counts with the wait it had when the replay ended (the replay's end less its submit), so
    ``p50``, ``p95`` and ``max`` are over every run of the group, started or not. Its bounded
    slowdown is ``max(1, (wait + duration) / max(duration, 10))``: a run shorter than ten
    seconds is measured as if it lasted ten. ``largest_wait``: the longest wait among the
    group's largest runs (those asking the most GPUs in the group), a sign of starvation.
    An empty group is all zeros.
    """

    runs: int
    started: int
    p50: float
    p95: float
    max: float
    slowdown_p50: float
    slowdown_p95: float
    largest_wait: float


@dataclass(frozen=True, slots=True)
class Summary:
    """One policy's replay, measured.

    ``gpus``: the machine's GPUs. ``span``: the makespan, from the first submit to the last
    end (to the replay's end while a run is unfinished). ``utilisation``: the GPU-seconds
    held over all attempts, over ``gpus * span``; ``offered``: the GPU-seconds the runs asked
    for (their GPUs times their durations in the trace), over the same. ``lost_gpu_hours``:
    the GPU-hours preemption threw away; ``lost_share``: those over all GPU-seconds held.
    ``late`` of ``estimates``: the start estimates shown that the runs started after with
    nothing submitted later ahead of them; ``overtaken``: those later work went before.
    ``unfinished``: runs without an end. ``by_priority`` is ordered high to low,
    ``by_workspace`` by name.
    """

    policy: str
    runs: int
    gpus: int
    span: float
    utilisation: float
    offered: float
    preemptions: int
    lost_gpu_hours: float
    lost_share: float
    late: int
    overtaken: int
    estimates: int
    promises: int
    broken: int
    calibration: Calibration | None
    unfinished: int
    all: Waits
    by_priority: dict[int, Waits]
    by_workspace: dict[str, Waits]


_FLOOR = 10.0
_NO_WAITS = Waits(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _nearest_rank(values: list[float], p: float) -> float:
    """The nearest-rank percentile ``p`` (0 to 1) of ``values``; 0 when there are none."""
    value = percentile(values, p)
    return 0.0 if value is None else value


def _ratio(part: float, whole: float) -> float:
    """``part / whole``, or 0 when ``whole`` is not positive."""
    return part / whole if whole > 0 else 0.0


def _replay_end(outcomes: Sequence[Outcome]) -> float:
    """The latest time any outcome mentions: a submit, a start or an end."""
    times = [o.submit for o in outcomes]
    times += [t for o in outcomes for t in (o.start, o.end) if t is not None]
    return max(times, default=0.0)


def _wait(o: Outcome, ended_at: float) -> float:
    """How long ``o`` waited: to its first start, or to the replay's end if it never started."""
    return max(0.0, (ended_at if o.start is None else o.start) - o.submit)


def _slowdown(wait: float, duration: float) -> float:
    """The bounded slowdown of a run that waited ``wait`` and ran ``duration`` seconds."""
    return max(1.0, (wait + duration) / max(duration, _FLOOR))


def _waits(group: Sequence[Outcome], ended_at: float) -> Waits:
    """The waits of one group of runs; zeros for none."""
    if not group:
        return _NO_WAITS
    waits = [_wait(o, ended_at) for o in group]
    slowdowns = [_slowdown(w, o.duration) for w, o in zip(waits, group, strict=True)]
    largest = max(o.gpus for o in group)
    return Waits(
        runs=len(group),
        started=sum(o.start is not None for o in group),
        p50=_nearest_rank(waits, 0.5),
        p95=_nearest_rank(waits, 0.95),
        max=max(waits),
        slowdown_p50=_nearest_rank(slowdowns, 0.5),
        slowdown_p95=_nearest_rank(slowdowns, 0.95),
        largest_wait=max(w for w, o in zip(waits, group, strict=True) if o.gpus == largest),
    )


def summarise(
    policy: str,
    outcomes: Sequence[Outcome],
    gpus: int,
    ended_at: float | None = None,
    calibration: Calibration | None = None,
) -> Summary:
    """Measure one policy's replay of ``outcomes`` on a machine of ``gpus`` GPUs.

    ``ended_at``: when the replay stopped, the end of the waits of runs that never started
    and of the makespan while runs are unfinished; by default the latest submit, start or
    end among the outcomes.
    """
    end = _replay_end(outcomes) if ended_at is None else ended_at
    unfinished = sum(o.end is None for o in outcomes)
    last = max((o.end for o in outcomes if o.end is not None), default=None)
    if unfinished:
        last = end if last is None else max(last, end)
    first = min((o.submit for o in outcomes), default=0.0)
    span = max(0.0, (first if last is None else last) - first)
    capacity = gpus * span
    held = sum(o.held for o in outcomes)
    lost = sum(o.lost for o in outcomes)
    priorities: dict[int, list[Outcome]] = {}
    workspaces: dict[str, list[Outcome]] = {}
    for o in outcomes:
        priorities.setdefault(o.priority, []).append(o)
        workspaces.setdefault(o.workspace, []).append(o)
    return Summary(
        policy=policy,
        runs=len(outcomes),
        gpus=gpus,
        span=span,
        utilisation=_ratio(held, capacity),
        offered=_ratio(sum(o.gpus * o.duration for o in outcomes), capacity),
        preemptions=sum(o.preemptions for o in outcomes),
        lost_gpu_hours=lost / 3600,
        lost_share=_ratio(lost, held),
        late=sum(o.late for o in outcomes),
        overtaken=sum(o.overtaken for o in outcomes),
        promises=sum(o.promises for o in outcomes),
        broken=sum(o.broken for o in outcomes),
        calibration=calibration,
        estimates=sum(o.estimates for o in outcomes),
        unfinished=unfinished,
        all=_waits(outcomes, end),
        by_priority={p: _waits(priorities[p], end) for p in sorted(priorities, reverse=True)},
        by_workspace={w: _waits(workspaces[w], end) for w in sorted(workspaces)},
    )


def _waits_json(waits: Waits) -> dict[str, object]:
    """One group's waits as JSON, in seconds."""
    return {
        "runs": waits.runs,
        "started": waits.started,
        "wait_p50": waits.p50,
        "wait_p95": waits.p95,
        "wait_max": waits.max,
        "slowdown_p50": waits.slowdown_p50,
        "slowdown_p95": waits.slowdown_p95,
        "largest_wait": waits.largest_wait,
    }


def summary_json(summary: Summary) -> dict[str, object]:
    """A summary as plain JSON: numbers (seconds for times), with ``by_priority`` keyed by
    the priority as a string (high to low) and ``by_workspace`` by name."""
    return {
        "policy": summary.policy,
        "runs": summary.runs,
        "gpus": summary.gpus,
        "span": summary.span,
        "utilisation": summary.utilisation,
        "offered": summary.offered,
        "preemptions": summary.preemptions,
        "lost_gpu_hours": summary.lost_gpu_hours,
        "lost_share": summary.lost_share,
        "late": summary.late,
        "overtaken": summary.overtaken,
        "promises": summary.promises,
        "broken": summary.broken,
        "forecasts": None
        if summary.calibration is None
        else {
            "forecasts": summary.calibration.forecasts,
            "kept_p90": summary.calibration.kept,
            "likely_error": summary.calibration.likely_error,
            "bounds": summary.calibration.bounds,
            "bound_error": summary.calibration.bound_error,
            "kept_p90_interval": list(summary.calibration.kept_interval),
            "kept_p90_by_priority": {
                str(p): [k, n] for p, k, n in summary.calibration.kept_by_priority
            },
        },
        "estimates": summary.estimates,
        "unfinished": summary.unfinished,
        "all": _waits_json(summary.all),
        "by_priority": {
            str(p): _waits_json(summary.by_priority[p])
            for p in sorted(summary.by_priority, reverse=True)
        },
        "by_workspace": {
            w: _waits_json(summary.by_workspace[w]) for w in sorted(summary.by_workspace)
        },
    }


def outcome_json(o: Outcome) -> dict[str, object]:
    """One run's outcome as a line of ``--runs``' NDJSON; times in seconds from the trace's
    start, ``start`` and ``end`` null when it never started or never ended."""
    return {
        "name": o.name,
        "submit": o.submit,
        "start": o.start,
        "end": o.end,
        "preemptions": o.preemptions,
        "restarts": o.restarts,
        "state": o.state,
        "priority": o.priority,
        "workspace": o.workspace,
        "gpus": o.gpus,
        "duration": o.duration,
        "held": o.held,
        "lost": o.lost,
        "estimates": o.estimates,
        "late": o.late,
        "overtaken": o.overtaken,
        "promises": o.promises,
        "broken": o.broken,
        "starts": list(o.starts),
    }


def _kept(c: Calibration | None) -> str:
    if c is None or not c.forecasts:
        return "-"
    low, high = c.kept_interval
    return f"{_percent(c.kept_share)} of {c.forecasts} ({_percent(low)}-{_percent(high)})"


def _kept_of(c: Calibration | None, priority: int) -> str:
    found = None if c is None else c.kept_of(priority)
    return "-" if found is None else f"{_percent(found[0] / found[1])} of {found[1]}"


def _error(c: Calibration | None, likely: bool) -> str:
    if c is None or not (c.forecasts if likely else c.bounds):
        return "-"
    return compact(c.likely_error if likely else c.bound_error)


def _percent(share: float) -> str:
    """A share as a percentage with one decimal."""
    return f"{share * 100:.1f}%"


def _waits_p95(waits: Waits | None) -> str:
    """A group's 95th-percentile wait as a table cell; ``-`` when the policy has no such group."""
    return "-" if waits is None else compact(waits.p95)


def _rows(summaries: Sequence[Summary]) -> list[tuple[str, list[str]]]:
    """The table's rows: a label and one cell per summary."""

    def row(label: str, cell: Callable[[Summary], str]) -> tuple[str, list[str]]:
        return label, [cell(s) for s in summaries]

    rows = [
        row("policy", lambda s: s.policy),
        row("runs", lambda s: str(s.runs)),
        row("utilisation", lambda s: _percent(s.utilisation)),
        row("offered load", lambda s: _percent(s.offered)),
        row("makespan", lambda s: compact(s.span)),
        row("wait p50", lambda s: compact(s.all.p50)),
        row("wait p95", lambda s: compact(s.all.p95)),
        row("wait max", lambda s: compact(s.all.max)),
        row("slowdown p50", lambda s: f"{s.all.slowdown_p50:.1f}"),
        row("slowdown p95", lambda s: f"{s.all.slowdown_p95:.1f}"),
        row("largest runs' longest wait", lambda s: compact(s.all.largest_wait)),
        row("preemptions", lambda s: str(s.preemptions)),
        row("lost GPU-h", lambda s: f"{s.lost_gpu_hours:.1f} ({_percent(s.lost_share)})"),
        row(
            "head's promise broken", lambda s: f"{s.broken} of {s.promises}" if s.estimates else "-"
        ),
        row("estimates late", lambda s: f"{s.late} of {s.estimates}" if s.estimates else "-"),
        row("  overtaken by later work", lambda s: f"{s.overtaken}" if s.estimates else "-"),
        row("started by the 90% forecast", lambda s: _kept(s.calibration)),
    ]
    kept_priorities = sorted(
        {p for s in summaries if s.calibration for p, *_ in s.calibration.kept_by_priority},
        reverse=True,
    )
    rows += [
        (f"  prio {p}", [_kept_of(s.calibration, p) for s in summaries]) for p in kept_priorities
    ]
    rows += [
        row("  likely start's error (p50)", lambda s: _error(s.calibration, True)),
        row("  the bound's error (p50)", lambda s: _error(s.calibration, False)),
        row("unfinished", lambda s: str(s.unfinished)),
    ]
    priorities = sorted({p for s in summaries for p in s.by_priority}, reverse=True)
    rows += [
        (f"prio {p} wait p95", [_waits_p95(s.by_priority.get(p)) for s in summaries])
        for p in priorities
    ]
    workspaces = sorted({w for s in summaries for w in s.by_workspace})
    rows += [
        (f"ws {w} wait p95", [_waits_p95(s.by_workspace.get(w)) for s in summaries])
        for w in workspaces
    ]
    return rows


def render_table(summaries: Sequence[Summary]) -> str:
    """The summaries side by side as plain text: a label column, then one right-aligned
    column per policy; times as ``3h20m``, shares as percentages. Empty for none."""
    if not summaries:
        return ""
    rows = _rows(summaries)
    label_width = max(len(label) for label, _ in rows)
    widths = [max(len(cells[i]) for _, cells in rows) for i in range(len(summaries))]
    lines = [
        "  ".join(
            [label.ljust(label_width), *(c.rjust(w) for c, w in zip(cells, widths, strict=True))]
        )
        for label, cells in rows
    ]
    return "\n".join(line.rstrip() for line in lines)
