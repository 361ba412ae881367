"""The order of the walk: priority, then fair share (dominant share / weight), then time."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator
from operator import attrgetter

from runner.model import Quota, Resources, amounts
from runner.planner.types import WaitingRun


def dominant_share(used: Resources, quota: Quota | None) -> float:
    if quota is None:
        return 0.0
    share = 0.0
    for amount, limit in zip(amounts(used), quota.limits(), strict=True):
        if limit is None:
            continue
        if limit == 0:
            share = max(share, math.inf if amount > 0 else 0.0)
        else:
            share = max(share, amount / limit)
    return share


class Order:
    """Yields waiting runs in planner order; the share updates as runs start.

    One FIFO per (priority, workspace); within a priority the workspaces are
    merged by a heap on (share / weight, submission time, name). Workspaces
    without a quota always have share 0: their runs form one FIFO together.
    """

    def __init__(
        self, waiting: Iterable[WaitingRun], shares: dict[str, float], fixed: set[str]
    ) -> None:
        by_level: dict[int, dict[str, list[WaitingRun]]] = {}
        for run in waiting:
            key = "" if run.workspace in fixed else run.workspace
            by_level.setdefault(run.priority, {}).setdefault(key, []).append(run)
        self._levels = sorted(by_level.items(), key=lambda item: -item[0])
        shares[""] = 0.0  # the pooled FIFO (no workspace is named "")
        self._shares = shares  # the walk's own dict: it changes as runs start

    def __iter__(self) -> Iterator[WaitingRun]:
        by_name, by_time = attrgetter("name"), attrgetter("submitted_at")
        for _priority, queues in self._levels:
            fifo: dict[str, list[WaitingRun]] = {}
            for key, runs in queues.items():
                runs.sort(key=by_name)  # two stable sorts: by time, then name
                runs.sort(key=by_time)
                fifo[key] = runs
            if len(fifo) == 1:  # one FIFO: nothing to merge
                yield from next(iter(fifo.values()))
                continue
            yield from self._merge(fifo)

    def _merge(self, fifo: dict[str, list[WaitingRun]]) -> Iterator[WaitingRun]:
        shares = self._shares
        heap = [
            (shares[key], runs[0].submitted_at, runs[0].name, key, 0) for key, runs in fifo.items()
        ]
        heapq.heapify(heap)
        replace = heapq.heapreplace
        while heap:
            _share, _t, _name, key, i = heap[0]
            runs = fifo[key]
            yield runs[i]
            i += 1
            if i < len(runs):
                nxt = runs[i]
                replace(heap, (shares[key], nxt.submitted_at, nxt.name, key, i))
            else:
                heapq.heappop(heap)
