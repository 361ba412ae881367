"""The cyclic garbage collector and a queue of thousands: its full passes kept short.

A queue's rows, specs and run objects live for hours. Each full pass of the collector
walks all of them (90-100 ms at 10,000 waiting, found nothing to free), stalling the
loop and the API in the middle of a change. Once the active runs have grown by
``FREEZE_AFTER`` since the last look, what is alive then is moved out of the
collector's passes (``gc.freeze``): reference counting still frees it, only cycles
among those objects would wait (the store's rows and the planner's values hold none).
"""

from __future__ import annotations

import gc

FREEZE_AFTER = 1000  # runs: growth of the queue that makes the live objects long-lived


class Collector:
    """``seen(count)`` after each plan with the number of active runs."""

    def __init__(self, after: int = FREEZE_AFTER) -> None:
        self.after = after
        self.frozen_at = 0  # the active runs at the last freeze

    def seen(self, active: int) -> bool:
        """Freeze what lives now when the queue grew by ``after``; whether it did."""
        if active < self.frozen_at:
            self.frozen_at = active  # shrank: growth is counted from here
            return False
        if active - self.frozen_at < self.after:
            return False
        gc.freeze()
        self.frozen_at = active
        return True
