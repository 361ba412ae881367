"""The wait before a failed run starts again: a crash-loop back-off.

A worker that exits non-zero, or is lost, spends a restart (runner/engine/lifecycle.py);
the run is then queued again but kept out of the order until its back-off has passed:
``[machine] restart_backoff`` (10 s) after the first failure, doubling with each failure
in a row up to ``restart_backoff_max`` (5 min), the shape of Kubernetes' crash-loop
back-off. An attempt that ran ``RESET_AFTER`` (10 min) or longer starts the doubling
again. While it waits the run holds nothing and is never the head, as a run before its
begin time (runner/engine/holds.py); its reason says when it starts again, as a time
(``Restarting at 14:21:07 UTC``): a stored reason is not redrawn, so it cannot count down.

An attempt that failed within ``AT_ONCE`` seconds of its start "exits at once": after
``AT_ONCE_TIMES`` of those in a row the reason and event say so, so that a typo in a
command, a wrong folder or a missing environment reads as what it is.

The back-off's end is stored with the run on both clocks (wall and monotonic, with the
boot), so it is measured on the monotonic clock and outlives a daemon restart.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.clock import Now
from runner.durations import utc_second
from runner.reasons import Reason, ReasonCode

__all__ = ["AT_ONCE", "AT_ONCE_TIMES", "NO_BACKOFF", "RESET_AFTER", "Backoff", "Failure"]

RESET_AFTER = 600.0  # seconds: an attempt that ran this long starts the doubling again
AT_ONCE = 10.0  # seconds: an attempt that failed sooner "exits at once"
AT_ONCE_TIMES = 3  # in a row: then its reason says to check command, folder, environment
AT_ONCE_HINT = "it exits at once: check its command, folder and environment"


@dataclass(frozen=True, slots=True)
class Backoff:
    """``first``: seconds before the first restart (0: none); doubled per failure in a
    row up to ``most``."""

    first: float = 10.0
    most: float = 300.0

    def delay(self, fails: int) -> float:
        """Seconds to wait after the ``fails``-th failure in a row (1, 2, …)."""
        if fails <= 0 or self.first <= 0:
            return 0.0
        return min(self.first * 2.0 ** min(fails - 1, 62), max(self.most, self.first))


NO_BACKOFF = Backoff(0.0, 0.0)


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt, counted: the failures in a row (for the doubling), those that
    exited at once in a row, and the wait it gives."""

    fails: int
    quick: int
    delay: float

    @staticmethod
    def of(backoff: Backoff, lived: float, fails_before: int, quick_before: int) -> Failure:
        """The attempt ran ``lived`` seconds; the run had ``fails_before`` failures in a
        row and ``quick_before`` quick ones before it."""
        fails = 1 if lived >= RESET_AFTER else fails_before + 1
        quick = quick_before + 1 if lived < AT_ONCE else 0
        return Failure(fails, quick, backoff.delay(fails))

    @property
    def at_once(self) -> bool:
        return self.quick >= AT_ONCE_TIMES

    def restarting(self, what: str, restarts: int, limit: int, now: float) -> Reason:
        """``Restarting at 14:21:07 UTC (restart 3 of 10): worker 0 exited with code 2``:
        the end of its back-off (``now`` + ``delay``, on the wall clock), as the run's
        ``restart_at`` says it; ``Restarting (restart 3 of 10): …`` without a back-off."""
        wait = f" at {utc_second(now + self.delay, now)}" if self.delay > 0 else ""
        text = f"Restarting{wait} (restart {restarts} of {limit}): {what}"
        if self.at_once:
            text += f"; {AT_ONCE_HINT}"
            return Reason(text, private=True, code=ReasonCode.EXITS_AT_ONCE)
        return Reason(text, private=True, code=ReasonCode.RESTARTING)

    def failed(self, what: str, limit: int) -> str:
        """``Failed: worker 0 exited with code 2; the restart budget (10) is spent``."""
        text = f"Failed: {what}; the restart budget ({limit}) is spent"
        return f"{text}; {AT_ONCE_HINT}" if self.at_once else text


def resting_for(now: Now, at: float | None, mono: float | None, boot: str | None) -> float:
    """Seconds left of a back-off that ends at ``at`` (wall) / ``mono`` on ``boot``; 0
    when none is stored or it has passed."""
    if at is None:
        return 0.0
    return max(0.0, now.until(at, mono, boot))
