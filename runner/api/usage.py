"""The API's accounting: ``GET /v1/usage`` and ``GET /v1/history``.

What finished runs used, read from the usage records that outlive the runs
(runner/store/usage.py); who sees what is the service's (runner/service/usage.py).
"""

from __future__ import annotations

import asyncio

import msgspec
from aiohttp import web

from runner.api.context import daemon_of, peer_caller
from runner.api.views import iso
from runner.rows import UsageRecord
from runner.schema import UNSET, History, HistoryEntry, Usage, UsageRow
from runner.service.caller import ServiceError
from runner.service.usage import UsageTotals, percentile

_HOURS = 3600.0


def _hours(seconds: float) -> float:
    return round(seconds / _HOURS, 6)


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def usage_row(t: UsageTotals) -> UsageRow:
    return UsageRow(
        workspace=t.workspace, user=t.user, visible=t.visible, runs=t.runs,
        outcomes=dict(t.outcomes), gpu_hours=_hours(t.gpu_seconds),
        core_hours=_hours(t.cpu_seconds), preemptions=t.preemptions, restarts=t.restarts,
        wait_p50_seconds=_seconds(percentile(t.waits, 0.50)),
        wait_p95_seconds=_seconds(percentile(t.waits, 0.95)),
        daily_gpu_hours=UNSET if t.daily is None else [_hours(d) for d in t.daily],
    )  # fmt: skip


def history_entry(r: UsageRecord) -> HistoryEntry:
    elapsed = None if r.started_at is None else max(0.0, r.finished_at - r.started_at)
    return HistoryEntry(
        uid=r.run_uid, name=r.run, workspace=r.workspace, owner=r.owner, outcome=r.outcome,
        exit_code=r.exit_code, submitted_at=iso(r.submitted_at), started_at=iso(r.started_at),
        finished_at=iso(r.finished_at), elapsed_seconds=_seconds(elapsed),
        wait_seconds=_seconds(r.wait_seconds), gpus=r.gpus, gpu_hours=_hours(r.gpu_seconds),
        core_hours=_hours(r.cpu_seconds), preemptions=r.preemptions, restarts=r.restarts,
        priority=r.priority, time_limit_seconds=r.time_limit_seconds, workers=r.workers,
        gpu_memory_bytes=r.gpu_memory, cpus=r.cpus, memory_bytes=r.memory,
        run_seconds=_seconds(r.run_seconds),
    )  # fmt: skip


def _json(value: object) -> web.Response:
    return web.Response(body=msgspec.json.encode(value), content_type="application/json")


async def usage(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    since, by = request.query.get("since"), request.query.get("by")
    daily = request.query.get("daily", "0") not in ("", "0", "false")
    names = sorted(daemon.config.workspaces)
    report = await asyncio.to_thread(daemon.service.usage_report, caller, since, by, names, daily)
    return _json(Usage(
        since=iso(report.since), until=iso(report.until), by=report.by,
        rows=[usage_row(t) for t in report.rows], total=usage_row(report.total),
    ))  # fmt: skip


def _limit(text: str | None) -> int | None:
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 6:
        raise ServiceError(400, "BAD_REQUEST", "limit: must be a whole number")
    return int(text)


async def history_route(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    q = request.query
    since, workspace, limit = q.get("since"), q.get("workspace"), _limit(q.get("limit"))
    start, records = await asyncio.to_thread(
        daemon.service.history, caller, since, workspace, limit
    )
    return _json(History(since=iso(start), runs=[history_entry(r) for r in records]))


def add_usage_routes(app: web.Application) -> None:
    app.router.add_get("/v1/usage", usage)
    app.router.add_get("/v1/history", history_route)
