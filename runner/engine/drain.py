"""Drains applied to the planner's input (the pure part: runner/planner/drains.py).

The loop, the snapshot and the API's explanations give it the store's drains
(``Drain.of(store.drains.all())``, each a :class:`runner.store.drains.DrainRow`).
"""

from __future__ import annotations

from runner.planner.drains import (
    DRAINING,
    NO_DRAIN,
    Drain,
    drained_snapshot,
    draining_reason,
    explained,
)

__all__ = ["DRAINING", "NO_DRAIN", "Drain", "drained_snapshot", "draining_reason", "explained"]
