"""The faces' times without datetime (astraeus_tui/when.py) against datetime itself."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from astraeus_tui.cli.plain import age
from astraeus_tui.when import day_clock, epoch, utc_clock

moments = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59))


def reference_epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@settings(max_examples=1000, deadline=None)
@given(moments)
def test_the_daemons_form_is_read_as_datetime_reads_it(moment: datetime) -> None:
    iso = moment.replace(tzinfo=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    assert epoch(iso) == reference_epoch(iso)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="0123456789-:TZ+. ²_", min_size=18, max_size=22))
def test_any_other_text_is_read_or_refused_as_datetime_does(text: str) -> None:
    try:
        want: float | type[ValueError] = reference_epoch(text)
    except ValueError:
        want = ValueError
    try:
        got: float | type[ValueError] = epoch(text)  # type: ignore[assignment]
    except ValueError:
        got = ValueError
    assert got == want, text


def test_edges_of_the_calendar() -> None:
    for iso in (
        "2024-02-29T00:00:00Z",
        "2000-02-29T23:59:59Z",
        "1970-01-01T00:00:00Z",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "1969-12-31T23:59:59Z",
    ):
        assert epoch(iso) == reference_epoch(iso), iso
    for bad in (
        "2023-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-12-01T24:00:00Z",
        "2026-12-01T00:60:00Z",
        "0000-01-01T00:00:00Z",
    ):
        try:
            epoch(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} was read")
    assert epoch(None) is None and epoch("") is None


@settings(max_examples=1000, deadline=None)
@given(st.floats(min_value=-1e10, max_value=2.5e11, allow_nan=False))
def test_clocks_are_datetimes(t: float) -> None:
    moment = datetime.fromtimestamp(t, UTC)
    assert utc_clock(t) == moment.strftime("%H:%M:%S")
    up = datetime.fromtimestamp(math.ceil(t / 60) * 60, UTC)  # rounded up, as the planner
    assert utc_clock(t, seconds=False) == up.strftime("%H:%M")
    near = datetime.fromtimestamp(round(t / 60) * 60, UTC)  # a likely start, to the nearest
    assert utc_clock(t, seconds=False, nearest=True) == near.strftime("%H:%M")


def test_a_minute_said_is_on_the_day_it_rounds_to() -> None:
    """A start at 23:59:40 is said on the next day (up to 00:00), and to the nearest minute
    too; 23:59:20 to the nearest stays on its own day."""
    now = datetime(2026, 12, 7, 12, tzinfo=UTC).timestamp()
    late = datetime(2026, 12, 7, 23, 59, 40, tzinfo=UTC).timestamp()
    assert day_clock(late, now) == "12-08 00:00"
    assert day_clock(late, now, nearest=True) == "12-08 00:00"
    assert day_clock(late - 20, now, nearest=True) == "23:59"
    assert day_clock(late - 20, now) == "12-08 00:00"


@settings(max_examples=300, deadline=None)
@given(moments, st.integers(min_value=-100, max_value=10**8), st.floats(0, 0.99))
def test_ages_are_the_seconds_between(moment: datetime, seconds: int, frac: float) -> None:
    then = moment.replace(tzinfo=UTC, microsecond=0)
    iso = then.isoformat(timespec="seconds").replace("+00:00", "Z")
    now = then + timedelta(seconds=seconds)
    if now.year > 9999:
        return
    elapsed = seconds
    want = next((f"{elapsed // s}{u}" for u, s in (("d", 86400), ("h", 3600), ("m", 60))
                 if elapsed >= s), f"{max(elapsed, 0)}s")  # fmt: skip
    assert age(iso, now.timestamp() + frac) == want
    assert age(None) == "-"


def test_where_a_run_runs_is_said_in_the_singular_for_one_gpu() -> None:
    from astraeus_tui.when import on_gpus

    assert on_gpus([0]) == "on GPU 0"
    assert on_gpus((0, 1)) == "on GPUs 0,1"
    assert on_gpus([]) == on_gpus(None) == "on no GPU"
