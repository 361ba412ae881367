"""When things happen, as the faces say it: ISO times, UTC clocks, a waiting run's start
(and where: the GPUs a run is on).

Plain strings, no Rich: the dashboard's widgets and the CLI's plain tables share them.
"""

from __future__ import annotations

import math
import time

from runner.durations import compact, minute
from runner.states import RunState

# what a run's start from the limits says once its 90 % start is later: behind the head
# it is no promise (runs submitted later may pass it); docs/scheduling.md, "Start estimates"
UNLESS_URGENT = "if no more urgent run is submitted"

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from runner.schema import Run

DAY = 86400


def no_history(learned: object, needs: object) -> str:
    """What a forecast says before the daemon has learned enough finished runs for one
    (``learned_from`` and ``forecast_needs`` of the wire): ``no history yet (2 of 5
    finished runs)``; empty once there is enough, or where neither was said."""
    if not isinstance(needs, int) or not needs:
        return ""
    return f"no history yet ({learned if isinstance(learned, int) else 0} of {needs} finished runs)"


def epoch(iso: str | None) -> float | None:
    """ISO 8601 (``2026-10-01T12:00:00Z``) to seconds since the epoch.

    The daemon's own form (``YYYY-MM-DDTHH:MM:SSZ``) is read here, as
    ``datetime.fromisoformat`` reads it (a queue of 10,000 has 30,000 of them, and a
    plain command then need not import datetime); any other form by datetime itself."""
    if not iso:
        return None
    if len(iso) == 20 and iso[19] == "Z" and iso[10] == "T":
        at = _daemon_iso(iso)
        if at is not None:
            return at
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _daemon_iso(iso: str) -> float | None:
    """``YYYY-MM-DDTHH:MM:SSZ`` (a valid date and time) as epoch seconds, else None."""
    if iso[4] != "-" or iso[7] != "-" or iso[13] != ":" or iso[16] != ":":
        return None
    digits = iso[0:4] + iso[5:7] + iso[8:10] + iso[11:13] + iso[14:16] + iso[17:19]
    if not (digits.isascii() and digits.isdigit()):
        return None
    y, mo, d = int(digits[0:4]), int(digits[4:6]), int(digits[6:8])
    h, mi, s = int(digits[8:10]), int(digits[10:12]), int(digits[12:14])
    if not (y >= 1 and 1 <= mo <= 12 and d >= 1 and h < 24 and mi < 60 and s < 60):
        return None
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    if d > _MONTH_DAYS[mo - 1] + (1 if mo == 2 and leap else 0):
        return None
    y -= mo <= 2  # days from 1970-01-01 to y-mo-d (the proleptic Gregorian calendar)
    era = y // 400
    year_of_era = y - era * 400
    day_of_year = (153 * (mo + (-3 if mo > 2 else 9)) + 2) // 5 + d - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    days = era * 146097 + day_of_era - 719468
    return float(days * 86400 + h * 3600 + mi * 60 + s)


def utc_struct(t: float) -> time.struct_time:
    """``t``'s UTC calendar fields, its seconds as ``datetime.fromtimestamp`` rounds them
    (to the microsecond, half to even)."""
    whole = math.floor(t)
    if round((t - whole) * 1e6) >= 1_000_000:
        whole += 1
    return time.gmtime(whole)


def utc_clock(t: float, seconds: bool = True, *, nearest: bool = False) -> str:
    """``14:03:07``; without seconds rounded *up* to the minute, as the planner says it
    (``nearest``: to the nearest minute, as a likely start is said)."""
    if not seconds:
        t = minute(t, nearest=nearest)
    return time.strftime("%H:%M:%S" if seconds else "%H:%M", utc_struct(t))


def start_label(run: Run, now: float, wide: bool = False) -> str:
    """When a waiting run starts, as the queue's tables say it (docs/scheduling.md,
    "Start estimates").

    ``~14:10``: its likely start, forecast from the lengths of finished runs (to the
    nearest minute), once there is one; else ``14:20``, its start if running work takes
    its whole limits (rounded up to the minute as the planner says it; only the head's is
    a promise). ``10-02 09:00`` on another day (UTC); ``?`` when there is neither (work
    without a time limit is in the way), and nothing for a run that does not wait, or is
    held (it starts only once released). A failed run waiting for its restart back-off:
    the time it may start again, to the second.

    ``wide`` (``astra ls --wide``): a forecast's 90 % start and the start from the limits
    after the likely one, ``~14:10 ≤15:30 (90%) limits 15:31``.
    """
    if run.state != RunState.QUEUED or run.held:
        return ""
    if (again := restarts_at(run)) is not None:
        return utc_clock(again)
    likely = run.likely_start
    bound = epoch(run.starts_by)
    if isinstance(likely, str) and (at := epoch(likely)) is not None:
        label = "~" + day_clock(at, now, nearest=True)
        if not wide:
            return label
        high = run.likely_start_90
        if isinstance(high, str) and (by := epoch(high)) is not None:
            label += f" ≤{day_clock(by, now)} (90%)"
        if bound is not None:
            label += f" limits {day_clock(bound, now)}"
        return label
    if bound is None:
        return "?"
    return day_clock(bound, now)


def restarts_at(run: Run) -> float | None:
    """When a failed run waiting for its restart back-off starts again (its
    ``restart_at``); None for any other run. The START column and the timeline say it."""
    again = run.restart_at
    return epoch(again) if isinstance(again, str) else None


def day_clock(at: float, now: float, *, nearest: bool = False) -> str:
    """``14:20`` on ``now``'s day, ``10-02 09:00`` on another (UTC): to the minute, rounded
    up (``nearest``: to the nearest), and the day that minute is on. An estimate as the
    START column, the banner and the run's page say it."""
    at = minute(at, nearest=nearest)
    clock = utc_clock(at, seconds=False)
    if at // DAY == now // DAY:
        return clock
    return time.strftime("%m-%d ", utc_struct(at)) + clock


def idle_label(run: Run, now: float) -> str:
    """``idle 25m`` for a run whose GPUs are marked idle (its ``idle_since``), else ``""``."""
    since = run.idle_since
    t = epoch(since) if isinstance(since, str) else None
    return "" if t is None else f"idle {compact(now - t)}"


def on_gpus(indices: list[int] | tuple[int, ...] | None) -> str:
    """Where a run runs, or would start: ``on GPU 0``, ``on GPUs 0,1``, ``on no GPU``."""
    if not indices:
        return "on no GPU"
    listed = ",".join(map(str, indices))
    return f"on GPU {listed}" if len(indices) == 1 else f"on GPUs {listed}"
