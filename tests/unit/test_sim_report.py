"""The report of ``astra sim``: hand-computed summaries of small replays, their JSON and
the table that sets policies side by side."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from runner.sim.replay import calibration, kept_interval
from runner.sim.report import (
    Calibration,
    Outcome,
    Summary,
    Waits,
    outcome_json,
    render_table,
    summarise,
    summary_json,
)


def run(
    name: str,
    submit: float,
    start: float | None,
    end: float | None,
    *,
    gpus: float = 1.0,
    duration: float = 100.0,
    held: float | None = None,
    lost: float = 0.0,
    preemptions: int = 0,
    priority: int = 0,
    workspace: str = "default",
    estimates: int = 0,
    late: int = 0,
    overtaken: int = 0,
) -> Outcome:
    """An outcome; by default it held its GPUs for exactly its duration."""
    state = "SUCCEEDED" if end is not None else ("RUNNING" if start is not None else "QUEUED")
    return Outcome(
        name=name,
        submit=submit,
        start=start,
        end=end,
        state=state,
        preemptions=preemptions,
        restarts=preemptions,
        priority=priority,
        workspace=workspace,
        gpus=gpus,
        duration=duration,
        held=gpus * duration if held is None else held,
        lost=lost,
        estimates=estimates,
        late=late,
        overtaken=overtaken,
    )


def machine() -> list[Outcome]:
    """Four GPUs for 200 s: a 2-GPU run, a run sharing half a GPU, and a run preempted once."""
    return [
        run("a", 0, 0, 100, gpus=2, priority=100, workspace="vision", estimates=1),
        run("b", 0, 100, 200, gpus=0.5, workspace="nlp", estimates=3, late=1, overtaken=1),
        run("c", 50, 50, 200, held=150, lost=50, preemptions=1, workspace="vision"),
    ]


def waiting() -> list[Outcome]:
    """Five runs, one never started and one still running when the replay ended at 1000."""
    return [
        run("r1", 0, 0, 100),
        run("r2", 0, 10, 110),
        run("r3", 0, 30, 32, duration=2),
        run("r4", 400, None, None, gpus=4, duration=50, held=0),
        run("r5", 100, 300, None, gpus=4, duration=1000, held=2800),
    ]


def test_utilisation_counts_a_shared_run_as_its_fraction() -> None:
    s = summarise("fifo", machine(), gpus=4)
    assert s.span == 200
    assert s.utilisation == pytest.approx((200 + 50 + 150) / (4 * 200))


def test_offered_load_is_what_the_runs_asked_for() -> None:
    s = summarise("fifo", machine(), gpus=4)
    assert s.offered == pytest.approx((2 * 100 + 0.5 * 100 + 1 * 100) / (4 * 200))


def test_lost_work_and_its_share_of_all_held() -> None:
    s = summarise("fifo", machine(), gpus=4)
    assert s.preemptions == 1
    assert s.lost_gpu_hours == pytest.approx(50 / 3600)
    assert s.lost_share == pytest.approx(50 / 400)
    assert (s.late, s.overtaken, s.estimates, s.unfinished) == (1, 1, 4, 0)


def test_waits_count_a_never_started_run_until_the_replay_ended() -> None:
    s = summarise("fifo", waiting(), gpus=8, ended_at=1000)
    waits = s.all
    assert (waits.runs, waits.started) == (5, 4)
    # waits sorted: 0, 10, 30, 200 (r5), 600 (r4: 1000 - 400)
    assert (waits.p50, waits.p95, waits.max) == (30, 600, 600)
    assert s.unfinished == 2
    assert s.span == 1000  # unfinished runs stretch the makespan to the replay's end


def test_the_replay_ends_by_default_at_the_last_time_it_mentions() -> None:
    outcomes = [run("x", 0, 0, 100), run("y", 50, None, None, held=0)]
    assert summarise("fifo", outcomes, gpus=1).all.max == 50  # 100 - 50


def test_bounded_slowdown_floors_short_runs_at_ten_seconds() -> None:
    short = summarise("fifo", [run("s", 0, 30, 32, duration=2)], gpus=1).all
    assert short.slowdown_p50 == pytest.approx((30 + 2) / 10)
    instant = summarise("fifo", [run("i", 0, 0, 2, duration=2)], gpus=1).all
    assert instant.slowdown_p50 == 1.0  # never below 1
    s = summarise("fifo", waiting(), gpus=8, ended_at=1000).all
    # slowdowns sorted: 1.0, 1.1, 1.2 (r5), 3.2 (r3), 13.0 (r4: (600 + 50) / 50)
    assert s.slowdown_p50 == pytest.approx(1.2)
    assert s.slowdown_p95 == pytest.approx(13.0)


def test_nearest_rank_percentiles() -> None:
    outcomes = [run(f"r{i}", 0, float(i), float(i) + 100) for i in range(1, 21)]
    waits = summarise("fifo", outcomes, gpus=20).all
    assert (waits.p50, waits.p95, waits.max) == (10, 19, 20)


def test_largest_runs_longest_wait() -> None:
    s = summarise("fifo", waiting(), gpus=8, ended_at=1000)
    assert s.all.largest_wait == 600  # r4 and r5 ask 4 GPUs; r4 waited longest
    cpu_only = [run("p", 0, 5, 10, gpus=0), run("q", 0, 40, 50, gpus=0)]
    assert summarise("fifo", cpu_only, gpus=1).all.largest_wait == 40


def test_groups_by_priority_high_to_low_and_by_workspace() -> None:
    s = summarise("fifo", machine(), gpus=4)
    assert list(s.by_priority) == [100, 0]
    assert list(s.by_workspace) == ["nlp", "vision"]
    low = s.by_priority[0]  # b waited 100, c none
    assert (low.runs, low.p50, low.max) == (2, 0, 100)
    assert s.by_priority[100].runs == 1 and s.by_priority[100].max == 0
    assert s.by_workspace["nlp"].p95 == 100
    assert (s.by_workspace["vision"].runs, s.by_workspace["vision"].max) == (2, 0)


def test_an_empty_replay_is_all_zeros() -> None:
    s = summarise("fifo", [], gpus=4)
    assert (s.runs, s.span, s.utilisation, s.offered, s.lost_share) == (0, 0, 0, 0, 0)
    assert s.all == Waits(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert s.by_priority == {} and s.by_workspace == {}


def test_json_round_trips() -> None:
    s = summarise("fifo", waiting(), gpus=8, ended_at=1000)
    data = summary_json(s)
    assert json.loads(json.dumps(data)) == data
    assert data["policy"] == "fifo" and data["span"] == 1000
    assert data["all"] == {
        "runs": 5,
        "started": 4,
        "wait_p50": 30,
        "wait_p95": 600,
        "wait_max": 600,
        "slowdown_p50": pytest.approx(1.2),
        "slowdown_p95": pytest.approx(13.0),
        "largest_wait": 600,
    }
    by_priority = summary_json(summarise("fifo", machine(), gpus=4))["by_priority"]
    assert isinstance(by_priority, dict) and list(by_priority) == ["100", "0"]
    row = outcome_json(waiting()[3])
    assert json.loads(json.dumps(row)) == row
    assert (row["name"], row["start"], row["end"], row["state"]) == ("r4", None, None, "QUEUED")
    assert {
        "submit",
        "preemptions",
        "restarts",
        "priority",
        "workspace",
        "gpus",
        "held",
        "lost",
    } <= set(row)


def _row(table: str, label: str) -> list[str]:
    """The cells of the table's row named ``label``."""
    for line in table.splitlines():
        if line.startswith(label + "  "):
            return line[len(label) :].split()
    raise AssertionError(f"no row {label!r} in\n{table}")


