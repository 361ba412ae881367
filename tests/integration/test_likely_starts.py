"""Start forecasts from learned lengths, against a daemon with a history of similar runs."""

from __future__ import annotations

from collections.abc import Callable

from astraeus_tui.when import epoch
from runner.durations import utc_minute
from tests.support.harness import wait_for
from tests.support.notify import Receiver
from tests.support.served import Served

Start = Callable[..., Served]
HISTORY = 6  # finished runs of the same name stem (five are needed)
SECONDS = 4  # how long each of them ran


def _state(d: Served, name: str) -> str:
    return str(d.json("show", name)["state"])


def test_the_next_run_starts_within_its_band(served: Start) -> None:
    receiver = Receiver().start()
    d = served(gpus=3)
    for i in range(HISTORY):
        d.astra("run", "--name", f"hist-{i}", "--gpus", "1", "--", "sleep", str(SECONDS))
    wait_for(lambda: all(_state(d, f"hist-{i}") == "Succeeded" for i in range(HISTORY)), 60)
    # one more of them, with no time limit, holds every GPU: no bound for the run behind it
    d.astra("run", "--name", f"hist-{HISTORY}", "--gpus", "3", "--", "sleep", str(SECONDS))
    wait_for(lambda: _state(d, f"hist-{HISTORY}") == "Running")
    d.astra("run", "--name", "next", "--gpus", "3", "--notify", receiver.url, "--notify-on",
            "started", "--", "true")  # fmt: skip
    wait_for(lambda: "likely_start" in d.json("show", "next"), 20, "a forecast for next")
    shown = d.json("show", "next")
    assert shown["starts_by"] is None  # work without a time limit is in the way
    assert shown["learned_from"] == HISTORY
    likely, high = epoch(shown["likely_start"]), epoch(shown["likely_start_90"])
    assert likely is not None and high is not None and likely <= high
    why = d.json("why", "next")["estimate"]
    assert why["likely"] == shown["likely_start"] and why["learned_from"] == HISTORY
    text = d.astra("why", "next").stdout
    assert f"(from {HISTORY} finished runs); starts after hist-{HISTORY} end(s)" in text, text
    listed = d.astra("ls").stdout
    assert "~" in next(line for line in listed.splitlines() if " next " in line), listed
    wide = d.astra("ls", "--wide").stdout  # the 90 % start too (no limits' start: none)
    assert " ≤" in next(line for line in wide.splitlines() if " next " in line), wide
    assert "(90%)" in wide, wide
    assert "likely_start:" in d.astra("show", "next").stdout
    dry = d.astra("run", "--dry-run", "--name", "probe", "--gpus", "3", "--", "true").stdout
    assert "likely " in dry and f"(from {HISTORY} finished runs)" in dry, dry
    wait_for(lambda: _state(d, "next") == "Succeeded", 30)
    started = epoch(d.json("show", "next")["started_at"])
    # times on the wire are whole seconds: a second either side
    assert started is not None and likely - 1 <= started <= high + 1, (likely, started, high)
    # its start says what it was forecast, and so does the notification of it
    # (said to the minute, rounded up, from times the wire gave to the second)
    said = [
        f"(forecast: likely {utc_minute(likely + a, nearest=True)}, 90 % by"
        f" {utc_minute(high + b)})"
        for a in (-1, 0, 1) for b in (-1, 0, 1)
    ]  # fmt: skip
    events = d.astra("events", "next").stdout
    assert any(s in events for s in said), events
    wait_for(lambda: receiver.events_of("next") == ["started"], message="the started notice")
    receiver.stop()
    notice = receiver.notices()[0]
    assert any(s in notice["reason"] for s in said), notice
    # and for programs, as fields: the times the wire gave, to the second
    assert abs(notice["likely_start"] - likely) < 1 and abs(notice["likely_start_90"] - high) < 1


def test_no_forecast_without_history(served: Start) -> None:
    d = served(gpus=1)
    d.astra("run", "--name", "first", "--gpus", "1", "--", "sleep", "30")
    wait_for(lambda: _state(d, "first") == "Running")
    d.astra("run", "--name", "second", "--gpus", "1", "--", "true")
    wait_for(lambda: d.json("why", "second")["estimate"]["after"] == ["first"])
    shown, estimate = d.json("show", "second"), d.json("why", "second")["estimate"]
    assert "likely_start" not in shown and "likely" not in estimate
    # said as no history yet, not guessed: how many finished runs, of how many needed
    assert (shown["learned_from"], shown["forecast_needs"]) == (0, 5)
    assert (estimate["learned_from"], estimate["forecast_needs"]) == (0, 5)
    said = "no history yet (0 of 5 finished runs)"
    assert f"likely_start:       {said}" in d.astra("show", "second").stdout.splitlines()
    assert f"likely start: {said}; starts after first end(s)" in d.astra("why", "second").stdout
    dry = d.astra("run", "--dry-run", "--name", "third", "--gpus", "1", "--", "true").stdout
    assert said in dry, dry
