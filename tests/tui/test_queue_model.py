"""The queue model's reads that the screen takes on every refresh."""

from __future__ import annotations

import random

import msgspec

from astraeus_tui.queue_model import Batch, QueueModel
from runner.model import RunState
from runner.schema import Run

STATES = [RunState.QUEUED] * 6 + [RunState.RUNNING, RunState.STARTING, RunState.STOPPING]


def model(seed: int, n: int = 400) -> QueueModel:
    rnd, runs = random.Random(seed), []
    for i in range(n):
        state = rnd.choice(STATES)
        queued = state == RunState.QUEUED
        runs.append(Run(id=f"r{i:03d}", name=f"r{i:03d}", workspace=rnd.choice(["a", "b"]),
                        state=state, priority=rnd.randint(-3, 3),
                        position=rnd.randint(1, n) if queued and rnd.random() < 0.9 else None,
                        submitted_at=f"2026-12-01T10:{rnd.randint(0, 59):02d}:00Z"))  # fmt: skip
    m = QueueModel()
    m.apply(Batch(snapshot=runs, at=0.0))
    return m


def test_the_first_waiting_runs_from_the_view_are_the_planner_s_order() -> None:
    for seed in range(20):
        m = model(seed)
        for n in (0, 1, 8, 1000):
            assert m.waiting(n, m.view()) == m.waiting(n)


def test_a_filtered_or_sorted_view_is_not_read_for_the_waiting_runs() -> None:
    m = model(3)
    expected = m.waiting(8)
    m.filters.workspace = "a"
    assert m.waiting(8, m.view()) == expected  # every workspace's, as without a view
    m.filters.workspace, m.filters.sort = None, "name"
    assert m.waiting(8, m.view()) == expected


def test_moved_places_merge_onto_the_objects_in_any_order_of_changes() -> None:
    """A diff's ``moved`` sets a run's position on the object the model (or the batch)
    holds; an upsert after it wins, a removal drops it, and the order follows."""
    for seed in range(10):
        rnd = random.Random(seed)
        m = model(seed)
        mirror = dict(m.runs)
        for rid in m.runs:  # every row drawn once: a moved run's mark is drawn again
            m.cells(rid, 0.0)
        batch = Batch()
        for step in range(30):
            ids = sorted(mirror)
            kind = rnd.choice(["moved", "upsert", "remove"])
            if kind == "moved":
                places = [(rid, rnd.randint(1, 500)) for rid in rnd.sample(ids, 20)]
                batch.add_change([], [], float(step), places)
                for rid, position in places:
                    mirror[rid] = msgspec.structs.replace(mirror[rid], position=position)
            elif kind == "upsert":
                runs = [msgspec.structs.replace(mirror[rid], priority=rnd.randint(-3, 3),
                                                position=rnd.randint(1, 500))
                        for rid in rnd.sample(ids, 5)]  # fmt: skip
                batch.add_change(runs, [], float(step))
                mirror.update({r.id: r for r in runs})
            else:
                gone = rnd.sample(ids, 3)
                batch.add_change([], gone, float(step), [(gone[0], 7)])  # a late place: dropped
                for rid in gone:
                    mirror.pop(rid)
            if rnd.random() < 0.3:
                m.apply(batch)
                batch = Batch()
        m.apply(batch)
        assert m.runs == mirror
        fresh = QueueModel()
        fresh.apply(Batch(snapshot=list(mirror.values())))
        assert m.view() == fresh.view() and m.waiting(50) == fresh.waiting(50)
        for rid in mirror:
            assert [c.plain for c in m.cells(rid, 0.0)] == [c.plain for c in fresh.cells(rid, 0.0)]


def test_runs_whose_place_alone_moved_are_drawn_again_but_never_looked_up_as_starts() -> None:
    running = Run(id="run", name="run", workspace="a", state=RunState.RUNNING,
                  started_at="2026-12-01T10:00:00Z", visible=True)  # fmt: skip
    queued = [Run(id=f"q{i}", name=f"q{i}", workspace="a", state=RunState.QUEUED,
                  position=i + 1) for i in range(3)]  # fmt: skip
    m = QueueModel()
    first = m.apply(Batch(snapshot=[running, *queued]))
    assert m.starts_to_check(first) == {"run": "2026-12-01T10:00:00Z"}  # once, then known
    batch = Batch()
    batch.add_change([msgspec.structs.replace(queued[0], position=None, held=True)], [], 1.0,
                     [("q1", 1), ("q2", 2)])  # fmt: skip
    diff = m.apply(batch)
    assert diff.moved == {"q1", "q2"} and diff.changed == {"q0", "q1", "q2"}
    assert m.starts_to_check(diff) == {}
    assert [r.id for r in m.waiting(3)] == ["q1", "q2", "q0"]
