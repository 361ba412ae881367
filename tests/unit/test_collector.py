"""runner/engine/collector.py: a queue grown by thousands is moved out of the GC's passes."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from runner.engine.collector import Collector


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_growth_by_the_threshold_freezes_what_lives() -> None:
    collector = Collector(after=100)
    rows = [{"run": i} for i in range(50)]  # long-lived, tracked by the collector
    assert not collector.seen(99) and gc.get_freeze_count() == 0
    assert collector.seen(100)
    frozen = gc.get_freeze_count()
    assert frozen > len(rows)
    assert not collector.seen(150)  # 50 more since: not yet
    assert collector.seen(200) and gc.get_freeze_count() >= frozen


def test_a_shrunk_queue_counts_its_growth_from_where_it_is() -> None:
    collector = Collector(after=100)
    assert collector.seen(500)
    assert not collector.seen(20)  # finished runs: nothing frozen, the base moves down
    assert not collector.seen(110)
    assert collector.seen(120)


def test_what_dies_after_a_freeze_is_still_freed() -> None:
    import weakref

    class Row:
        pass

    row = Row()
    gone = weakref.ref(row)
    Collector(after=1).seen(1)
    del row  # by its reference count, frozen or not
    assert gone() is None
