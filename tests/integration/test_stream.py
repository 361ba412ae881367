"""The change stream (``GET /v1/stream``) as the dashboard reads it, from a real daemon.

A queue of hundreds of runs makes a snapshot of more than half a megabyte on one SSE
line: the dashboard's client reads it whole, and the changes after it (a submit, a
delete) arrive as diffs of the runs they touched.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import msgspec

from astraeus_tui.cli.daemon import _ask_snapshot
from astraeus_tui.client import AsyncClient, Client
from runner.schema import Change, Run, Snapshot
from tests.support.harness import spec, wait_for
from tests.support.long_queue import QUEUED, SLEEP, fill
from tests.support.served import Served

LINE_LIMIT = 1 << 19


def merge(kept: dict[str, Run], change: Change) -> bool:
    """``change`` merged into ``kept`` as a client merges it: whole objects, ids gone, and
    places alone (``moved``). True, to be chained in a ``next_change`` check."""
    for rid in change.remove:
        kept.pop(rid, None)
    for run in change.upsert:
        kept[run.id] = run
    for rid, position in change.moved:
        kept[rid] = msgspec.structs.replace(kept[rid], position=position)
    return True


async def next_change(stream: object, check: Callable[[Change], bool]) -> Change:
    async for event, data in stream:  # type: ignore[attr-defined]
        if event == "change" and isinstance(data, Change) and check(data):
            return data
    raise AssertionError("the stream ended")


def test_a_long_queue_s_snapshot_arrives_whole_and_changes_follow(
    served: Callable[..., Served],
) -> None:
    daemon = served(gpus=1, machine="max_submit_per_user = 5000")
    fill(daemon.socket, QUEUED)
    client = Client(daemon.socket)
    planned = lambda: all(r.position or r.state == "Running" for r in client.runs())  # noqa: E731
    wait_for(planned, 30, "the queue planned")
    listed = {r.id: r for r in client.runs()}

    async def main() -> None:
        dashboard = AsyncClient(daemon.socket)
        stream = dashboard.changes()
        try:
            event, snapshot = await asyncio.wait_for(anext(stream), 60)
            assert event == "snapshot" and isinstance(snapshot, Snapshot)
            assert len(msgspec.json.encode(snapshot)) > LINE_LIMIT  # one line, that long
            assert {r.id: r for r in snapshot.runs} == listed  # what GET /v1/runs says

            kept = {r.id: r for r in snapshot.runs}

            def merged(change: Change) -> bool:
                return merge(kept, change)

            late = await asyncio.to_thread(client.submit, spec("late", SLEEP, gpus=1))
            # the submit's diff goes at once, its place once the loop planned it
            added = await asyncio.wait_for(
                next_change(stream, lambda c: merged(c) and "late" in kept
                            and kept["late"].position is not None), 30
            )  # fmt: skip
            run = kept["late"]
            assert (run.state, run.position, run.uid) == ("Queued", QUEUED + 1, late.uid)
            assert added.version > snapshot.version

            await asyncio.to_thread(client.delete, "late")
            gone = await asyncio.wait_for(
                next_change(stream, lambda c: merged(c) and "late" in c.remove), 30
            )
            assert gone.version > added.version

            await asyncio.to_thread(client.delete, "wait-0000")  # the head: every place moves
            await asyncio.wait_for(next_change(stream, lambda c: merged(c) and kept[
                "wait-0001"].head and kept["wait-0749"].position == 749), 30)  # fmt: skip
            places = {rid: kept[rid].position for rid in ("wait-0001", "wait-0002", "wait-0749")}
            assert list(places.values()) == [1, 2, 749] and "wait-0000" not in kept
        finally:
            await stream.aclose()
            await dashboard.close()

    asyncio.run(main())


def test_a_new_run_s_estimate_follows_on_the_stream(served: Callable[..., Served]) -> None:
    """The diff after a submit goes out at once; the plan's estimate of when the run
    starts (it waits behind two runs with time limits) follows on the same stream."""
    daemon = served(gpus=1)
    client = Client(daemon.socket)
    client.submit(spec("blocker", SLEEP, gpus=1, limit=600))
    wait_for(lambda: client.show("blocker").state == "Running", 30, "the blocker running")

    async def main() -> None:
        dashboard = AsyncClient(daemon.socket)
        stream = dashboard.changes()
        try:
            event, _ = await asyncio.wait_for(anext(stream), 30)
            assert event == "snapshot"
            await asyncio.to_thread(client.submit, spec("next", SLEEP, gpus=1, limit=600))
            await asyncio.to_thread(client.submit, spec("second", SLEEP, gpus=1, limit=600))

            def estimated(change: Change) -> bool:
                return any(r.id == "second" and r.starts_by for r in change.upsert)

            change = await asyncio.wait_for(next_change(stream, estimated), 30)
            second = next(r for r in change.upsert if r.id == "second")
            assert second.position == 2 and second.starts_by == client.show("second").starts_by
        finally:
            await stream.aclose()
            await dashboard.close()

    asyncio.run(main())


def test_a_run_held_mid_queue_moves_the_runs_behind_it_by_their_places_alone(
    served: Callable[..., Served],
) -> None:
    """Holding one run near the head changes only the places of every run behind it: the
    diff sends them as ``moved`` ``[id, position]``, not whole objects, and the objects a
    client keeps, merged with it, are what ``GET /v1/runs`` lists."""
    daemon = served(gpus=1, machine="max_submit_per_user = 5000")
    count = 200
    fill(daemon.socket, count)
    client = Client(daemon.socket)
    planned = lambda: all(r.position or r.state == "Running" for r in client.runs())  # noqa: E731
    wait_for(planned, 30, "the queue planned")

    async def main() -> None:
        dashboard = AsyncClient(daemon.socket)
        stream = dashboard.changes()
        try:
            _, snapshot = await asyncio.wait_for(anext(stream), 60)
            assert isinstance(snapshot, Snapshot)
            kept = {r.id: r for r in snapshot.runs}
            await asyncio.to_thread(client.control, "wait-0003", "hold")

            def placed(change: Change) -> bool:
                return merge(kept, change) and kept["wait-0004"].position == 4

            change = await asyncio.wait_for(next_change(stream, placed), 30)
            upserted = {r.id for r in change.upsert}
            moved = dict(change.moved)
            assert (moved["wait-0004"], moved[f"wait-{count - 1:04d}"]) == (4, count - 1)
            assert len(moved) == count - 4 and not upserted & set(moved)
            assert "wait-0003" not in moved  # held: its reason changed, sent whole
            assert kept == {r.id: r for r in client.runs()}  # merged: what the list says
            size = len(msgspec.json.encode(change))
            assert size < 100 * (count - 4), size  # places, not objects (~1 KB each)
        finally:
            await stream.aclose()
            await dashboard.close()

    asyncio.run(main())


def test_the_dashboard_s_early_ask_for_the_snapshot_ends_and_holds_nothing(
    served: Callable[..., Served],
) -> None:
    """``astra dash`` opens the stream while its imports load, so the daemon makes the
    snapshot meanwhile, and drops it at its first line: each ask ends, no connection is
    left held (four a user here: a fifth would be refused), the dashboard's stream after
    them gets the snapshot."""
    daemon = served("[api]\nmax_connections_per_user = 4\n", gpus=1)
    client = Client(daemon.socket)
    for name in ("blocker", "one", "two"):
        client.submit(spec(name, SLEEP, gpus=1))
    wait_for(lambda: all(r.position or r.state == "Running" for r in client.runs()), 30, "planned")
    for _ in range(12):
        began = time.monotonic()
        _ask_snapshot(daemon.socket)
        assert time.monotonic() - began < 10

    async def main() -> None:
        dashboard = AsyncClient(daemon.socket)
        stream = dashboard.changes()
        try:
            event, snapshot = await asyncio.wait_for(anext(stream), 30)
            assert event == "snapshot" and isinstance(snapshot, Snapshot)
            assert {r.name for r in snapshot.runs} == {"blocker", "one", "two"}
        finally:
            await stream.aclose()
            await dashboard.close()

    asyncio.run(main())
