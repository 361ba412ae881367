"""Small text helpers the widgets share: times, countdowns, sizes and bars.

Not a widget: pure functions from values to strings or ``rich.text.Text``.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from astraeus_tui.when import epoch, utc_clock
from runner.model import RunState
from runner.schema import Run as Run  # a run object as the API returns it (docs/api.md)

QUOTA_CODES = ("QUOTA_WAIT", "QUOTA_OVER")  # a run's reason_code while over its quota
BLOCKS = " ▏▎▍▌▋▊▉█"


def span(seconds: float) -> str:
    """A duration as people say it: ``45 s``, ``12 min``, ``1 h 12 min``, ``2 d 3 h``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    minutes = -(-s // 60) if s < 3600 else s // 60  # under an hour: round up
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def countdown(seconds: float) -> str:
    """``in 1 h 12 min``, or ``now`` once it is due."""
    return f"in {span(seconds)}" if seconds >= 1 else "now"


def compact(seconds: float | None) -> str:
    """A short duration for table cells: ``45s``, ``12m``, ``1h12``, ``2d3h``."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h}h{m:02d}" if m else f"{h}h"
    d, h = divmod(s // 3600, 24)
    return f"{d}d{h}h" if h else f"{d}d"


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
    """An estimate as words: ``starts by 14:20 UTC``, or after which runs end."""
    if not estimate:
        return "start not known"
    if estimate.get("starts_by"):
        t = epoch(estimate["starts_by"])
        return "start not known" if t is None else f"starts by {utc_clock(t, seconds=False)} UTC"
    if estimate.get("after"):
        return f"after {', '.join(estimate['after'])} ends (no time limit)"
    return "start not known"
