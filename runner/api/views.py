"""The JSON objects of docs/api.md, rendered for one viewer through runner/schema.py.

Another workspace's run is never named to a member: its name reads
``a job in another namespace`` and its owner is hidden; its events are not shown.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from runner import schema
from runner.clock import iso as iso  # the wire's times (other API modules take it from here)
from runner.model import Estimate, RunSpec, RunState, WorkerState
from runner.reasons import ANONYMOUS_RUN, HELD_ANONYMOUS, ReasonCode, Viewer
from runner.rows import EventRow, GroupRow, RunRow, WorkerRow
from runner.shown import Shown

PAUSED = "Paused to make room for higher-priority work"
PRIVATE_REASON = "details are private"  # an error of a run in another workspace
_SECRET = secrets.token_bytes(16)  # per daemon: hidden runs get ids no one can reverse


def run_id(name: str, workspace: str, viewer: Viewer) -> str:
    """A stable key for a run in lists and streams; opaque when the name is hidden."""
    if viewer.sees(workspace):
        return name
    digest = hmac.new(_SECRET, f"{workspace}/{name}".encode(), hashlib.sha256).hexdigest()
    return "hidden-" + digest[:16]


def run_object(
    run: RunRow,
    spec: RunSpec,
    viewer: Viewer,
    shown: Shown,
    live: Iterable[WorkerRow] = (),
    now: float | None = None,
    estimate: Estimate | None = None,
    idle_since: float | None = None,
) -> dict[str, Any]:
    """One run as ``--json`` prints it and the API returns it (``run_view``'s JSON)."""
    obj: dict[str, Any] = msgspec.to_builtins(
        run_view(run, spec, viewer, shown, live, now, estimate, idle_since=idle_since)
    )
    return obj


def run_views(
    runs: Iterable[RunRow],
    spec_of: Callable[[RunRow], RunSpec],
    viewer: Viewer,
    shown: Shown,
    live: Mapping[str, Sequence[WorkerRow]],
    now: float | None,
    estimates: Mapping[str, Estimate],
    idle: Mapping[str, float] | None = None,
) -> list[schema.Run]:
    """Many runs for one viewer (the queue's list): each as ``run_view`` makes it, a
    reason the runs share (the queue's "Queued behind …") rendered once. ``idle``: the
    runs marked idle, by uid (runner/engine/idle.py)."""
    rendered: dict[tuple[int, bool], str | None] = {}
    idle = idle or {}
    return [
        run_view(r, spec_of(r), viewer, shown, live.get(r.name, ()), now,
                 estimates.get(r.name), rendered, idle.get(r.run_uid))
        for r in runs
    ]  # fmt: skip


def run_view(
    run: RunRow,
    spec: RunSpec,
    viewer: Viewer,
    shown: Shown,
    live: Iterable[WorkerRow] = (),
    now: float | None = None,
    estimate: Estimate | None = None,
    rendered: dict[tuple[int, bool], str | None] | None = None,
    idle_since: float | None = None,
) -> schema.Run:
    """One run for ``viewer``. ``starts_by``: the head's shadow time, else the estimate
    when there is one. ``rendered``: reasons already rendered for ``viewer``, by the
    reason's identity (``run_views``; the rows, and so their reasons, outlive it).
    ``idle_since``: since when its GPUs are idle (wall clock), once it is marked so."""
    visible = viewer.sees(run.workspace)
    if rendered is None:
        reason = _reason(run, viewer, visible)
    else:
        key = (id(run.reason), visible)
        if key not in rendered:
            rendered[key] = _reason(run, viewer, visible)
        reason = rendered[key]
    live = [w for w in live if w.state in WorkerState.LIVE]
    stopping, grace_left, deadline = _stopping(live, now)
    request = spec.worker_resources()
    return schema.Run(
        id=run_id(run.name, run.workspace, viewer),
        uid=run.run_uid if visible else None,  # immutable; not the owner's Unix uid
        name=run.name if visible else ANONYMOUS_RUN,
        visible=visible,
        workspace=run.workspace,
        owner=run.owner if visible else None,
        priority=run.priority,
        state=run.state,
        reason=reason,
        reason_code=None if run.reason is None else run.reason.code.value,
        backfilled=run.backfilled,
        paused=PAUSED if run.preempted_by is not None and run.state == RunState.QUEUED else None,
        gpus=sorted(g for w in live for g in w.gpus),
        gpus_requested=spec.task.gpus * spec.workers,
        cpu_cores_requested=request.cpu_milli * spec.workers / 1000,
        memory_requested=request.memory * spec.workers,
        workers=spec.workers,
        workers_live=len(live),
        gang=spec.gang,
        restarts=run.restarts,
        restart_limit=spec.restart_limit,
        preemptions=run.preemptions,
        submitted_at=iso(run.submitted_at),
        started_at=iso(run.started_at),
        finished_at=iso(run.finished_at),
        exit_code=run.exit_code,
        time_limit_seconds=spec.task.time_limit_seconds,
        starts_by=_starts_by(run, shown, estimate),
        **_forecast(run, estimate if visible else None),
        head=shown.is_head(run.name) and run.state == RunState.QUEUED,  # not a partly running run
        position=shown.positions.get(run.name),
        gpu_memory_bytes=spec.task.gpu_share or schema.UNSET,
        stop_grace_left_seconds=grace_left,
        stop_deadline=iso(deadline),
        stopping_for=_stopping_for(stopping, viewer),
        group=run.grp if visible else None,
        after=list(spec.after) if visible else [],
        held=run.held_by is not None and run.state not in RunState.FINISHED,
        begin_at=iso(spec.begin_at),
        idle_since=schema.UNSET if idle_since is None or not live else iso(idle_since) or "",
        restart_at=_restart_at(run, now),
    )


def _restart_at(run: RunRow, now: float | None) -> str | schema.UnsetType:
    """The end of its restart back-off, while it is ahead (the loop measures it on the
    monotonic clock: runner/engine/holds.py)."""
    at = run.restart_at
    if at is None or run.state in RunState.FINISHED or run.stop_request is not None:
        return schema.UNSET
    if now is not None and at <= now:
        return schema.UNSET
    return iso(at) or schema.UNSET


def _stopping(
    live: list[WorkerRow], now: float | None
) -> tuple[list[WorkerRow], float | None, float | None]:
    """The workers stopping with a deadline, the grace left to them and their deadline."""
    stopping = [w for w in live if w.state == WorkerState.STOPPING and w.stop_deadline is not None]
    if not stopping:
        return stopping, None, None
    deadline = max(w.stop_deadline or 0 for w in stopping)
    return stopping, None if now is None else max(0.0, deadline - now), deadline


def _starts_by(run: RunRow, shown: Shown, estimate: Estimate | None) -> str | None:
    if shown.head is not None and shown.head.run == run.name:
        starts_by = iso(shown.head.shadow)
        if starts_by is not None:
            return starts_by
    if estimate is not None and run.state == RunState.QUEUED:
        return iso(estimate.starts_by)
    return None


def _forecast(run: RunRow, estimate: Estimate | None) -> dict[str, Any]:
    """A waiting run's forecasts, when there are any; before there is history enough for
    one, how many finished runs there are and how many a forecast needs (else the fields
    stay absent)."""
    if estimate is None or run.state != RunState.QUEUED:
        return {}
    if estimate.likely is None:
        if not estimate.forecast_needs:
            return {}
        return {"learned_from": estimate.learned_from, "forecast_needs": estimate.forecast_needs}
    return {
        "likely_start": iso(estimate.likely) or schema.UNSET,
        "likely_start_90": iso(estimate.likely_by) or schema.UNSET,
        "learned_from": estimate.learned_from,
    }


def _reason(run: RunRow, viewer: Viewer, visible: bool) -> str | None:
    """The run's reason for ``viewer``: an error's details stay in the run's workspace."""
    if run.reason is None:
        return None
    if not visible and run.reason.code is ReasonCode.HELD:  # who holds it is the workspace's
        return HELD_ANONYMOUS
    return run.reason.render(viewer) if visible or not run.reason.private else PRIVATE_REASON


def _stopping_for(stopping: list[WorkerRow], viewer: Viewer) -> str | None:
    for w in stopping:
        if w.stopping_for is not None:
            ref = w.stopping_for
            return ref.name if viewer.sees(ref.workspace) else ANONYMOUS_RUN
    return None


def worker_object(w: WorkerRow, viewer: Viewer) -> dict[str, Any]:
    """One worker of one attempt (``worker_view``'s JSON)."""
    obj: dict[str, Any] = msgspec.to_builtins(worker_view(w, viewer))
    return obj


def worker_view(w: WorkerRow, viewer: Viewer) -> schema.Worker:
    """One worker of one attempt; whom a preemption stopped it for, named only to its members."""
    return schema.Worker(
        attempt=w.attempt,
        worker=w.worker,
        state=w.state,
        gpus=list(w.gpus),
        started_at=iso(w.started_at),
        finished_at=iso(w.finished_at),
        exit_code=w.exit_code,
        error=w.error,
        stop_reason=w.stop_reason,
        stopping_for=_stopping_for([w], viewer),
        killed=w.killed,
    )


def group_object(g: GroupRow, runs: Iterable[RunRow]) -> dict[str, Any]:
    """A sweep, replica group or schedule as ``--json`` prints it (``group_view``'s JSON)."""
    obj: dict[str, Any] = msgspec.to_builtins(group_view(g, runs))
    return obj


def group_view(g: GroupRow, runs: Iterable[RunRow]) -> schema.Group:
    """A sweep, replica group or schedule, its runs counted by state.

    Only members (and admins) are shown groups: nothing here is anonymised."""
    doc = g.document()
    template = doc["template"]["spec"]
    counts: dict[str, int] = {}
    names = []
    for r in runs:
        counts[r.state] = counts.get(r.state, 0) + 1
        names.append(r.name)
    group = schema.Group(
        name=g.name, kind=g.kind, workspace=g.workspace, owner=g.owner,
        created_at=iso(g.created_at), priority=template.get("priority", 0), runs=names,
        states=counts,
    )  # fmt: skip
    if g.kind == "sweep":
        return msgspec.structs.replace(group, size=len(doc["list"]), params=doc["list"])
    if g.kind == "replicas":
        return msgspec.structs.replace(
            group, replicas=g.replicas, running=counts.get(RunState.RUNNING, 0)
        )
    return msgspec.structs.replace(
        group, cron=doc["cron"], policy=doc["policy"], paused=g.paused,
        next_at=None if g.paused else iso(g.next_at), last_fired_at=iso(g.last_fired_at),
    )  # fmt: skip


def event_object(e: EventRow, viewer: Viewer) -> dict[str, Any]:
    """One event as the event log sends it (``event_view``'s JSON)."""
    obj: dict[str, Any] = msgspec.to_builtins(event_view(e, viewer))
    return obj


def event_view(e: EventRow, viewer: Viewer) -> schema.Event:
    visible = viewer.sees(e.workspace)
    return schema.Event(
        id=e.id,
        run=e.run if visible else ANONYMOUS_RUN,
        group=e.grp if visible else None,
        workspace=e.workspace,
        time=iso(e.time),
        kind=e.kind,
        message=e.message.render(viewer),
        code=e.code.value,
    )
