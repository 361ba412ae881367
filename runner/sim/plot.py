"""``astra sim --plot FILE``: the runs waiting and the GPUs in use over a replay, as SVG.

Two panels over the replay's span, one line per policy: above, how many runs wait (from
their submit to their first start, and again between a preemption and the next start);
below, the GPUs held (a shared GPU counted as its fraction), under a line at the
machine's GPUs. Each line is the average over one of ``WIDTH`` slices of time.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from runner.sim.replay import Replayed

WIDTH, PANEL, MARGIN = 800, 180, 48
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
DAY = 86400.0


def steps(replayed: Replayed) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(time, change) of the runs waiting and of the GPUs held, unsorted."""
    waiting: list[tuple[float, float]] = []
    held: list[tuple[float, float]] = []
    first_worker: dict[str, list[tuple[float, float | None]]] = {}
    for a in replayed.attempts:
        held += [(a.start, a.gpus), (replayed.ended_at if a.end is None else a.end, -a.gpus)]
        if a.worker == 0:
            first_worker.setdefault(a.run, []).append((a.start, a.end))
    for o in replayed.outcomes:
        waiting.append((o.submit, 1))
        runs = sorted(first_worker.get(o.name, []))
        for i, (start, end) in enumerate(runs):
            waiting.append((start, -1))
            if i + 1 < len(runs) and end is not None:
                waiting.append((end, 1))  # preempted: it waits again
    return waiting, held


def averaged(changes: list[tuple[float, float]], begin: float, end: float) -> list[float]:
    """The step function's average over each of WIDTH equal slices of [begin, end]."""
    width = max(end - begin, 1e-9) / WIDTH
    out = [0.0] * WIDTH
    level, at = 0.0, begin
    for t, change in sorted(changes):
        t = min(max(t, begin), end)
        _spread(out, level, at, t, begin, width)
        level, at = level + change, t
    _spread(out, level, at, end, begin, width)
    return [x / width for x in out]


def _spread(out: list[float], level: float, a: float, b: float, begin: float, width: float) -> None:
    """Add ``level`` times the part of [a, b) in each slice."""
    if b <= a or level == 0:
        return
    i = int((a - begin) / width)
    while a < b and i < WIDTH:
        edge = begin + (i + 1) * width
        out[i] += level * (min(b, edge) - a)
        a, i = edge, i + 1


def plot_svg(replays: Sequence[tuple[str, Replayed]], gpus: int) -> str:
    """One SVG: runs waiting above, GPUs held below, a line per replay (named)."""
    end = max((r.ended_at for _, r in replays), default=0.0)
    begin = min((o.submit for _, r in replays for o in r.outcomes), default=0.0)
    names, waits, helds = [], [], []
    for name, r in replays:
        waiting, held = steps(r)
        names.append(name)
        waits.append(averaged(waiting, begin, end))
        helds.append(averaged(held, begin, end))
    top = max((max(w, default=0.0) for w in waits), default=0.0) or 1.0
    height = 2 * PANEL + 3 * MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH + 2 * MARGIN}" '
        f'height="{height}" font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    panels = ((MARGIN, "runs waiting", top, waits),
              (2 * MARGIN + PANEL, "GPUs held", float(gpus), helds))  # fmt: skip
    for y0, title, scale, lines in panels:
        parts.append(f'<text x="{MARGIN}" y="{y0 - 8}">{title} (at most {scale:g})</text>')
        parts.append(
            f'<rect x="{MARGIN}" y="{y0}" width="{WIDTH}" height="{PANEL}" '
            'fill="none" stroke="#999"/>'
        )
        for k, values in enumerate(lines):
            points = " ".join(
                f"{MARGIN + i + 0.5:.1f},{y0 + PANEL - PANEL * min(v / scale, 1.0):.1f}"
                for i, v in enumerate(values)
            )
            colour = COLOURS[k % len(COLOURS)]
            parts.append(f'<polyline fill="none" stroke="{colour}" points="{points}"/>')
    days = (end - begin) / DAY
    axis_y = 2 * MARGIN + 2 * PANEL + 16
    parts.append(f'<text x="{MARGIN}" y="{axis_y}">day 0</text>')
    parts.append(f'<text x="{MARGIN + WIDTH}" y="{axis_y}" text-anchor="end">day {days:.1f}</text>')
    for k, name in enumerate(names):
        colour = COLOURS[k % len(COLOURS)]
        x = MARGIN + 120 + 110 * k
        parts.append(f'<text x="{x}" y="{axis_y}" fill="{colour}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
