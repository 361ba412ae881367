"""A Gantt of running work until its time limits, the head's shadow time, backfill room,
and when the first waiting runs start.

Time runs left to right from now. Each running run is a bar to its time limit
(``started_at + time_limit_seconds``); the head's shadow time (``starts_by``) is
a vertical marker; the backfill window is the free GPUs' room until then. Below,
the first few waiting runs in the planner's order, each with a marker at its
estimated start (``starts_by``: the latest it starts; a failed run's ``restart_at``
while it waits for its restart back-off) and that time as the queue table says it; ``?``
where no estimate exists. What does not fit is counted in
the bottom border.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Group, RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from astraeus_tui.fmt import Run
from astraeus_tui.when import epoch, restarts_at, start_label, utc_clock
from astraeus_tui.widgets import css_beside
from runner.durations import compact
from runner.model import RunState

NICE = (300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 345600, 604800)
BAR_STYLE: dict[str, str] = {
    RunState.RUNNING: "green",
    RunState.STARTING: "cyan",
    RunState.STOPPING: "red",
}
MARK = "yellow"
START = "◆"
BAND = "━"  # from the likely start to the 90 % one
QUEUED_ROWS = 4  # waiting runs drawn at the most, first in the planner's order
Cell = tuple[str, str]
# the legend, longest first: the first that fits is shown
LEGENDS: tuple[tuple[tuple[str, str] | str, ...], ...] = (
    (("█", "green"), " running  ", ("█", "cyan"), " backfilled  ", ("┃", MARK),
     " head's start  ", (START, "bold"), " queued start  ", ("»", "green"), " beyond the chart"),
    (("█", "green"), " run ", ("█", "cyan"), " backfill ", ("┃", MARK), " head ",
     (START, "bold"), " start ", ("»", "green"), " beyond"),
)  # fmt: skip
# the same when a waiting run shows its likely band
BANDED: tuple[tuple[tuple[str, str] | str, ...], ...] = (
    (("█", "green"), " running  ", ("█", "cyan"), " backfilled  ", ("┃", MARK),
     " head's start  ", (START, "bold"), " queued start  ", (BAND, "magenta"),
     " likely to 90 %  ", ("»", "green"), " beyond the chart"),
    (("█", "green"), " run ", ("█", "cyan"), " backfill ", ("┃", MARK), " head ",
     (START, "bold"), " start ", (BAND, "magenta"), " likely"),
)  # fmt: skip


# the steps between the axis's times: each label then says its time exactly
STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800,
         345600, 604800)  # fmt: skip
TICKS = 4  # times on the axis after "now", at the most


def ticks(total: float) -> list[float]:
    """The times after now the axis labels, a round step apart (``+2m +4m``), at most
    TICKS of them within ``total``."""
    step = next((s for s in STEPS if total / s <= TICKS), total)
    return [k * step for k in range(1, int(total // step) + 1)]


def horizon(spans: list[float], shadow: float | None) -> float:
    """The time the chart spans: the shadow time with room after it, or the longest run."""
    target = shadow * 1.5 if shadow is not None else max([0.0, *spans])
    target = max(300.0, target)
    return next((n for n in NICE if n >= target), target)


class Timeline(Widget):
    DEFAULT_CSS = css_beside(__file__)

    running: reactive[list[Run]] = reactive(list)
    head: reactive[Run | None] = reactive(None)
    backfilled: reactive[frozenset[str]] = reactive(frozenset())
    free_gpus: reactive[int] = reactive(0)
    now: reactive[float] = reactive(0.0)
    queued: reactive[list[Run]] = reactive(list)  # the first waiting runs, in order
    waiting: reactive[int] = reactive(0)  # how many runs wait in all

    def on_mount(self) -> None:
        self.border_title = "Timeline"

    def ends(self) -> list[tuple[Run, float | None]]:
        out = []
        for run in self.running:
            started, limit = epoch(run.started_at), run.time_limit_seconds
            end = started + limit if started is not None and limit else None
            if run.state == RunState.STOPPING and run.stop_grace_left_seconds is not None:
                end = self.now + float(run.stop_grace_left_seconds)
            out.append((run, end))
        return sorted(out, key=lambda p: (p[1] is None, p[1] or 0.0, p[0].id))

    def render(self) -> RenderableType:
        width, height = self.content_region.width, self.content_region.height
        label_w = max(10, min(16, width // 3))
        chart_w = max(10, width - label_w - 1)
        shadow = epoch(self.head.starts_by if self.head is not None else None)
        ends = self.ends()
        spans = [e - self.now for _, e in ends if e is not None]
        total = horizon(spans, None if shadow is None else max(0.0, shadow - self.now))

        def col(t: float) -> int:
            return max(0, min(chart_w - 1, round((t - self.now) / total * (chart_w - 1))))

        mark = col(shadow) if shadow is not None else None
        running = [self._run_row(run, end, label_w, chart_w, col, mark, total)
                   for run, end in ends] or [Text("Nothing runs.", style="dim")]  # fmt: skip
        queued = [self._queued_row(run, label_w, chart_w, col, mark, total)
                  for run in self.queued[:QUEUED_ROWS]]  # fmt: skip
        window = [] if mark is None else [self._window_row(label_w, chart_w, mark)]
        banded = any(_forecast(run)[0] is not None for run in self.queued[:QUEUED_ROWS])
        parts = [running, window, queued, [self._legend(width, banded)]]
        shown = fit(height - 1, [len(p) for p in parts])
        self._borders(self._title(shadow), _more(len(ends) - shown[0], self.waiting - shown[2]))
        lines = [self._axis(label_w, chart_w, total, mark)]
        for part, n in zip(parts, shown, strict=True):
            lines += part[:n]
        return Group(*lines)

    def _borders(self, title: str, subtitle: str) -> None:
        """Titles drawn on the border: set after this frame, as setting them repaints."""
        if (title, subtitle) != (self.border_title, self.border_subtitle or ""):
            self.call_after_refresh(self._set_borders, title, subtitle)

    def _set_borders(self, title: str, subtitle: str) -> None:
        self.border_title, self.border_subtitle = title, subtitle

    def _title(self, shadow: float | None) -> str:
        if shadow is None:
            return "Timeline"
        return f"Timeline · ┃ head by {utc_clock(shadow, seconds=False)} UTC"

    def _axis(self, label_w: int, chart_w: int, total: float, mark: int | None) -> Text:
        cells: list[Cell] = [(" ", "dim")] * chart_w
        for t in [0.0, *ticks(total)]:  # each label ends at its time (now's begins there)
            x = min(chart_w - 1, round(t / total * (chart_w - 1)))
            label = f"+{compact(t, cell=True)}" if t else "now"
            start = max(0, min(x - (len(label) - 1 if t else 0), chart_w - len(label)))
            if all(c == " " for c, _ in cells[max(0, start - 1) : start + len(label) + 1]):
                for i, ch in enumerate(label):
                    cells[start + i] = (ch, "dim")
        if mark is not None and cells[mark][0] == " ":
            cells[mark] = ("▼", MARK)
        return Text(" " * label_w + " ").append_text(_join(cells))

    def _run_row(
        self, run: Run, end: float | None, label_w: int, chart_w: int,
        col: Callable[[float], int], mark: int | None, total: float,
    ) -> Text:  # fmt: skip
        style = BAR_STYLE.get(run.state or "", "green")
        if run.id in self.backfilled and run.state == RunState.RUNNING:
            style = "cyan"
        stop = chart_w - 1 if end is None else col(end)
        cells: list[Cell] = [("█", style)] * (stop + 1) + [("·", "grey30")] * (chart_w - stop - 1)
        if end is None or end > self.now + total:  # no limit, or beyond the chart
            cells[-1] = ("»", style)
        if mark is not None:
            cells[mark] = ("┃", MARK)
        name = str(run.name)[:label_w].ljust(label_w)
        return Text(name + " ", style="bold" if style != "green" else "").append_text(_join(cells))

    def _queued_row(
        self, run: Run, label_w: int, chart_w: int,
        col: Callable[[float], int], mark: int | None, total: float,
    ) -> Text:  # fmt: skip
        """Waiting until its estimated start, marked there with the time, or ``?``; the
        band from its likely start to its 90 % one behind it, once there is a forecast."""
        cells: list[Cell] = [("·", "grey30")] * chart_w
        likely, high = _forecast(run)
        if likely is not None and high is not None and not run.held:
            for x in range(col(likely), col(high) + 1):
                cells[x] = (BAND, "magenta")
        if mark is not None:
            cells[mark] = ("┃", MARK)
        at, when = restarts_at(run), start_label(run, self.now)  # a back-off ends then
        at = epoch(run.starts_by) if at is None else at
        at = likely if at is None else at  # no bound: the marker at the likely start
        style = MARK if run.head else "bold"
        if run.held:
            _write(cells, 0, "held: starts once released", "dark_orange")
        elif at is None:
            _write(cells, 0, "? start not known", "grey50")
        else:
            x = col(at)
            cells[x] = ("»" if at > self.now + total else START, style)
            if x + 2 + len(when) <= chart_w:  # after the marker
                _write(cells, x + 1, f" {when}", style)
            elif x >= len(when) + 1:  # or before it
                _write(cells, x - len(when) - 1, f"{when} ", style)
        name = str(run.name)[:label_w].ljust(label_w)
        return Text(name + " ", style="bold" if run.head else "").append_text(_join(cells))

    def _window_row(self, label_w: int, chart_w: int, mark: int) -> Text:
        """Free GPUs until the shadow time: what a run that ends by then may use."""
        free = self.free_gpus
        note = f"{free} GPU free till then" if free else "no GPU free to backfill"
        band: list[Cell] = [("░" if free else " ", "cyan")] * mark
        tail: list[Cell] = [(" ", "")] * (chart_w - mark - 1)
        if len(note) + 2 <= len(tail):  # after the marker
            tail[1 : 1 + len(note)] = [(ch, "dim") for ch in note]
        elif len(note) + 2 <= mark:  # or over the band
            band[1 : 1 + len(note)] = [(ch, "bold cyan" if free else "dim") for ch in note]
        label = Text("backfill".ljust(label_w) + " ", style="cyan")
        return label.append_text(_join([*band, ("┃", MARK), *tail]))

    def _legend(self, width: int, banded: bool = False) -> Text:
        """The first legend that fits ``width``; the shortest, cut, if none does.
        ``banded``: a waiting run shows its likely band, which the legend then names."""
        legends = (*BANDED, *LEGENDS) if banded else LEGENDS
        found = next((L for L in legends if len(Text.assemble(*L)) <= width), legends[-1])
        legend = Text.assemble(*found)
        legend.stylize("dim")
        legend.no_wrap, legend.overflow = True, "ellipsis"
        return legend


def _forecast(run: Run) -> tuple[float | None, float | None]:
    """Its likely and 90 % starts (None, None before there is a forecast)."""
    likely, high = run.likely_start, run.likely_start_90
    if not isinstance(likely, str) or not isinstance(high, str):
        return None, None
    return epoch(likely), epoch(high)


def fit(room: int, wants: Sequence[int]) -> list[int]:
    """Lines for the running rows, the window row, the queued rows and the legend.

    In turn, while ``room`` lasts: one running row, one queued row, the window,
    the legend, then the other running rows, then the other queued rows.
    """
    shown = [0] * len(wants)
    for part, upto in ((0, 1), (2, 1), (1, 1), (3, 1), (0, wants[0]), (2, wants[2])):
        take = max(0, min(upto, wants[part]) - shown[part])
        take = min(take, room)
        shown[part] += take
        room -= take
    return shown


def _more(running: int, waiting: int) -> str:
    """What the chart has no room for, counted."""
    more = [f"{running} more running"] if running > 0 else []
    more += [f"{waiting} more waiting"] if waiting > 0 else []
    return f"… {' · '.join(more)}" if more else ""


def _write(cells: list[Cell], at: int, text: str, style: str) -> None:
    for i, ch in enumerate(text[: max(0, len(cells) - at)]):
        cells[at + i] = (ch, style)


def _join(cells: list[Cell]) -> Text:
    text = Text(no_wrap=True, overflow="crop")
    for ch, style in cells:
        text.append(ch, style=style)
    return text