def two_policies() -> tuple[Summary, Summary]:
    fifo = summarise("fifo", machine(), gpus=4)
    late = [run("z", 0, 3600, 4000, gpus=2, duration=400, priority=100, workspace="vision")]
    return fifo, summarise("astraeus", late, gpus=4)


def test_the_table_sets_policies_side_by_side() -> None:
    fifo, astraeus = two_policies()
    table = render_table([fifo, astraeus])
    assert _row(table, "policy") == ["fifo", "astraeus"]
    assert _row(table, "runs") == ["3", "1"]
    assert _row(table, "utilisation") == ["50.0%", "5.0%"]  # 800 / (4 * 4000)
    assert _row(table, "wait max") == ["1m", "1h"]
    assert _row(table, "prio 100 wait p95") == ["0s", "1h"]
    assert _row(table, "prio 0 wait p95") == ["1m", "-"]
    assert _row(table, "ws nlp wait p95") == ["1m", "-"]
    assert _row(table, "estimates late") == ["1", "of", "4", "-"]  # none made for astraeus
    assert _row(table, "  overtaken by later work") == ["1", "-"]


def test_the_table_columns_line_up_and_fit() -> None:
    fifo, astraeus = two_policies()
    table = render_table([fifo, astraeus, fifo, astraeus])
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 100
    ends = {len(line) for line in lines if not line.startswith(("prio 0", "ws nlp"))}
    assert len(ends) == 1  # every full row ends in the same column
    assert render_table([]) == ""


