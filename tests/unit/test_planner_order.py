"""The walk's order (runner/planner/order.py) against a plain heap merge of FIFOs.

The reference below is the order's definition, done the slow way: per priority
one FIFO per workspace with a quota (the others pooled), each sorted by
(submission time, name), merged by a heap on (share, time, name, workspace)
whose entries read the share when they are pushed, as runs start and shares move.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.model import Resources
from runner.planner.order import Order, by_time
from runner.planner.types import WaitingRun

WORKSPACES = ("a", "b", "c", "d")
Move = Callable[[str], float | None]  # a run's new share when it starts, by name


def reference(
    waiting: list[WaitingRun], shares: dict[str, float], quotas: set[str], move: Move
) -> Iterator[WaitingRun]:
    for priority in sorted({r.priority for r in waiting}, reverse=True):
        fifo: dict[str, list[WaitingRun]] = {}
        for run in waiting:
            if run.priority == priority:
                key = run.workspace if run.workspace in quotas else ""
                fifo.setdefault(key, []).append(run)
        for runs in fifo.values():
            runs.sort(key=lambda r: r.name)
            runs.sort(key=lambda r: r.submitted_at)
        if len(fifo) == 1:  # one FIFO: shares move, its order does not
            for run in next(iter(fifo.values())):
                yield run
                new = move(run.name)
                if new is not None and run.workspace in quotas:
                    shares[run.workspace] = new
            continue
        heap = [
            (shares.get(k, 0.0), rs[0].submitted_at, rs[0].name, k, 0) for k, rs in fifo.items()
        ]
        heapq.heapify(heap)
        while heap:
            _s, _t, _n, key, i = heap[0]
            run = fifo[key][i]
            yield run
            new = move(run.name)
            if new is not None and key:
                shares[key] = new
            if i + 1 < len(fifo[key]):
                nxt = fifo[key][i + 1]
                heapq.heapreplace(
                    heap, (shares[key] if key else 0.0, nxt.submitted_at, nxt.name, key, i + 1)
                )
            else:
                heapq.heappop(heap)


def ours(
    waiting: list[WaitingRun], shares: dict[str, float], quotas: set[str], move: Move
) -> Iterator[WaitingRun]:
    order = Order(waiting, shares, quotas)
    for piece in order.pieces():
        for run in piece:
            yield run
            new = move(run.name)  # as the walk does when a run starts
            if new is not None and run.workspace in quotas and new != shares[run.workspace]:
                shares[run.workspace] = new
                order.moved()


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[WaitingRun], dict[str, float], set[str], dict[str, float]]:
    quotas = set(draw(st.lists(st.sampled_from(WORKSPACES), unique=True)))
    share = st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0])
    shares = {ws: draw(share) for ws in quotas}
    n = draw(st.integers(0, 40))
    waiting = [
        WaitingRun(
            f"r{draw(st.integers(0, 10_000))}-{i}",
            draw(st.sampled_from(WORKSPACES)),
            draw(st.integers(0, 2)),
            float(draw(st.integers(0, 6))),  # equal times are common
            Resources(),
        )
        for i in range(n)
    ]
    moves = {r.name: draw(share) for r in waiting if draw(st.booleans()) and draw(st.booleans())}
    return waiting, shares, quotas, moves


@settings(max_examples=600, deadline=None)
@given(cases())
def test_the_order_is_the_heap_merge_as_shares_move(
    case: tuple[list[WaitingRun], dict[str, float], set[str], dict[str, float]],
) -> None:
    waiting, shares, quotas, moves = case
    expected = [r.name for r in reference(list(waiting), dict(shares), quotas, moves.get)]
    got = [r.name for r in ours(list(waiting), dict(shares), quotas, moves.get)]
    assert got == expected


def test_a_move_in_a_long_level_cuts_the_sorted_list_and_merges_the_rest() -> None:
    # a and b alternate by time at equal share; a's first run starts and doubles its share
    waiting = [
        WaitingRun(f"{ws}{i}", ws, 0, float(2 * i + (ws == "b")), Resources())
        for i in range(5)
        for ws in "ab"
    ]
    moves = {"a0": 1.0}
    got = [r.name for r in ours(waiting, {"a": 0.0, "b": 0.0}, {"a", "b"}, moves.get)]
    assert got == ["a0", "b0", "b1", "b2", "b3", "b4", "a1", "a2", "a3", "a4"]


def test_by_time_sorts_by_time_then_name_then_as_given() -> None:
    runs = [
        WaitingRun(name, ws, 0, at, Resources())
        for name, ws, at in [("y", "a", 2.0), ("x", "b", 1.0), ("x", "a", 1.0), ("w", "c", 2.0)]
    ]
    by_time(runs)
    assert [(r.name, r.workspace) for r in runs] == [("x", "b"), ("x", "a"), ("w", "c"), ("y", "a")]
