"""The START cell, which `astra ls` and the dashboard's queue and timeline share."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from astraeus_tui.when import start_label
from runner.model import RunState
from runner.schema import Run

NOW = datetime(2026, 10, 1, 12, 0, 21, tzinfo=UTC).timestamp()


def queued(starts_by: str | None, state: str = "Queued") -> Run:
    return Run(id="r", name="r", workspace="w", state=RunState(state), starts_by=starts_by)


@pytest.mark.parametrize(
    ("starts_by", "shown"),
    [
        ("2026-10-01T12:45:00Z", "12:45"),  # today
        ("2026-10-01T12:45:28Z", "12:46"),  # rounded up, as the planner says "starts by"
        ("2026-10-01T23:59:30Z", "10-02 00:00"),  # rounded up into tomorrow
        ("2026-10-02T09:00:00Z", "10-02 09:00"),  # another day: with its date
        ("2026-09-30T23:00:00Z", "09-30 23:00"),  # a stale one is not taken for today
        (None, "?"),  # no estimate: work without a time limit is in the way
    ],
)
def test_a_waiting_run_shows_when_it_starts_at_the_latest(
    starts_by: str | None, shown: str
) -> None:
    assert start_label(queued(starts_by), NOW) == shown


@pytest.mark.parametrize("state", ["Starting", "Running", "Stopping", "Succeeded"])
def test_a_run_that_does_not_wait_shows_nothing(state: str) -> None:
    assert start_label(queued("2026-10-01T12:45:00Z", state), NOW) == ""


def test_a_run_backing_off_shows_when_it_starts_again_and_its_page_counts_down() -> None:
    from astraeus_tui.screens.detail import _restarts

    run = Run(id="r", name="r", workspace="w", state=RunState.QUEUED, restarts=3,
              restart_at="2026-10-01T12:00:44Z")  # fmt: skip
    assert start_label(run, NOW) == "12:00:44"  # to the second: a back-off is short
    assert _restarts(run, NOW) == "3 of 10 · again at 12:00:44 UTC (in 23 s)"
    assert _restarts(run, NOW + 23) == "3 of 10 · again at 12:00:44 UTC (now)"
    assert _restarts(queued(None), NOW) == "0 of 10"


def test_a_forecast_shows_the_likely_start_and_wide_its_90_percent_and_the_limits() -> None:
    run = Run(id="r", name="r", workspace="w", state=RunState.QUEUED,
              starts_by="2026-10-01T15:30:44Z", likely_start="2026-10-01T14:09:40Z",
              likely_start_90="2026-10-01T15:30:00Z", learned_from=37)  # fmt: skip
    assert start_label(run, NOW) == "~14:10"
    assert start_label(run, NOW, wide=True) == "~14:10 ≤15:30 (90%) limits 15:31"
    unbound = Run(
        id="r",
        name="r",
        workspace="w",
        state=RunState.QUEUED,
        likely_start="2026-10-01T14:09:40Z",
        likely_start_90="2026-10-02T01:00:00Z",
    )
    assert start_label(unbound, NOW, wide=True) == "~14:10 ≤10-02 01:00 (90%)"