def test_the_forecasts_calibration_has_its_rows_and_json() -> None:
    calibration = Calibration(forecasts=10, kept=9, likely_error=120, bounds=8, bound_error=600,
                              kept_interval=(0.7, 1.0),
                              kept_by_priority=((100, 4, 4), (-5, 5, 6)))  # fmt: skip
    measured = summarise("astraeus", machine(), gpus=4, calibration=calibration)
    table = render_table([summarise("fifo", machine(), gpus=4), measured])
    assert _row(table, "started by the 90% forecast") == [
        "-",
        "90.0%",
        "of",
        "10",
        "(70.0%-100.0%)",
    ]
    assert _row(table, "  prio 100") == ["-", "100.0%", "of", "4"]
    assert _row(table, "  prio -5") == ["-", "83.3%", "of", "6"]
    assert _row(table, "  likely start's error (p50)") == ["-", "2m"]
    assert _row(table, "  the bound's error (p50)") == ["-", "10m"]
    assert summary_json(measured)["forecasts"] == {
        "forecasts": 10, "kept_p90": 9, "likely_error": 120, "bounds": 8, "bound_error": 600,
        "kept_p90_interval": [0.7, 1.0], "kept_p90_by_priority": {"100": [4, 4], "-5": [5, 6]},
    }  # fmt: skip


def test_each_forecast_is_checked_against_the_start_that_followed_it() -> None:
    """A run started at 100, was preempted, waited again and started at 500: what it was
    forecast at 300 is checked against 500, not against the start before the forecast."""
    requeued = replace(run("requeued", 0, 100, None, preemptions=1), starts=(100.0, 500.0))
    never = run("never", 0, None, None)
    made = {
        "requeued": [(50.0, 90.0, 120.0, 150.0), (300.0, 450.0, 520.0, 560.0)],
        "never": [(50.0, 60.0, 70.0, None)],  # it never started: nothing to check
    }
    c = calibration(made, [requeued, never])
    assert (c.forecasts, c.kept, c.bounds) == (2, 2, 2)
    assert c.likely_error == (10 + 50) / 2  # |100 - 90| and |500 - 450|
    assert c.bound_error == (50 + 60) / 2
    late = calibration({"requeued": [(300.0, 450.0, 480.0, None)]}, [requeued])
    assert (late.forecasts, late.kept, late.bounds) == (1, 0, 0)


def test_the_share_kept_has_an_interval_from_the_runs_drawn_again() -> None:
    """Each run's forecasts are drawn together: a run forecast 100 times, all missed, weighs
    as one run, not as 100 independent misses."""
    runs = [replace(run(f"r{i}", 0, 1000, None), starts=(1000.0,)) for i in range(20)]
    made = {f"r{i}": [(float(t), 500.0, 2000.0, None) for t in range(10)] for i in range(19)}
    made["r19"] = [(float(t), 500.0, 900.0, None) for t in range(100)]  # every one missed
    c = calibration(made, runs)
    assert (c.forecasts, c.kept) == (290, 190)
    assert c.kept_by_priority == ((0, 190, 290),)
    runs[19] = replace(runs[19], priority=100)  # the one run missed: its class's share
    assert calibration(made, runs).kept_by_priority == ((100, 0, 100), (0, 190, 190))
    low, high = c.kept_interval
    assert low < c.kept_share < high  # 190 of 290: 65.5 %
    assert low < 0.4 and high == 1.0  # a third of the draws miss r19: all kept
    assert calibration(made, runs).kept_interval == (low, high)  # seeded: said the same again
    assert kept_interval([(3, 4)] * 50) == (0.75, 0.75)  # every run alike: no doubt left
    assert kept_interval([]) == (0.0, 0.0)
