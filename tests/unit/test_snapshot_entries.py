"""The loop's snapshot (runner/engine/snapshot.py) keeps each waiting gang's planner entry
while its row and spec are the ones the store's queue cache handed out before: a submit
to a queue of thousands makes one new entry, and the snapshot is the one a fresh build
gives."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from runner.engine.settings import LoopSettings
from runner.engine.snapshot import SpecCache, build_snapshot
from runner.model import RunState
from runner.planner.types import Machine
from runner.store.db import RunRow, Store
from tests.unit.store_rows import queued_row


def _row(name: str, submitted: float, workers: int = 1) -> RunRow:
    task = {"command": "true", "requested_resources": {"gpu_requests": {"count": 1}}}
    doc = {"metadata": {"name": name}, "spec": {"task_template": task, "workers": workers}}
    return queued_row(name, json.dumps(doc), submitted)


def _settings(tmp_path: Path) -> LoopSettings:
    return LoopSettings(Machine((0, 1), 8000, 64 << 30), {}, {}, tmp_path / "logs")


def test_a_waiting_runs_entry_is_made_again_only_when_its_row_or_spec_changed(
    tmp_path: Path,
) -> None:
    store, settings, specs = Store(tmp_path / "state.db"), _settings(tmp_path), SpecCache()
    for i, name in enumerate(("a", "b", "c")):
        store.runs.insert(_row(name, 1000.0 + i, workers=2 if name == "c" else 1))
    first = build_snapshot(settings, store.runs.all(active_only=True), [], specs)
    again = build_snapshot(settings, store.runs.all(active_only=True), [], specs)
    assert again == first
    assert all(x is y for x, y in zip(again.waiting, first.waiting, strict=True))
    assert [(w.name, w.workers, w.total.gpus) for w in first.waiting] == [
        ("a", (0,), 1), ("b", (0,), 1), ("c", (0, 1), 2),
    ]  # fmt: skip

    with store.transaction() as tx:
        store.runs.set_priority(tx, "b", 7)
    after = build_snapshot(settings, store.runs.all(active_only=True), [], specs)
    by_name = {w.name: w for w in after.waiting}
    assert by_name["b"].priority == 7 and by_name["b"] is not first.waiting[1]
    assert by_name["a"] is first.waiting[0] and by_name["c"] is first.waiting[2]
    fresh = build_snapshot(settings, store.runs.all(active_only=True), [], SpecCache())
    assert after == fresh  # what the planner is given: as if made from nothing

    with store.transaction() as tx:
        store.runs.finish(tx, "a", RunState.CANCELLED, 1100.0, None)
    runs = store.runs.all(active_only=True)
    specs.keep_only({r.name for r in runs})
    assert [w.name for w in build_snapshot(settings, runs, [], specs).waiting] == ["b", "c"]
    assert "a" not in specs


def test_a_spec_is_the_one_parsed_for_its_row_until_the_run_is_edited() -> None:
    specs = SpecCache()
    row = _row("a", 1000.0)
    first = specs.get(row)
    assert specs.get(row) is first  # the same row: the same spec
    again = dataclasses.replace(row)  # read again, unchanged
    assert specs.get(again) is first and specs.get(row) is first
    edited = dataclasses.replace(row, spec_text=_row("a", 1000.0, workers=3).spec_text)
    assert specs.get(edited).workers == 3 and specs.get(edited) is not first
    assert specs.get(row).workers == 1  # an older read still has its own spec
    reused = _row("a", 2000.0)  # forgotten, and the name used again
    assert specs.get(reused) is not first and specs.get(reused).workers == 1
    specs.forget(["a"])
    assert "a" not in specs and specs.get(reused).workers == 1


def test_the_planner_s_specs_keep_no_submit_environment() -> None:
    """Kilobytes a run no plan reads: a start reads the environment from the store."""
    from runner.engine.starts import submit_env

    row = _row("venv", 1.0)
    doc = json.loads(row.spec_text)
    doc["spec"]["task_template"]["submit_env"] = {"VIRTUAL_ENV": "/home/a/.venv", "X": "y" * 900}
    row = dataclasses.replace(row, spec_text=json.dumps(doc))
    assert SpecCache().get(row).task.submit_env == ()
    assert submit_env(row) == {"VIRTUAL_ENV": "/home/a/.venv", "X": "y" * 900}
