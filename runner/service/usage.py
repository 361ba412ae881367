"""Usage and history: what finished runs used, and who may read which of it.

Read from the usage records (runner/store/usage.py), one per finished run, kept after
``[machine] finished_retention`` forgets the run, for USAGE_KEPT. The rules
(docs/lab-server.md, "Usage and history"):

- ``by=workspace``: every workspace's totals, named, for everyone (as ``GET /v1/workspaces``
  already shows each workspace's GPU-seconds to everyone);
- ``by=user``: one row per user and workspace for the caller's own workspaces; what was
  used in the others is one row without a workspace or user ("other workspaces"). Admins:
  every row;
- history lists the finished runs of the caller's workspaces only (admins: all); another
  workspace's runs are not listed at all, and naming another workspace is 403.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from runner.durations import unit_seconds
from runner.model import RunState
from runner.service.caller import Caller, ServiceError
from runner.store.db import Store, UsageRecord
from runner.store.usage import MAX_HISTORY, USAGE_KEPT, UsageSum

DEFAULT_SINCE = "7d"
BY = ("workspace", "user")
HISTORY_LIMIT = 1000  # finished runs one history answer lists unless asked for more
OUTCOMES = (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED)
MAX_DAYS = 31  # days ``daily`` splits a window into at most
HISTORY_PRIVATE = "a workspace the caller is not a member of: its history is private"
_DURATION = re.compile(r"\d+(?:\.\d+)?[smhdw](?:\d+(?:\.\d+)?[smhdw])*")
_MAX_TEXT = 64  # characters of a since= value read at most


def since_time(text: str | None, now: float) -> float:
    """The wall time ``since`` names: a span back from ``now`` (``7d``, ``12h``, ``90m``,
    ``2w``) or a UTC date or time (``2026-10-01``, ``2026-10-01T12:00``, with ``Z`` or an
    offset). 400 BAD_REQUEST otherwise. Never before what the records keep."""
    value = (text or DEFAULT_SINCE).strip()
    if len(value) > _MAX_TEXT:
        raise ServiceError(400, "BAD_REQUEST", "since: too long")
    if _DURATION.fullmatch(value.lower()):
        return max(now - unit_seconds(value), now - USAGE_KEPT)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ServiceError(
            400, "BAD_REQUEST",
            f"since: {value!r} is neither a span (7d, 12h, 90m) nor a UTC date or time"
            " (2026-10-01, 2026-10-01T12:00)",
        ) from None  # fmt: skip
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(when.timestamp(), now - USAGE_KEPT)


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile (the smallest value with ``p`` of them at or below it)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


@dataclass
class UsageTotals:
    """What one row of ``astra usage`` adds up. ``workspace`` and ``user`` None: the
    other workspaces together (by user, for a member)."""

    workspace: str | None
    user: str | None = None
    visible: bool = True
    runs: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: {s.lower(): 0 for s in OUTCOMES})
    gpu_seconds: float = 0.0
    cpu_seconds: float = 0.0
    preemptions: int = 0
    restarts: int = 0
    waits: list[float] = field(default_factory=list)
    daily: list[float] | None = None  # GPU-seconds a day, oldest first (when asked for)

    def add(self, r: UsageSum) -> None:
        self.runs += r.runs
        key = r.outcome.lower()
        self.outcomes[key] = self.outcomes.get(key, 0) + r.runs
        self.gpu_seconds += r.gpu_seconds
        self.cpu_seconds += r.cpu_seconds
        self.preemptions += r.preemptions
        self.restarts += r.restarts


@dataclass(frozen=True)
class UsageReport:
    since: float
    until: float
    by: str
    rows: list[UsageTotals]
    total: UsageTotals


def _visible(caller: Caller) -> frozenset[str] | None:
    return None if caller.admin else caller.workspaces


def usage_report(
    store: Store, caller: Caller, since: str | None = None, by: str | None = None,
    workspaces: Iterable[str] = (), now: float | None = None, daily: bool = False,
) -> UsageReport:  # fmt: skip
    """The usage of runs finished since ``since``, one row per workspace or per user, with
    the rules above; ``workspaces``: the config's, listed even when they used nothing.
    ``daily``: each row's GPU-seconds per 24 hours too, oldest first, the last ending now
    (a window of at most MAX_DAYS days)."""
    by = by or "workspace"
    if by not in BY:
        raise ServiceError(400, "BAD_REQUEST", f"by: must be one of {', '.join(BY)}")
    now = time.time() if now is None else now
    start = since_time(since, now)
    seen = _visible(caller)
    rows: dict[tuple[str | None, str | None], UsageTotals] = {}
    if by == "workspace":
        for name in workspaces:
            rows[(name, None)] = UsageTotals(name)
    total = UsageTotals(None, visible=False)

    def row(workspace: str, owner: str) -> UsageTotals:
        if by == "workspace":
            key: tuple[str | None, str | None] = (workspace, None)
        elif seen is None or workspace in seen:
            key = (workspace, owner)
        else:
            key = (None, None)  # the other workspaces, together: neither named
        if key not in rows:
            rows[key] = UsageTotals(key[0], key[1], visible=key[0] is not None)
        return rows[key]

    for s in store.usage.sums(start):
        total.add(s)
        row(s.workspace, s.owner).add(s)
    for workspace, owner, wait in store.usage.waits(start):
        total.waits.append(wait)
        row(workspace, owner).waits.append(wait)
    if daily:
        days = max(1, math.ceil((now - start) / 86400 - 1e-9))
        if days > MAX_DAYS:
            raise ServiceError(400, "BAD_REQUEST", f"daily: for at most {MAX_DAYS} days")
        for t in (total, *rows.values()):
            t.daily = [0.0] * days
        for workspace, owner, day, gpu_s in store.usage.daily(start, now):
            for t in (total, row(workspace, owner)):
                assert t.daily is not None
                t.daily[days - 1 - min(day, days - 1)] += gpu_s
    ordered = sorted(rows.values(), key=lambda t: (t.workspace is None, t.workspace or "",
                                                   t.user or ""))  # fmt: skip
    return UsageReport(start, now, by, ordered, total)


def history(
    store: Store, caller: Caller, since: str | None = None, workspace: str | None = None,
    limit: int | None = None, now: float | None = None,
) -> tuple[float, list[UsageRecord]]:  # fmt: skip
    """The time ``since`` names, and the runs finished since (oldest first, the newest
    ``limit``) of the caller's workspaces, or of ``workspace`` (403 unless the caller is a
    member or an admin)."""
    now = time.time() if now is None else now
    start = since_time(since, now)
    count = HISTORY_LIMIT if limit is None else limit
    if not 1 <= count <= MAX_HISTORY:
        raise ServiceError(400, "BAD_REQUEST", f"limit: must be from 1 to {MAX_HISTORY}")
    seen = _visible(caller)
    if workspace is not None:
        if seen is not None and workspace not in seen:
            raise ServiceError(403, "FORBIDDEN", HISTORY_PRIVATE)
        seen = frozenset({workspace})
    return start, store.usage.records(start, seen, count)
