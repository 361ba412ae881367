"""The store's queue read (runner/store/db.py ``runs``): read again only once a committed
write changed a row, and the same rows a fresh read gives."""

from __future__ import annotations

import json
from pathlib import Path

from runner.model import RunState
from runner.reasons import Reason, ReasonCode, RunRef
from runner.store.db import RunRow, Store
from tests.unit.store_rows import queued_row


def _row(name: str, submitted: float) -> RunRow:
    doc = {"metadata": {"name": name}, "spec": {"task_template": {"command": "true"}}}
    return queued_row(name, json.dumps(doc), submitted)


def test_the_queue_is_read_again_after_every_committed_change(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    for i, name in enumerate(("a", "b", "c")):
        store.runs.insert(_row(name, 1000.0 + i))
    first = store.runs.all(active_only=True)
    assert [r.name for r in first] == ["a", "b", "c"]
    again = store.runs.all(active_only=True)
    assert again == first and all(x is y for x, y in zip(again, first, strict=True))
    again.clear()  # a caller's list is its own
    assert len(store.runs.all(active_only=True)) == 3
    generation = store.generation
    with store.transaction() as tx:  # a transaction that changes nothing
        store.runs.set_priority(tx, "nothing-by-that-name", 3)
    assert store.generation == generation
    waits = Reason.of("Queued behind {0}", RunRef("a", "default"), code=ReasonCode.QUEUED_BEHIND)
    with store.transaction() as tx:
        store.runs.set_priority(tx, "b", 7)
        store.runs.set_reason(tx, "c", waits)
        store.runs.finish(tx, "a", RunState.SUCCEEDED, 1100.0, None, exit_code=0)
    assert store.generation > generation
    now = store.runs.all(active_only=True)
    assert [(r.name, r.priority, r.reason) for r in now] == [("b", 7, None), ("c", 0, waits)]
    assert now[1].reason is not None and now[1].reason.code is ReasonCode.QUEUED_BEHIND
    fresh = Store(tmp_path / "state.db")  # another reader of the file: the same rows
    assert fresh.runs.all(active_only=True) == now
    assert fresh.runs.all() == store.runs.all() and [r.name for r in store.runs.all()] == [
        "a",
        "b",
        "c",
    ]
    assert store.runs.get("a") == fresh.runs.get("a") and store.runs.get("zz") is None


def test_a_failed_transaction_leaves_the_queue_as_it_was(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.runs.insert(_row("a", 1000.0))
    before = store.runs.all(active_only=True)
    try:
        with store.transaction() as tx:
            store.runs.set_priority(tx, "a", 9)
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    assert store.runs.all(active_only=True) == before
    assert store.runs.get("a").priority == 0  # type: ignore[union-attr]


def test_a_queue_read_after_any_mix_of_writes_is_the_queue_read_whole(tmp_path: Path) -> None:
    """Only the rows a commit wrote are read again (or the whole queue, after a statement
    that may have written any): after every step, the same rows as a fresh read."""
    import random

    store = Store(tmp_path / "state.db")
    fresh = Store(tmp_path / "state.db")  # reads the file whole every time (its own cache
    rng = random.Random(16)  # is dropped before each read)
    names: list[str] = []
    waits = Reason.of("Queued behind {0}", RunRef("r-0", "default"), code=ReasonCode.QUEUED_BEHIND)
    for step in range(300):
        roll = rng.random()
        if roll < 0.3 or not names:
            name = f"r-{step}"
            store.runs.insert(_row(name, 1000.0 + rng.choice([0, step])))  # ties: by name
            names.append(name)
        else:
            name = rng.choice(names)
            with store.transaction() as tx:
                if roll < 0.5:
                    store.runs.set_priority(tx, name, rng.randint(-5, 5))
                elif roll < 0.6:
                    store.runs.set_reason(tx, name, waits)
                elif roll < 0.7:
                    store.runs.claim_start(tx, name, 1, RunState.STARTING, 2000.0, backfilled=False)
                    store.runs.started(tx, name)
                elif roll < 0.8:
                    store.runs.finish(tx, name, RunState.SUCCEEDED, 2100.0, None, exit_code=0)
                elif roll < 0.85:
                    store.runs.requeue(tx, name, clear_request=True)
                elif roll < 0.9:
                    store.runs.delete(tx, name)
                    names.remove(name)
                elif roll < 0.95:
                    store.groups.release_runs(tx, "no-such-group")  # may write any row
                else:
                    store.events.add(
                        tx,
                        name,
                        "default",
                        ReasonCode.MESSAGE,
                        Reason("a note", code=ReasonCode.MESSAGE),
                    )  # no run row
        if rng.random() < 0.5:  # reads now and then: several writes between two reads too
            fresh._core.active = None
            assert store.runs.all(active_only=True) == fresh.runs.all(active_only=True), step
    fresh._core.active = None
    assert store.runs.all(active_only=True) == fresh.runs.all(active_only=True)


def test_a_read_inside_a_transaction_is_never_kept(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.runs.insert(_row("a", 1000.0))
    store.runs.all(active_only=True)
    try:
        with store.transaction() as tx:
            store.runs.insert_in(tx, _row("b", 1001.0), "submitted")
            assert [r.name for r in store.runs.all(active_only=True)] == ["a", "b"]  # its own
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    assert [r.name for r in store.runs.all(active_only=True)] == ["a"]
