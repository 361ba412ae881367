"""``POST /v1/preview``'s answer as ``astra submit --dry-run`` and ``astra run --dry-run``
say it, for typer's commands and the fast path alike."""

from __future__ import annotations

from typing import Any

from astraeus_tui.cli.fast.out import echo, print_json
from astraeus_tui.when import UNLESS_URGENT, epoch, no_history, on_gpus
from runner.durations import utc_minute

OUT_OF_ORDER = {  # why a run would not be in the order, by its reason's code
    "HELD": "not in the order until it is released",
    "BEGIN_WAIT": "not in the order before its begin time",
    "DRAINING": "not in the order while the machine drains",
}
DEPENDENCIES = "not in the order until its dependencies succeed"


def when(estimate: dict[str, Any]) -> str:
    """The estimate in words: the forecasts from learned lengths first, when there are any
    (``likely 2026-10-01 14:10 UTC, by 2026-10-01 15:30 UTC at 90 % (from 37 finished
    runs); ``), then the start if running work takes its whole limits (``fmt.when``'s
    words, each time with its day, to the minute as the run's reason says it: the likely
    start to the nearest, the others up)."""
    likely = ""
    if estimate.get("likely"):
        likely = (f"likely {_said(estimate['likely'], nearest=True)}, by"
                  f" {_said(estimate['likely_90'])} at 90 %"
                  f" (from {estimate['learned_from']} finished runs); ")  # fmt: skip
    elif none_yet := no_history(estimate.get("learned_from"), estimate.get("forecast_needs")):
        likely = f"likely start: {none_yet}; "
    if estimate["starts_by"]:
        high = estimate.get("likely_90")
        if high and high > estimate["starts_by"]:  # not a promise
            return f"{likely}{_said(estimate['starts_by'])} {UNLESS_URGENT}"
        return f"{likely}starts by {_said(estimate['starts_by'])}"
    if estimate["after"]:
        return f"{likely}starts after " + ", ".join(estimate["after"]) + " end(s) (no time limit)"
    return f"{likely}start not known"


def _said(iso: str, nearest: bool = False) -> str:
    """A time of the estimate as the run's reason says it (``2026-10-01 14:21 UTC``)."""
    t = epoch(iso)
    return iso if t is None else utc_minute(t, nearest=nearest)


def show_preview(p: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(p)
        return
    where = (f"position {p['position']} of {p['queue_length']}" if p["position"] is not None
             else OUT_OF_ORDER.get(p.get("reason_code") or "", DEPENDENCIES))  # fmt: skip
    echo(f"{p['name']} ({p['workspace']}, priority {p['priority']}): {where}")
    if p["starts_now"]:
        how = "by backfill" if p["backfill"] else "at once"
        share = p.get("gpu_memory_bytes")
        if share:
            from runner.model import format_size

            each = f" ({format_size(share)} on each, shared)"
        else:
            each = ""
        echo(f"Would start now {how}, {on_gpus(p['gpus'])}{each}.")
    else:
        echo(f"Would wait: {p['reason']} ({when(p['estimate'])}).")
    if p["preempts"]:
        echo("Would preempt: " + ", ".join(p["preempts"]) + ".")
    echo("Nothing was submitted.")
