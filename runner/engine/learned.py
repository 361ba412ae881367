"""Run lengths learned from this daemon's finished runs (runner/planner/lengths.py), fed
from the usage records the store keeps of every run that finished.

``refresh`` reads only the records written since the last call. A record counts when the
run's own work ended it (it succeeded, or failed: a crash, a time limit) and its length is
known; a run cancelled says nothing of how long it would have taken.
"""

from __future__ import annotations

import threading

from runner.model import RunState
from runner.planner.lengths import Lengths, RunKey
from runner.store.db import Store

LEARNED_FROM = (RunState.SUCCEEDED, RunState.FAILED)


class Learned:
    """The lengths of finished runs, by group."""

    def __init__(self, store: Store, lengths: Lengths | None = None) -> None:
        self.store = store
        self.lengths = lengths or Lengths()
        self._since = 0.0  # the newest record's finish seen
        self._seen: set[int] = set()  # the records at that finish already learned
        self._lock = threading.Lock()  # the estimates' helper and the API's previews

    def refresh_lengths(self) -> Lengths:
        """The lengths, with the records written since the last refresh learned."""
        self.refresh()
        return self.lengths

    def refresh(self) -> int:
        """Learn the records written since the last refresh; how many were new."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> int:
        found = self.store.usage_records(self._since)
        fresh = [r for r in found if r.id not in self._seen]
        for record in fresh:
            if record.outcome in LEARNED_FROM and record.run_seconds is not None:
                key = RunKey(record.workspace, record.owner, record.run)
                self.lengths.learn(key, record.run_seconds, record.time_limit_seconds)
        if found:
            self._since = found[-1].finished_at
            self._seen = {r.id for r in found if r.finished_at == self._since}
        return len(fresh)
