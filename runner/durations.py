"""Durations as people write them, in seconds: ``2h``, ``90m``, ``1h30m``, ``3600``,
and Slurm's ``D-HH:MM:SS``; and as the daemon and the faces say them back
(:func:`spoken`, :func:`compact`).

One parser for every face that takes a time limit (``astra run --time-limit``, the
dashboard's form), for ``#SBATCH --time`` and Slurm's own answers
(:func:`runner.runspec.sbatch.slurm_time` words its errors), and the unit sums of the
config's ``retention``. One formatter for every message, table cell and countdown.
Nothing at import (``re`` when a duration is parsed): the CLI's plain commands import
this on every start.
"""

from __future__ import annotations

import math

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
EXAMPLES = "e.g. 2h, 90m, 1d, 1-12:00:00"
_WITH_UNITS = r"(?:\d+(?:\.\d+)?[smhdw])+"  # patterns: compiled once, by re's own cache
_PART = r"(\d+(?:\.\d+)?)([smhdw])"
_SLURM = r"(?:([0-9]{1,5})-)?([0-9]{1,9})(?::([0-9]{1,9}))?(?::([0-9]{1,9}))?"


def minute(t: float, *, nearest: bool = False) -> float:
    """``t`` to the minute as a time is said: rounded up, as a promise is (a start "by"
    14:21 that is really 14:20:30 is kept); ``nearest``: to the nearest, as a forecast's
    likely start is."""
    return float(round(t / 60) * 60 if nearest else math.ceil(t / 60) * 60)


def utc_minute(t: float, *, nearest: bool = False) -> str:
    """A time as the planner's reasons say it: ``2026-10-01 14:21 UTC``, to the minute
    (:func:`minute`: rounded up, ``nearest`` for a likely start)."""
    from datetime import UTC, datetime  # not time: the planner, pure, may read no clock

    return datetime.fromtimestamp(minute(t, nearest=nearest), UTC).strftime("%Y-%m-%d %H:%M UTC")


def utc_second(t: float, now: float) -> str:
    """A moment seconds to minutes away, as a reason says it: ``14:21:07 UTC``, to the
    second it falls in (as the API's times and the START column say it), with its date
    (``2026-10-02 00:01:07 UTC``) when that is not ``now``'s UTC day."""
    from datetime import UTC, datetime

    moment = datetime.fromtimestamp(math.floor(t), UTC)
    same_day = moment.date() == datetime.fromtimestamp(now, UTC).date()
    return moment.strftime("%H:%M:%S UTC" if same_day else "%Y-%m-%d %H:%M:%S UTC")


def unit_seconds(text: str) -> float:
    """The sum of ``text``'s amounts with units (``1h30m`` is 5400.0); 0 if it has none."""
    import re

    return sum(float(n) * UNITS[u] for n, u in re.findall(_PART, text.strip().lower()))


def slurm_seconds(value: str) -> int | None:
    """Seconds from a Slurm time (``30``, ``1:00:00``, ``2-03:04:05``…); None = no limit
    (``UNLIMITED``, or zero, as Slurm reads it); ValueError if it is not one."""
    if value.lower() in ("unlimited", "infinite"):
        return None
    import re

    match = re.fullmatch(_SLURM, value)
    if not match:
        raise ValueError(value)
    days, *rest = match.groups()
    parts = [int(p) for p in rest if p is not None]
    if days is None:  # MM, MM:SS, HH:MM:SS
        weights = {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}[len(parts)]
    else:  # D-HH, D-HH:MM, D-HH:MM:SS
        weights = (3600, 60, 1)[: len(parts)]
    seconds = int(days or 0) * 86400 + sum(p * w for p, w in zip(parts, weights, strict=True))
    return seconds or None


def parse_duration(text: str) -> int:
    """A time limit in whole seconds; ValueError if ``text`` is not one.

    ``3600`` (seconds), ``2h``, ``1h30m``, ``1.5h`` (units s, m, h, d, w), or Slurm's
    ``MM:SS``, ``HH:MM:SS``, ``D-HH:MM:SS``…. A spec's time limit is a positive whole
    number of seconds, so the result is at least 1: ``0``, ``0s``, ``0.5s`` and
    ``UNLIMITED`` are refused here rather than sent to be refused by the daemon, and
    fractions of a second are dropped (``1.5s`` is 1).
    """
    value = text.strip().lower()
    if value.isdigit() and int(value) > 0:
        return int(value)
    import re

    units = re.fullmatch(_WITH_UNITS, value)
    if units and (total := unit_seconds(value)) >= 1:
        return int(total)
    try:
        seconds = slurm_seconds(value)
    except ValueError:
        seconds = None
    if seconds:
        return seconds
    if value.isdigit() or units or seconds == 0:  # a time, but under a second
        raise ValueError(f"{text!r} is under a second: at least 1s, or leave it out for none")
    raise ValueError(f"{text!r} is not a duration ({EXAMPLES})")


_SPOKEN = {"s": "s", "m": "min", "h": "h", "d": "d"}


def _parts(seconds: int, up: bool, exact: bool) -> tuple[tuple[int, str], ...]:
    """The two largest units of ``seconds``: minutes and hours, hours and days; under a
    minute seconds alone, under an hour minutes alone (with their seconds if ``exact``)."""
    if seconds < 60:
        return ((seconds, "s"),)
    if exact and seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return ((minutes, "m"), (rest, "s"))
    minutes = -(-seconds // 60) if up and seconds < 3600 else seconds // 60
    if minutes < 60:
        return ((minutes, "m"),)
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return ((hours, "h"), (minutes, "m"))
    days, hours = divmod(hours, 24)
    return ((days, "d"), (hours, "h"))


def spoken(seconds: float, *, up: bool = False, exact: bool = False) -> str:
    """A duration in a sentence: ``45 s``, ``12 min``, ``1 h 12 min``, ``2 d 3 h``.

    Two units at most, the second left out when it is zero. Minutes round down (a
    limit "of at most" is never more than it says); ``up`` rounds them up under an
    hour (a countdown never says less than is left); ``exact`` keeps the seconds beside
    the minutes (``2 min 40 s``), rounded to the nearest.
    """
    whole = max(0, round(seconds) if exact else int(seconds))
    first, *rest = _parts(whole, up, exact)
    words = [f"{first[0]} {_SPOKEN[first[1]]}"]
    words += [f"{n} {_SPOKEN[unit]}" for n, unit in rest if n]
    return " ".join(words)


def compact(seconds: float | None, *, cell: bool = False, units: int = 2) -> str:
    """A short duration: ``45s``, ``12m``, ``1h05m``, ``2d3h``; ``-`` for none.

    ``cell``: as a table's column has room for it (``1h05``); ``units=1``: the largest
    unit alone (``1h``, ``2d``), as an age.
    """
    if seconds is None:
        return "-"
    (n, unit), *rest = _parts(max(0, int(seconds)), False, False)[:units]
    text = f"{n}{unit}"
    for n, unit in rest:
        if n:
            text += f"{n:02d}" + ("" if cell else "m") if unit == "m" else f"{n}{unit}"
    return text
