"""``history_trace``: the daemon's history entries (``GET /v1/history``'s JSON objects) as a
trace for ``astra sim --history``: times from the earliest submit, durations from the time
its workers ran, names made unique, runs cancelled before they started left out, and the
same options as every other reader."""

from __future__ import annotations

from typing import Any

import pytest

from runner.config.load import parse_config
from runner.sim.replay import Replay, SimMachine, sim_config
from runner.sim.trace import ReadOptions, TraceError, TraceRun, history_trace

GIB = 1024**3


def entry(name: str, submitted: str = "2026-12-02T03:00:00Z", **fields: Any) -> dict[str, Any]:
    """A history entry as the daemon sends it, of a run that ran for a minute."""
    return {
        "uid": "ab" * 16, "name": name, "workspace": "vision", "owner": "ann",
        "outcome": "Succeeded", "exit_code": 0, "submitted_at": submitted,
        "started_at": submitted, "finished_at": submitted, "elapsed_seconds": 70.0,
        "wait_seconds": 0.0, "gpus": 1, "gpu_hours": 0.0, "core_hours": 0.0,
        "preemptions": 0, "restarts": 0, "priority": 0, "time_limit_seconds": None,
        "workers": 1, "gpu_memory_bytes": None, "cpus": 0.0, "memory_bytes": None,
        "run_seconds": 60.0, **fields,
    }  # fmt: skip


def test_an_entry_becomes_the_run_it_asked_for() -> None:
    entries = [
        entry("first", "2026-12-02T03:00:00Z"),
        entry(
            "big", "2026-12-02T03:02:30Z", gpus=4, workers=2, gpu_memory_bytes=None,
            cpus=8.0, memory_bytes=64 * GIB, priority=50, time_limit_seconds=3600,
            workspace="nlp", run_seconds=1234.5,
        ),
        entry("shared", "2026-12-02T03:01:00Z", gpus=1, gpu_memory_bytes=20 * GIB),
    ]  # fmt: skip
    trace = history_trace(entries, ReadOptions())
    assert [run.name for run in trace.runs] == ["first", "shared", "big"]
    first, shared, big = trace.runs
    assert first == TraceRun("first", 0.0, 60.0, gpus=1, workspace="vision")
    assert (shared.submit, shared.gpus, shared.gpu_memory) == (60.0, 1, 20 * GIB)
    assert big == TraceRun(
        "big", 150.0, 1234.5, gpus=2, cpus=8.0, memory=64 * GIB, priority=50,
        workspace="nlp", time_limit=3600.0, workers=2,
    )  # fmt: skip
    assert trace.left_out == {}


def test_the_duration_falls_back_to_the_elapsed_time_then_to_nothing() -> None:
    entries = [
        entry("old", run_seconds=None, elapsed_seconds=42.0),
        entry("older", run_seconds=None, elapsed_seconds=None),
        entry("bare", submitted="2026-12-02T03:00:10Z"),
    ]
    for key in ("run_seconds", "elapsed_seconds", "priority", "workers", "cpus"):
        del entries[2][key]  # an older daemon's entry
    got = {run.name: run for run in history_trace(entries, ReadOptions()).runs}
    assert (got["old"].duration, got["older"].duration, got["bare"].duration) == (42.0, 0, 0)
    assert (got["bare"].workers, got["bare"].priority, got["bare"].submit) == (1, 0, 10.0)


def test_a_name_seen_again_gets_the_next_free_number() -> None:
    long = "x" * 63
    entries = [
        entry("replica", "2026-12-02T03:00:00Z"),
        entry("replica", "2026-12-02T03:05:00Z"),
        entry("replica-2", "2026-12-02T03:06:00Z"),  # a run's own name: never taken
        entry("replica", "2026-12-02T03:10:00Z"),
        entry(long, "2026-12-02T03:00:00Z"),
        entry(long, "2026-12-02T03:01:00Z"),
    ]
    runs = history_trace(entries, ReadOptions()).runs
    by_submit = sorted(runs, key=lambda run: (run.submit, run.name))
    assert [run.name for run in by_submit] == [
        "replica", long, long[:61] + "-2", "replica-3", "replica-2", "replica-4",
    ]  # fmt: skip
    assert all(len(run.name) <= 63 for run in runs)


def test_a_run_cancelled_before_it_started_is_left_out_and_counted() -> None:
    entries = [
        entry("ran"),
        entry("deleted", outcome="Cancelled", started_at=None, gpus=0, run_seconds=0.0),
        entry("dependency-failed", outcome="Failed", started_at=None, gpus=0, run_seconds=0.0),
        entry("stopped", outcome="Cancelled", run_seconds=5.0),
    ]
    trace = history_trace(entries, ReadOptions())
    assert sorted(run.name for run in trace.runs) == ["dependency-failed", "ran", "stopped"]
    assert trace.left_out == {"never started": 1}


def test_the_options_cut_it_down_as_they_do_every_trace() -> None:
    entries = [
        entry(f"r{i}", f"2026-12-02T03:00:{i:02d}Z", run_seconds=float(i)) for i in range(10)
    ]
    trace = history_trace(entries, ReadOptions(since=2, longest=7, limits="x2"))
    assert [run.name for run in trace.runs] == [f"r{i}" for i in range(2, 8)]
    assert [run.submit for run in trace.runs] == [float(i) for i in range(6)]
    assert [run.time_limit for run in trace.runs] == [max(1.0, 2.0 * i) for i in range(2, 8)]
    assert trace.left_out == {"before --since": 2, "longer than --longest": 2}
    sampled = history_trace(entries, ReadOptions(sample=0.5, seed=3))
    assert sampled == history_trace(entries, ReadOptions(sample=0.5, seed=3))
    assert len(sampled.runs) + sampled.left_out.get("sampled out", 0) == 10


def test_no_entries_no_runs() -> None:
    assert history_trace([], ReadOptions()).runs == ()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"submitted_at": "yesterday"}, "history entry 1: submitted_at: 'yesterday' is not"),
        ({"submitted_at": None}, "history entry 1: submitted_at:"),
        ({"name": ""}, "history entry 1: name:"),
        ({"gpus": -1}, "history entry 1: gpus: -1 is below 0"),
        ({"workers": 0}, "history entry 1: workers: 0 is below 1"),
        ({"priority": 5000}, "history entry 1: priority: 5000 is above 1000"),
        ({"run_seconds": "long"}, "history entry 1: run_seconds: 'long' is not a number"),
        ({"cpus": float("nan")}, "history entry 1: cpus: nan is not a number of at least 0"),
    ],
)
def test_an_entry_that_is_not_one_is_refused_naming_it(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(TraceError) as e:
        history_trace([{**entry("bad"), **fields}], ReadOptions())
    assert str(e.value).startswith(message)


def test_its_runs_replay_names_made_unique_and_all() -> None:
    entries = [entry("again", f"2026-12-02T03:0{i}:00Z", run_seconds=30.0) for i in range(3)]
    trace = history_trace([{**e, "workspace": "default"} for e in entries], ReadOptions())
    config = sim_config(parse_config('[admins]\nusers = ["root"]\n'))
    done = Replay(trace.runs, config, SimMachine(2, 80 * GIB, 32, 256 * GIB)).run()
    assert done.refused == {}
    assert sorted(o.name for o in done.outcomes) == ["again", "again-2", "again-3"]
    assert all(o.state == "Succeeded" for o in done.outcomes)
