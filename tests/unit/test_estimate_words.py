"""An estimate in words, as the dashboard (astraeus_tui/fmt.py) and the CLI's fast path
(astraeus_tui/cli/fast/preview.py) each say it: the same words from the same estimate."""

from __future__ import annotations

import re
from typing import Any

import pytest

from astraeus_tui import fmt
from astraeus_tui.cli.fast import preview

BOUND = "2026-10-01T14:00:00Z"
ESTIMATES: dict[str, dict[str, Any]] = {
    "no forecast": {"starts_by": BOUND, "after": []},
    "the head": {"starts_by": BOUND, "after": [], "likely": "2026-10-01T13:10:00Z",
                 "likely_90": "2026-10-01T13:40:00Z", "learned_from": 37},
    "behind it": {"starts_by": BOUND, "after": [], "likely": "2026-10-01T13:10:00Z",
                  "likely_90": "2026-10-01T15:30:00Z", "learned_from": 37},
    "no bound": {"starts_by": None, "after": ["big"], "likely": "2026-10-01T13:10:00Z",
                 "likely_90": "2026-10-01T15:30:00Z", "learned_from": 37},
}  # fmt: skip
WORDS = {
    "no forecast": "starts by 2026-10-01 14:00 UTC",
    "the head": "likely 2026-10-01 13:10 UTC, by 2026-10-01 13:40 UTC at 90 % (from 37"
    " finished runs); starts by 2026-10-01 14:00 UTC",
    # a 90 % start later than the limits' estimate: that estimate is no promise
    "behind it": "likely 2026-10-01 13:10 UTC, by 2026-10-01 15:30 UTC at 90 % (from 37"
    " finished runs); 2026-10-01 14:00 UTC if no more urgent run is submitted",
}


@pytest.mark.parametrize("case", sorted(WORDS))
def test_the_fast_path_says_an_estimate_in_words(case: str) -> None:
    assert preview.when(ESTIMATES[case]) == WORDS[case]


@pytest.mark.parametrize("case", sorted(ESTIMATES))
def test_the_dashboard_says_the_same_clocks_and_clauses(case: str) -> None:
    """The dashboard says clocks without the day; the rest is word for word."""
    fast = re.sub(r"2026-10-01 (\d\d:\d\d)", r"\1", preview.when(ESTIMATES[case]))
    fast = fast.replace("starts after big end(s) (no time limit)", "after big ends (no time limit)")
    assert fmt.when(ESTIMATES[case]) == fast


def _page(**forecast: Any) -> str:
    """The run page's facts of the recorded queue's sweep-lr with ``forecast``."""
    from rich.console import Console

    from astraeus_tui.screens.detail import facts
    from runner.schema import RunDetail
    from tests.tui.fake_client import load_fixture, typed

    recorded = load_fixture("head")["runs"]["sweep-lr"]
    run = typed(RunDetail, {**recorded, "starts_by": "2026-10-01T15:30:44Z", **forecast})
    console = Console(width=120)
    with console.capture() as shown:
        console.print(facts(run))
    return shown.get()


def test_the_run_page_says_when_its_estimate_from_the_limits_is_no_promise() -> None:
    def bound(page: str) -> bool:
        return any(line.split() == ["starts", "by", "10-01", "15:31"]
                   for line in page.splitlines())  # fmt: skip

    assert bound(_page())
    before = {"likely_start": "2026-10-01T14:10:00Z", "likely_start_90": "2026-10-01T15:00:00Z",
              "learned_from": 37}  # fmt: skip
    assert bound(_page(**before))
    after = _page(**{**before, "likely_start_90": "2026-10-01T16:00:00Z"})
    assert not bound(after) and "by the limits" in after
    assert "10-01 15:31 if no more urgent run is submitted" in after  # as START says it


def test_the_likely_start_is_said_to_the_nearest_minute_and_the_others_up() -> None:
    """As ``astra ls`` and the run's reason say them: ``~13:10`` for a likely 13:10:20, the
    90 % start and the limits' estimate never earlier than they may be; the fast path
    (``astra why``, ``--dry-run``) with the day, as the reason beside it."""
    seconds = {"starts_by": "2026-10-01T14:00:20Z", "after": [],
               "likely": "2026-10-01T13:10:20Z", "likely_90": "2026-10-01T13:30:20Z",
               "learned_from": 5}  # fmt: skip
    words = fmt.when(seconds)
    assert words.startswith("likely 13:10 UTC, by 13:31 UTC at 90 %"), words
    assert words.endswith("starts by 14:01 UTC"), words
    said = preview.when(seconds)
    assert said.startswith("likely 2026-10-01 13:10 UTC, by 2026-10-01 13:31 UTC"), said
    assert said.endswith("starts by 2026-10-01 14:01 UTC"), said


def test_before_there_is_history_the_forecast_says_so() -> None:
    """Fewer finished runs than a forecast needs: said as such beside the estimate from
    the limits, in the fast path's words and the dashboard's alike."""
    estimate = {"starts_by": "2026-10-01T14:00:20Z", "after": [], "learned_from": 2,
                "forecast_needs": 5}  # fmt: skip
    said = "likely start: no history yet (2 of 5 finished runs); starts by"
    assert preview.when(estimate).startswith(said), preview.when(estimate)
    assert fmt.when(estimate).startswith(said), fmt.when(estimate)
    enough = {"starts_by": "2026-10-01T14:00:20Z", "after": []}  # or not the caller's run
    assert "history" not in preview.when(enough) + fmt.when(enough)
    page = _page(learned_from=2, forecast_needs=5)
    assert any(line.split()[:5] == ["likely", "start", "no", "history", "yet"]
               for line in page.splitlines()), page  # fmt: skip
