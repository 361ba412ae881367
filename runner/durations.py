"""Durations as people write them, in seconds: ``2h``, ``90m``, ``1h30m``, ``3600``,
and Slurm's ``D-HH:MM:SS``.

One parser for every face that takes a time limit (``astra run --time-limit``, the
dashboard's form), for ``#SBATCH --time`` and Slurm's own answers
(:func:`runner.spec.sbatch.slurm_time` words its errors), and the unit sums of the
config's ``retention``. Only ``re`` at import: the CLI imports this on every start.
"""

from __future__ import annotations

import re

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
EXAMPLES = "e.g. 2h, 90m, 1d, 1-12:00:00"
_WITH_UNITS = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_SLURM = re.compile(r"(?:([0-9]{1,5})-)?([0-9]{1,9})(?::([0-9]{1,9}))?(?::([0-9]{1,9}))?")


def unit_seconds(text: str) -> float:
    """The sum of ``text``'s amounts with units (``1h30m`` is 5400.0); 0 if it has none."""
    return sum(float(n) * UNITS[u] for n, u in _PART.findall(text.strip().lower()))


def slurm_seconds(value: str) -> int | None:
    """Seconds from a Slurm time (``30``, ``1:00:00``, ``2-03:04:05``…); None = no limit
    (``UNLIMITED``, or zero, as Slurm reads it); ValueError if it is not one."""
    if value.lower() in ("unlimited", "infinite"):
        return None
    match = _SLURM.fullmatch(value)
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
    if _WITH_UNITS.fullmatch(value) and (total := unit_seconds(value)) >= 1:
        return int(total)
    try:
        seconds = slurm_seconds(value)
    except ValueError:
        seconds = None
    if not seconds:
        raise ValueError(f"{text!r} is not a duration ({EXAMPLES})")
    return seconds
