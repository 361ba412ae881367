"""Begin times: the calendar time before which a run does not join the queue's order.

A begin time is a point on the wall clock (``2026-12-02T03:00``), not an interval, so
it is kept as seconds since the epoch and compared with the wall clock. The forms read:

- a spec's ``spec.begin_at``: ISO 8601, read as UTC unless it carries an offset
  (``2026-12-02T03:00``, ``2026-12-02T03:00:00Z``, ``2026-12-02T05:00+02:00``);
- ``astra run --begin``: the same, or ``+DURATION`` from now (``+2h``, ``+90m``);
- ``#SBATCH --begin=``: Slurm's ``now+N[seconds|minutes|hours|days|weeks]``,
  ``HH:MM[:SS]`` (today in UTC, tomorrow once that time has passed), and
  ``YYYY-MM-DD[THH:MM[:SS]]``. Slurm's other forms (``midnight``, ``teatime``,
  ``MM/DD/YY``…) depend on the submitting host's time zone and are refused.

Pure but for ``now``, which callers pass (the wall clock, where a person typed it).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

from runner.durations import parse_duration

MIN_BEGIN = 946_684_800.0  # 2000-01-01: earlier is surely a mistake
MAX_BEGIN = 4_102_444_800.0  # 2100-01-01: later is too (and stays within every clock's range)
ISO_FORMS = "an ISO 8601 time such as 2026-12-02T03:00 (UTC unless it has an offset)"
SLURM_FORMS = "now+N[seconds|minutes|hours|days|weeks], HH:MM[:SS] or YYYY-MM-DD[THH:MM[:SS]]"
_SLURM_NOW = re.compile(r"now(?:\+([0-9]{1,9})(?:(second|minute|hour|day|week)s?)?)?")
_SLURM_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
_CLOCK = re.compile(r"([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:T[0-9]{2}:[0-9]{2}(?::[0-9]{2})?)?")


def iso_seconds(text: str) -> float:
    """Seconds since the epoch of an ISO 8601 date-time, UTC unless it has an offset;
    ValueError (saying which forms are read) otherwise."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    except (ValueError, OverflowError):
        raise ValueError(f"{text[:60]!r} is not {ISO_FORMS}") from None


def check_begin(seconds: float) -> float:
    """A begin time within bounds: from 2000-01-01 to 2100-01-01."""
    if not math.isfinite(seconds) or not MIN_BEGIN <= seconds < MAX_BEGIN:
        raise ValueError("must be between 2000-01-01 and 2100-01-01")
    return seconds


def begin_from_text(text: str, now: float) -> float:
    """``astra run --begin``: ISO 8601 (UTC unless an offset is given) or ``+DURATION``."""
    value = text.strip()
    if value.startswith("+"):
        return check_begin(now + parse_duration(value[1:]))
    return check_begin(iso_seconds(value))


def begin_from_slurm(text: str, now: float) -> float:
    """``#SBATCH --begin``: the forms of SLURM_FORMS; ValueError for any other."""
    value = text.strip()
    if match := _SLURM_NOW.fullmatch(value):
        count, unit = match.groups()
        return check_begin(now + int(count or 0) * _SLURM_UNITS[unit or "second"])
    if match := _CLOCK.fullmatch(value):
        hours, minutes, seconds = (int(p or 0) for p in match.groups())
        if hours > 23 or minutes > 59 or seconds > 59:
            raise ValueError(f"{value!r} is not a time of day")
        today = datetime.fromtimestamp(now, UTC).replace(
            hour=hours, minute=minutes, second=seconds, microsecond=0
        )
        moment = today if today.timestamp() > now else today + timedelta(days=1)
        return moment.timestamp()
    if _DATE.fullmatch(value):
        return check_begin(iso_seconds(value))
    raise ValueError(f"{value[:60]!r} is not understood (use {SLURM_FORMS}, in UTC)")


def iso_begin(seconds: float) -> str:
    """The spec's form of a begin time: ``2026-12-02T03:00:00Z``."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def shown_begin(seconds: float) -> str:
    """How messages show it: ``2026-12-02 03:00 UTC`` (seconds only when not zero)."""
    moment = datetime.fromtimestamp(seconds, UTC)
    shape = "%Y-%m-%d %H:%M" if moment.second == 0 else "%Y-%m-%d %H:%M:%S"
    return moment.strftime(shape) + " UTC"
