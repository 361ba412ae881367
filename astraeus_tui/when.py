"""When things happen, as the faces say it: ISO times, UTC clocks, a waiting run's start.

Plain strings, no Rich: the dashboard's widgets and the CLI's plain tables share them.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from runner.states import RunState

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from runner.schema import Run

DAY = 86400


def epoch(iso: str | None) -> float | None:
    """ISO 8601 (``2026-10-01T12:00:00Z``) to seconds since the epoch."""
    if not iso:
        return None
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def utc_clock(t: float, seconds: bool = True) -> str:
    """``14:03:07``; without seconds rounded *up* to the minute, as the planner says it."""
    if not seconds:
        t = math.ceil(t / 60) * 60
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S" if seconds else "%H:%M")


def start_label(run: Run, now: float) -> str:
    """When a waiting run starts at the latest, as the queue's tables say it.

    ``14:20`` today, ``10-02 09:00`` on another day (UTC, rounded up to the minute
    as the planner says it), ``?`` when there is no estimate (work without a time
    limit is in the way), and nothing for a run that does not wait, or is held (it starts
    only once released).
    """
    if run.state != RunState.QUEUED or run.held:
        return ""
    at = epoch(run.starts_by)
    if at is None:
        return "?"
    at = math.ceil(at / 60) * 60
    clock = utc_clock(at, seconds=False)
    if at // DAY == now // DAY:
        return clock
    return datetime.fromtimestamp(at, UTC).strftime("%m-%d ") + clock


def short_span(seconds: float) -> str:
    """``45s``, ``25m``, ``1h05m``, ``2d3h``: as the daemon's idle events say it."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < DAY:
        h, m = divmod(s // 60, 60)
        return f"{h}h{m:02d}m" if m else f"{h}h"
    d, h = divmod(s // 3600, 24)
    return f"{d}d{h}h" if h else f"{d}d"


def idle_label(run: Run, now: float) -> str:
    """``idle 25m`` for a run whose GPUs are marked idle (its ``idle_since``), else ``""``."""
    since = run.idle_since
    t = epoch(since) if isinstance(since, str) else None
    return "" if t is None else f"idle {short_span(now - t)}"
