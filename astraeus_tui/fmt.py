"""Small text helpers the widgets share: times, countdowns, sizes and bars.

Not a widget: pure functions from values to strings or ``rich.text.Text``.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from astraeus_tui.when import UNLESS_URGENT, epoch, no_history, utc_clock
from runner.durations import spoken
from runner.model import RunState
from runner.schema import Run as Run  # a run object as the API returns it (docs/api.md)

QUOTA_CODES = ("QUOTA_WAIT", "QUOTA_OVER")  # a run's reason_code while over its quota
BLOCKS = " ▏▎▍▌▋▊▉█"


def countdown(seconds: float) -> str:
    """``in 1 h 12 min``, or ``now`` once it is due."""
    return f"in {spoken(seconds, up=True)}" if seconds >= 1 else "now"


def gib(n: float | None) -> str:
    if n is None:
        return "-"
    value = n / 1024**3
    return f"{value:.0f}G" if value >= 10 or value == int(value) else f"{value:.1f}G"


def bar(fraction: float | None, width: int, style: str = "green") -> Text:
    """A horizontal bar in eighths of a cell; an empty track when unknown."""
    text = Text(no_wrap=True, overflow="crop")
    if fraction is None:
        return text.append("·" * width, style="dim")
    cells = max(0.0, min(1.0, fraction)) * width
    full = int(cells)
    part = BLOCKS[int((cells - full) * 8)] if full < width else ""
    text.append("█" * full + part.strip(), style=style)
    text.append("░" * (width - full - len(part.strip())), style="grey30")
    return text


def over_quota(run: Run) -> bool:
    """Waits for its namespace's quota, and only for it (a paused run waits to run again)."""
    queued = run.state == RunState.QUEUED and not run.paused
    return queued and run.reason_code in QUOTA_CODES


def head_message(run: Run) -> str:
    """The head's own sentence, without the `Preempted …; waiting to run again.` prefix
    the reason of a paused run starts with."""
    text = run.reason or ""
    prefix = preempted_prefix(text) if run.paused else ""
    if not prefix:
        return text
    return text[len(prefix) :].lstrip(" ") or text


def preempted_prefix(reason: str | None) -> str:
    text = reason or ""
    cut = text.find("waiting to run again.")
    return text[: cut + len("waiting to run again.")] if cut >= 0 else ""


def when(estimate: dict[str, Any] | None) -> str:
    """An estimate as words: ``starts by 14:20 UTC``, or after which runs end; the
    forecasts from learned lengths before it when there are any (``likely 14:10 UTC, by
    15:30 UTC at 90 % (from 37 finished runs); ``: the likely start to the nearest minute,
    as ``astra ls`` says it). A 90 % start later than the estimate
    from the limits (runs submitted later may pass any run but the head) says that
    estimate holds only if no more urgent run is submitted."""
    if not estimate:
        return "start not known"
    likely, high = epoch(estimate.get("likely")), epoch(estimate.get("likely_90"))
    ahead = ""
    if likely is not None and high is not None:
        ahead = (f"likely {utc_clock(likely, seconds=False, nearest=True)} UTC, by"
                 f" {utc_clock(high, seconds=False)} UTC at 90 %"
                 f" (from {estimate.get('learned_from')} finished runs); ")  # fmt: skip
    elif none_yet := no_history(estimate.get("learned_from"), estimate.get("forecast_needs")):
        ahead = f"likely start: {none_yet}; "
    if estimate.get("starts_by"):
        t = epoch(estimate["starts_by"])
        if t is not None and high is not None and high > t:  # not the head: not a promise
            return f"{ahead}{utc_clock(t, seconds=False)} UTC {UNLESS_URGENT}"
        if t is not None:
            return f"{ahead}starts by {utc_clock(t, seconds=False)} UTC"
    elif estimate.get("after"):
        return f"{ahead}after {', '.join(estimate['after'])} ends (no time limit)"
    return f"{ahead}start not known"
