"""The order of the walk: priority, then fair share (dominant share / weight), then time."""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Callable, Container, Iterable, Iterator
from itertools import chain, compress, count, islice
from operator import attrgetter, eq, le, length_hint, lt

from runner.model import Quota, Resources, quota_amounts
from runner.planner.types import WaitingRun

_NAME, _TIME, _TIME_NAME = (
    attrgetter("name"),
    attrgetter("submitted_at"),
    attrgetter("submitted_at", "name"),
)


def dominant_share(used: Resources, quota: Quota | None) -> float:
    if quota is None:
        return 0.0
    share = 0.0
    for amount, limit in zip(quota_amounts(used), quota.limits(), strict=True):
        if limit is None:
            continue
        if limit == 0:
            share = max(share, math.inf if amount > 0 else 0.0)
        else:
            share = max(share, amount / limit)
    return share


def by_time(runs: list[WaitingRun]) -> None:
    """Sort by submission time, then name, then the order given.

    As stable sorts by name and then by time would, but names are compared only
    among runs submitted at the same time, and runs that come in time order (as the
    store gives them) are not sorted at all."""
    times = list(map(_TIME, runs))
    if all(map(lt, times, islice(times, 1, None))):
        return
    if not all(map(le, times, islice(times, 1, None))):
        runs.sort(key=_TIME)
        times = list(map(_TIME, runs))
    ties = list(compress(count(), map(eq, times, islice(times, 1, None))))
    if not ties:
        return
    start = end = ties[0]
    for i in islice(ties, 1, None):  # a block of equal times: runs[start .. end + 1]
        if i != end + 1:
            runs[start : end + 2] = sorted(runs[start : end + 2], key=_NAME)
            start = i
        end = i
    runs[start : end + 2] = sorted(runs[start : end + 2], key=_NAME)


class Order:
    """The waiting runs in planner order, as the walk takes them (``pieces``).

    Within a priority the runs are ordered by (share / weight, submission time,
    name, workspace): one FIFO per workspace with a quota, merged on its share as
    the level begins. The other workspaces always have share 0: their runs form
    one FIFO together (workspace "").

    A workspace's share changes only when one of its runs starts, and the walk
    says so (``moved``) right after visiting that run. Until a share moves, a
    level's order is fixed: it is sorted once and the walk iterates the list
    itself. A move cuts that list short after the run that moved, and the rest
    of the level comes from ``_merge``: the FIFOs of the workspaces whose share
    moved, in a heap on their current share, merged with the rest of the list.
    """

    def __init__(
        self, waiting: Iterable[WaitingRun], shares: dict[str, float], quotas: Container[str]
    ) -> None:
        # one pass: each priority's FIFOs, each FIFO's runs as given
        levels: dict[int, dict[str, list[WaitingRun]]] = {}
        add: dict[int, dict[str, Callable[[WaitingRun], None]]] = {}
        for run in waiting:
            try:
                add[run.priority][run.workspace](run)
            except KeyError:
                key = run.workspace if run.workspace in quotas else ""
                fifos = levels.setdefault(run.priority, {})
                append = fifos.setdefault(key, []).append
                add.setdefault(run.priority, {})[run.workspace] = append
                append(run)
        self._levels = [levels[priority] for priority in sorted(levels, reverse=True)]
        shares[""] = 0.0  # the pooled FIFO (no workspace is named "")
        self._shares = shares  # the walk's own dict: it changes as runs start
        self._quotas = quotas
        self._listed: tuple[list[WaitingRun], Iterator[WaitingRun]] | None = None
        self._rest: list[WaitingRun] | None = None  # a level's list after a move, from it
        self._moved = False

    def _key(self, run: WaitingRun) -> str:
        """The FIFO the run is in: its workspace's, or the pooled one ("")."""
        return run.workspace if run.workspace in self._quotas else ""

    def pieces(self) -> Iterator[Iterable[WaitingRun]]:
        """The order in pieces, each taken whole before the next is asked for: each
        level's sorted list, cut short where a share moves, then the merged rest."""
        shares = self._shares
        for fifos in self._levels:
            groups: dict[float, list[str]] = {}
            for key in sorted(fifos):
                groups.setdefault(shares[key], []).append(key)
            runs: list[WaitingRun] = []
            for share in sorted(groups):
                keys = groups[share]
                same = (
                    fifos[keys[0]]
                    if len(keys) == 1
                    else list(chain.from_iterable(fifos[k] for k in keys))
                )
                by_time(same)  # stable: equal (time, name) stay in FIFO (workspace) order
                runs += same
            if len(fifos) == 1:  # one FIFO: no share moves its order
                yield runs
                continue
            listed = iter(runs)
            self._listed, self._rest = (runs, listed), None
            yield listed
            self._listed, rest = None, self._rest
            if rest is not None:
                self._moved = False
                yield self._merge(rest)

    def moved(self) -> None:
        """The share of the run just taken changed (it started)."""
        if self._listed is None:
            self._moved = True  # ``_merge`` reads it
            return
        runs, listed = self._listed
        at = len(runs) - length_hint(listed) - 1  # the run just taken
        self._rest = runs[at:]
        del runs[at + 1 :]  # the walk's iteration of the list ends here
        self._listed = None

    def _merge(self, rest: list[WaitingRun]) -> Iterator[WaitingRun]:
        """The rest of a level after ``rest[0]``'s share moved: the FIFOs of the
        workspaces whose share moved, in a heap on their current share, merged with
        the rest of ``rest`` (whose shares have not moved) on the same key."""
        shares, quotas = self._shares, self._quotas
        push, replace = heapq.heappush, heapq.heapreplace
        fifo: dict[str, list[WaitingRun]] = {}
        for each in rest:
            fifo.setdefault(self._key(each), []).append(each)
        moved_keys: set[str] = set()
        heap: list[tuple[float, float, str, str, int]] = []

        def add(run: WaitingRun) -> None:
            key = self._key(run)
            moved_keys.add(key)
            runs = fifo[key]
            i = bisect_left(runs, (run.submitted_at, run.name), key=_TIME_NAME)
            while runs[i] is not run:
                i += 1
            if i + 1 < len(runs):
                nxt = runs[i + 1]
                push(heap, (shares[key], nxt.submitted_at, nxt.name, key, i + 1))

        add(rest[0])
        n, i = len(rest), 1
        while True:
            run: WaitingRun | None = None
            key = ""
            while i < n:  # the next of the rest whose share has not moved
                key = rest[i].workspace if rest[i].workspace in quotas else ""
                if key not in moved_keys:
                    run = rest[i]
                    break
                i += 1
            first = None if run is None else (shares[key], run.submitted_at, run.name, key)
            while heap and (first is None or heap[0] < first):
                _share, _t, _name, top, j = heap[0]
                runs = fifo[top]
                yield runs[j]
                j += 1
                if j < len(runs):
                    nxt = runs[j]
                    replace(heap, (shares[top], nxt.submitted_at, nxt.name, top, j))
                else:
                    heapq.heappop(heap)
            if run is None:
                return
            self._moved = False
            yield run
            i += 1
            if self._moved:
                add(run)
