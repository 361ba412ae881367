"""The daemon's two clocks: wall time to show people, monotonic time to measure.

Intervals, stop graces and time limits are measured on ``CLOCK_MONOTONIC``, which no
one can step: a wall clock stepped back (NTP, an admin's ``date -s``) must not stop the
planning, and one stepped forward must not end time-limited runs or stop graces early.
``submitted_at``, ``started_at``, ``finished_at``, event times and estimates stay on the
wall clock: they are shown to people.

The monotonic clock counts from the machine's boot, so a reading stored in the state
database is only good on the same boot: it is stored with the boot id
(``/proc/sys/kernel/random/boot_id``). A reading from another boot (or from before
these readings were kept) falls back to the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def iso(t: float | None) -> str | None:
    """A wall time as the wire gives it: ``2026-12-02T03:00:00Z``; None stays None."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def read_boot_id(path: Path = BOOT_ID) -> str:
    """This boot's id; "" when the kernel does not say (stored readings are then not used)."""
    try:
        return path.read_text().strip()[:64]
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class Now:
    """One reading of both clocks, taken at the start of a tick."""

    wall: float
    mono: float
    boot: str

    def same_boot(self, boot: str | None) -> bool:
        return bool(self.boot) and boot == self.boot

    def elapsed(self, wall_at: float, mono_at: float | None, boot: str | None) -> float:
        """Seconds since a moment read as ``wall_at`` and ``mono_at`` (on boot ``boot``)."""
        if mono_at is not None and self.same_boot(boot):
            return self.mono - mono_at
        return self.wall - wall_at

    def until(self, wall_at: float, mono_at: float | None, boot: str | None) -> float:
        """Seconds until a moment (negative once passed), as ``elapsed`` reads it."""
        return -self.elapsed(wall_at, mono_at, boot)

    def as_wall(self, wall_at: float, mono_at: float | None, boot: str | None) -> float:
        """The moment on today's wall clock: where a stepped wall clock puts it now."""
        return self.wall - self.elapsed(wall_at, mono_at, boot)


class Clock:
    """``wall()`` for times shown, ``mono()`` for intervals, ``boot`` for stored readings.

    Calling the clock reads the wall clock (what a plain ``time.time`` did before).
    Tests subclass it to step the wall clock.
    """

    def __init__(self) -> None:
        self.boot = read_boot_id()

    def wall(self) -> float:
        return time.time()

    def mono(self) -> float:
        return time.monotonic()

    def now(self) -> Now:
        return Now(self.wall(), self.mono(), self.boot)

    def __call__(self) -> float:
        return self.wall()


class WallOnly(Clock):
    """A clock made from a wall-clock function (a caller that passes ``time.time``)."""

    def __init__(self, wall: Callable[[], float]) -> None:
        super().__init__()
        self._wall = wall

    def wall(self) -> float:
        return self._wall()


def as_clock(clock: Clock | Callable[[], float]) -> Clock:
    return clock if isinstance(clock, Clock) else WallOnly(clock)
