"""The checks of single config values; each raises :class:`_Invalid` naming the key.

:func:`runner.config.load.parse_config` turns an ``_Invalid`` into a ConfigError that
names the file too.
"""

from __future__ import annotations

import grp
import json
import math
import pwd
import re
from collections.abc import Callable
from typing import TypeGuard

from runner.durations import unit_seconds
from runner.model import parse_size

ALL_USERS = "*"
MAX_GPUS = 1024
MAX_CPU_CORES = 100_000
MAX_STOP_GRACE = 86_400.0
MAX_RETENTION = 3650 * 86_400.0
MAX_BACKOFF = 86_400.0  # seconds: [machine] restart_backoff and _max at most
_DURATION_RE = re.compile(r"(?:\d{1,9}[smhdw])+")
MIN_LOG_LIMIT = 1 << 20
_NAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NAME_RULE = "1-63 lowercase letters, digits or '-', starting and ending with a letter or digit"
_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")

_Table = dict[str, object]


class _Invalid(Exception):
    """Raised by the checks below; parse_config adds the file name."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(key, reason)
        self.key, self.reason = key, reason


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if abs(value) < 10**18 else "a number too large to use"
    if isinstance(value, str):
        return repr(value) if len(value) <= 50 else repr(value[:47]) + "..."
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _child(parent: str, key: str) -> str:
    shown = key if _BARE_KEY_RE.fullmatch(key) else json.dumps(key)
    return f"{parent}.{shown}" if parent else shown


def _table(value: object, path: str, keys: tuple[str, ...] | None) -> _Table:
    """A table with only the given keys (any keys: ``None``, for names the admin chose)."""
    if not isinstance(value, dict):
        raise _Invalid(path, f"must be a table, got {_show(value)}")
    for key in value:
        if keys is not None and key not in keys:
            raise _Invalid(_child(path, key), f"unknown key (expected one of: {', '.join(keys)})")
    return value


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: object, path: str, low: int, high: int | None = None) -> int:
    """A whole number from ``low`` (to ``high``)."""
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or value < low
        or (high is not None and value > high)
    ):
        rule = f">= {low}" if high is None else f"between {low} and {high}"
        raise _Invalid(path, f"must be a whole number {rule}, got {_show(value)}")
    return value


def _auto(value: object, path: str, check: Callable[[object, str], int]) -> int | None:
    """``None`` for "auto", else what ``check`` makes of the value."""
    if value == "auto":
        return None
    try:
        return check(value, path)
    except _Invalid as error:
        if not error.reason.startswith("must be "):
            raise
        raise _Invalid(path, f'must be "auto" or {error.reason.removeprefix("must be ")}') from None


def _size(value: object, path: str) -> int:
    try:
        return parse_size(value)
    except ValueError as error:
        shown = f", got {_show(value)}" if str(error).startswith("must") else ""
        raise _Invalid(path, f"{error}{shown}") from None


def _cpu_milli(value: object, path: str) -> int:
    """Cores (whole or fractional) as millicores."""
    if not _number(value) or not 0 <= value <= MAX_CPU_CORES:
        raise _Invalid(path, f"must be a number of cores >= 0, got {_show(value)}")
    milli = float(value) * 1000
    if abs(milli - round(milli)) > 1e-6:
        raise _Invalid(path, f"must be a multiple of 0.001 cores, got {_show(value)}")
    return round(milli)


def _strings(value: object, path: str) -> list[str]:
    if not isinstance(value, list):
        raise _Invalid(path, f"must be a list of strings, got {_show(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise _Invalid(f"{path}[{index}]", f"must be a non-empty string, got {_show(item)}")
    return value


def _users(value: object, path: str, allow_all: bool) -> tuple[str, ...]:
    names = _strings(value, path)
    for index, name in enumerate(names):
        if allow_all and name == ALL_USERS:
            continue
        try:
            pwd.getpwnam(name)
        except (KeyError, ValueError):
            raise _Invalid(
                f"{path}[{index}]", f"no Unix user named {_show(name)} on this machine"
            ) from None
    return tuple(dict.fromkeys(names))


def _group(value: object, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _Invalid(path, f"must be a Unix group name, got {_show(value)}")
    try:
        grp.getgrnam(value)
    except (KeyError, ValueError):
        raise _Invalid(path, f"no Unix group named {_show(value)} on this machine") from None
    return value


def _name(key: str, path: str, kind: str) -> str:
    if not _NAME_RE.fullmatch(key):
        raise _Invalid(path, f"{kind} names must be {_NAME_RULE}")
    return key


def _stop_grace(value: object, path: str) -> float:
    if not _number(value) or not 0 <= value <= MAX_STOP_GRACE:
        raise _Invalid(
            path,
            f"must be a number of seconds between 0 and {MAX_STOP_GRACE:g}, got {_show(value)}",
        )
    return float(value)


def _retention(value: object, path: str) -> float | None:
    """``"14d"``, ``"12h"``, ``"1h30m"``, ``"90s"`` (a unit is required: a bare 14 could
    mean seconds or days), or ``"off"`` (also ``0``, ``"0"``): finished runs are then kept
    until deleted."""
    return _duration_or_off(value, path, '"14d", "12h" or "90s"', MAX_RETENTION)


def _duration_or_off(value: object, path: str, examples: str, most: float) -> float | None:
    """Seconds from a duration with its unit, at most ``most`` (a whole number of days);
    ``"off"`` (also ``0``, ``"0"``): None. ``examples`` are what an error shows."""
    if value in ("off", 0, "0") and not isinstance(value, bool):
        return None
    seconds: float | None = None
    if isinstance(value, str) and _DURATION_RE.fullmatch(value.strip().lower()):
        seconds = unit_seconds(value) or None
    if seconds is None:
        raise _Invalid(
            path,
            f"must be a duration such as {examples} (units s, m, h, d, w), "
            f'or "off", got {_show(value)}',
        )
    if seconds > most:
        raise _Invalid(path, f"must be at most {most / 86_400:g}d, got {_show(value)}")
    return seconds


def _backoff_seconds(value: object, path: str) -> float:
    """``"10s"``, ``"5m"``, ``"1h"``; ``"0s"`` (or 0): none. A unit is required."""
    seconds: float | None = None
    if value == 0 and not isinstance(value, bool):
        seconds = 0.0
    elif isinstance(value, str) and _DURATION_RE.fullmatch(value.strip().lower()):
        seconds = float(unit_seconds(value))
    if seconds is None or seconds > MAX_BACKOFF:
        raise _Invalid(
            path, 'must be a duration such as "10s", "5m" or "1h" (units s, m, h, d) up to '
            f'"1d", or "0s" for none, got {_show(value)}',
        )  # fmt: skip
    return seconds


def _gpu_count(value: object, path: str) -> int:
    return _whole(value, path, 0, MAX_GPUS)


def _core_count(value: object, path: str) -> int:
    return _whole(value, path, 1, MAX_CPU_CORES)


def _memory_total(value: object, path: str) -> int:
    total = _size(value, path)
    if total == 0:
        raise _Invalid(path, "must be a size above 0, got 0")
    return total


def _log_limit(value: object, path: str) -> int:
    limit = _size(value, path)
    if 0 < limit < MIN_LOG_LIMIT:
        raise _Invalid(path, f'must be 0 (no limit) or at least "1MiB", got {_show(value)}')
    return limit
