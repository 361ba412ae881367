"""One run's page: what it asked for, what happened to it, and its output as it comes.

``GET /v1/runs/{name}`` every 2 s (spec, workers' history, events),
``GET /v1/runs/{name}/telemetry`` every 5 s while it runs (sparklines of its GPU
utilisation, GPU memory, CPU and memory over its life, shown once it has samples) and
``GET /v1/runs/{name}/logs?tail=200&follow=1`` into the log pane. A queued
run also shows ``GET /v1/runs/{name}/why``: the reason, the chain, the
estimate and the levers the planner checked. A run
preempted and waiting to run again headlines ``Paused to make room for
higher-priority work``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, ClassVar

from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Log, Static

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.fmt import Run, countdown, gib, when
from astraeus_tui.text import plain
from astraeus_tui.when import (
    UNLESS_URGENT,
    day_clock,
    epoch,
    idle_label,
    no_history,
    on_gpus,
    utc_clock,
)
from astraeus_tui.widgets import Latest, SaysFaults
from astraeus_tui.widgets.levels import LevelSparkline
from runner.durations import compact
from runner.model import RunState, StopReason
from runner.schema import (
    Checkpoint,
    Event,
    RunDetail,
    RunTelemetry,
    TelemetryRunSample,
    UsageFigures,
    Worker,
)

SHOW_EVERY = 2.0
USAGE_EVERY = 5.0
PLOT_POINTS = 240  # points a plot row keeps, at most (the means of equal spans)
# (id, label, field of a sample and of the usage figures, bytes or percent)
PLOTS = (
    ("plot-gpu", "GPU util", "gpu_util", False),
    ("plot-gpu-mem", "GPU mem", "gpu_memory_bytes", True),
    ("plot-cpu", "CPU", "cpu_percent", False),
    ("plot-mem", "memory", "memory_bytes", True),
)
HISTORY = ("Try", "Wkr", "State", "GPUs", "Started", "Ended", "Exit", "Why")


def _time(iso: str | None) -> str:
    t = epoch(iso)
    return "-" if t is None else utc_clock(t)


def _at(forecast: object) -> float | None:
    """A forecast's time (unset before there is one)."""
    return epoch(forecast) if isinstance(forecast, str) else None


def _likely(run: RunDetail, now: float) -> tuple[tuple[str, str], ...]:
    """The start forecast from learned lengths, when there is one: the likely start (to
    the nearest minute) and the 90 % one, and how many finished runs they rest on."""
    likely, high = _at(run.likely_start), _at(run.likely_start_90)
    if likely is None:
        none_yet = no_history(run.learned_from, run.forecast_needs)
        return (("likely start", none_yet),) if none_yet else ()
    by = f", by {day_clock(high, now)} at 90 %" if high is not None else ""
    said = f"{day_clock(likely, now, nearest=True)}{by} (from {run.learned_from} finished runs)"
    return (("likely start", said),)


def _starts_by(run: RunDetail, now: float) -> tuple[str, str]:
    """Its start if running work takes its whole limits, to the minute as the START
    column and the banner say it; a 90 % forecast later than that (it is not the head:
    runs submitted later may pass it) says it is no promise."""
    bound, high = epoch(run.starts_by), _at(run.likely_start_90)
    if bound is None:
        return ("starts by", "-")
    if high is not None and high > bound:
        return ("by the limits", f"{day_clock(bound, now)} {UNLESS_URGENT}")
    return ("starts by", day_clock(bound, now))


def _gpus(indices: list[int] | None) -> str:
    return ", ".join(map(str, indices)) if indices else "none"


def _checkpoint(found: Checkpoint | None) -> str:
    """The last checkpoint seen on the run's drive, or none."""
    if not found:
        return "none seen on its drives"
    return f"{found.path} · {gib(found.size or 0)} · {_time(found.modified)}"


def facts(run: RunDetail) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    limit, now = run.time_limit_seconds, time.time()
    rows = (
        ("workspace", f"{run.workspace} (owner {run.owner or '?'})"),
        ("priority", str(run.priority)),
        ("state", _state(run, now)),
        ("GPUs", f"{run.gpus_requested} asked · holds {_gpus(run.gpus)}"),
        ("CPU · memory", f"{run.cpu_cores_requested:g} cores · "
                         f"{gib(run.memory_requested or 0)}"),
        ("workers", f"{run.workers}{' (gang)' if run.gang else ''}"),
        ("time limit", compact(limit, cell=True) if limit else "none"),
        ("restarts", _restarts(run, now)),
        ("preemptions", str(run.preemptions)),
        ("submitted", _time(run.submitted_at)),
        ("started", _time(run.started_at)),
        ("finished", _time(run.finished_at)),
        _starts_by(run, now),
        *_likely(run, now),
        ("exit code", "-" if run.exit_code is None else str(run.exit_code)),
        ("checkpoint", _checkpoint(run.checkpoint)),
    )  # fmt: skip
    for key, value in rows:
        grid.add_row(key, value)
    return grid


def why_text(answer: dict[str, Any]) -> Text:
    """``GET /v1/runs/{name}/why``: reason, chain, estimate, then each lever."""
    text = Text()
    text.append("Why it waits\n", style="bold")
    text.append(str(answer.get("reason") or "") + "\n", style="yellow")
    for line in answer.get("chain") or []:
        text.append(f"  {line}\n")
    if answer.get("estimate") is not None:
        text.append(f"  Estimate: {when(answer['estimate'])}.\n", style="cyan")
    for lever in answer.get("levers") or []:
        text.append("  → ", style="bold green")
        text.append(f"{lever}\n")
    text.rstrip()
    return text


def events_text(events: list[Event]) -> Text:
    text = Text()
    for e in events[-100:]:
        text.append(_time(e.time) + " ", style="dim")
        text.append(f"{e.kind:<11} ", style="bold cyan")
        text.append(str(e.message) + "\n")
    return text if events else Text("No events yet.", style="dim")


def worker_why(w: Worker) -> str:
    """Why a worker stopped or is stopping: ``preempted by urgent-fix (SIGKILL)``."""
    why = w.error or w.stop_reason or ""
    if why == StopReason.PREEMPT:
        by = w.stopping_for
        why = f"preempted by {by}" if by else "preempted"
    elif why == StopReason.IDLE:
        why = "its GPUs were idle (idle_gpu_policy)"
    if w.killed:
        why = f"{why} (SIGKILL)".strip()
    return str(why)


def reduced(values: list[float], most: int = PLOT_POINTS) -> list[float]:
    """At most ``most`` points: the means of equal spans of ``values``."""
    if len(values) <= most:
        return values
    step = len(values) / most
    spans = [values[int(i * step) : int((i + 1) * step)] for i in range(most)]
    return [sum(p) / len(p) for p in spans if p]


def plot_values(history: list[TelemetryRunSample], field: str) -> list[float]:
    found = (getattr(s, field) for s in history)
    return reduced([float(v) for v in found if v is not None])


def plot_top(t: RunTelemetry, field: str, run: Run | None) -> float:
    """A plot's scale, from 0: 100 % for GPU util; CPU and memory: what the run asked
    (100 % a core) or its peak if higher; GPU memory: its peak."""
    peak = getattr(t.usage.peak, field, None) if t.usage is not None else None
    highest = max((float(v) for s in t.history if (v := getattr(s, field)) is not None),
                  default=0.0)  # fmt: skip
    top = max(float(peak or 0), highest)
    if field == "gpu_util":
        return 100.0
    if field == "cpu_percent" and run is not None:
        return max(top, 100.0 * run.cpu_cores_requested)
    if field == "memory_bytes" and run is not None:
        return max(top, float(run.memory_requested))
    return top


def _figure(figures: UsageFigures | None, field: str, as_bytes: bool) -> str:
    value = None if figures is None else getattr(figures, field)
    if value is None:
        return "-"
    return gib(value) if as_bytes else f"{value:.0f}%"


def plot_label(t: RunTelemetry, field: str, as_bytes: bool) -> Text:
    """``93% · mean 90% · peak 100%``: now (in bold, while it runs), mean and peak."""
    usage = t.usage
    text = Text()
    if usage is None:
        return text
    if usage.now is not None:
        text.append(_figure(usage.now, field, as_bytes), style="bold")
        text.append(" · ", style="dim")
    text.append("mean ", style="dim")
    text.append(_figure(usage.mean, field, as_bytes))
    text.append(" · peak ", style="dim")
    text.append(_figure(usage.peak, field, as_bytes))
    return text


def _state(run: Run, now: float) -> str:
    """The state, and ``GPUs idle 25m (since 14:03 UTC)`` while they are marked idle."""
    idle = idle_label(run, now)
    since = run.idle_since if isinstance(run.idle_since, str) else None
    return f"{run.state} · GPUs {idle} (since {_time(since)} UTC)" if idle else str(run.state)


def _restarts(run: Run, now: float) -> str:
    """``3 of 10``; while it backs off, ``3 of 10 · again at 14:03:27 UTC (in 23 s)``."""
    text = f"{run.restarts} of {run.restart_limit}"
    at = epoch(run.restart_at) if isinstance(run.restart_at, str) else None
    if at is None:
        return text
    return f"{text} · again at {utc_clock(at)} UTC ({countdown(at - now)})"


def _state_line(run: Run) -> str:
    state = run.state
    if state == RunState.RUNNING:
        return f"Running since {_time(run.started_at)} UTC {on_gpus(run.gpus)}"
    return str(state or "")


class RunDetailScreen(SaysFaults, Screen[None]):
    """Its panels side by side over its output; on a terminal narrower than 100 columns
    or shorter than 32 rows (80×24) one under the other, the page scrolling."""

    CSS_PATH = "detail.tcss"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 (as Screen)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "back", "Back", tooltip="Back to the queue"),
        Binding("p", "priority", "Priority", tooltip="Change this run's priority"),
        Binding("e", "edit", "Edit", tooltip="Change its time limit, GPUs, CPUs, memory"),
        Binding("d", "delete", "Delete", tooltip="Delete this run (asks first)"),
        Binding("o", "hold", "Hold", tooltip="Hold this queued run, or release it"),
        Binding("f", "follow", "Follow", tooltip="Keep the log scrolled to its end, or stop"),
    ]

    class Loaded(Latest):
        def __init__(self, run: RunDetail, why: dict[str, Any] | None = None) -> None:
            super().__init__()
            self.run, self.why = run, why

    class Failed(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    class Sampled(Latest):
        def __init__(self, telemetry: RunTelemetry) -> None:
            super().__init__()
            self.telemetry = telemetry

    class LogArrived(Latest):
        """Lines wait in ``RunDetailScreen.pending``."""

    def __init__(
        self, client: DashboardApi, clock: Callable[[], float], name: str, follow: bool = False
    ) -> None:
        super().__init__()
        self.client, self.clock, self.run_name, self.follow = client, clock, name, follow
        self.run: RunDetail | None = None
        self.pending: list[str] = []
        self.events_seen = 0
        self.plotted = False  # the plots have had samples

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Run {self.run_name}", style="bold"), id="title")
        yield Static("", id="headline")
        with VerticalScroll(id="page"):  # scrolls on a small terminal (detail.tcss)
            with Horizontal(id="top"):
                with VerticalScroll(id="about") as about:
                    about.border_title = "Run"
                    yield Static("", id="facts")
                    yield Static("", id="why")
                    yield Static("", id="spec")
                with Vertical(id="story"):
                    history: DataTable[Text] = DataTable(id="history", cursor_type="none")
                    history.border_title = "Attempts and workers"
                    yield history
                    with Vertical(id="usage-box") as plots:
                        plots.border_title = "Use over its life"
                        for plot_id, label, _, _ in PLOTS:
                            with Horizontal(classes="plot-row"):
                                yield Static(Text(label, style="dim"), classes="plot-label")
                                yield LevelSparkline([], id=plot_id, summary_function=max)
                                yield Static("", id=f"{plot_id}-value", classes="plot-value")
                    with VerticalScroll(id="events-box") as box:
                        box.border_title = "Events"
                        yield Static("", id="events")
            log = Log(id="log", max_lines=5000, auto_scroll=True)
            log.border_title = "Output (last 200 lines, following)"
            yield log
            with Vertical(id="spec-box") as asked:  # on a small terminal: its spec last
                asked.border_title = "What it asked for"
                yield Static("", id="spec-below")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#history", DataTable).add_columns(*HISTORY)
        if self.follow:
            self.query_one(Log).focus()
        self.load()
        self.load_usage()
        self.follow_log()

    # ------------------------------------------------------------ workers

    @work(exclusive=True, group="show", exit_on_error=False)
    async def load(self) -> None:
        while True:
            try:
                run = await self.client.show(self.run_name)
                why = None
                if run.state == RunState.QUEUED:
                    try:
                        why = await self.client.why(self.run_name)
                    except ApiError as e:
                        why = {"reason": f"No explanation: {e}", "chain": [], "levers": []}
                self.post_message(self.Loaded(run, why))
            except ApiError as e:
                self.post_message(self.Failed(str(e)))
            await asyncio.sleep(SHOW_EVERY)

    @work(exclusive=True, group="usage", exit_on_error=False)
    async def load_usage(self) -> None:
        """Its telemetry every USAGE_EVERY while it runs; once more after it finished."""
        while True:
            try:
                found = await self.client.run_telemetry(self.run_name)
                self.post_message(self.Sampled(found))
            except ApiError:
                pass  # not sampled (in front of Slurm), forgotten, or not ours: no plot
            await asyncio.sleep(USAGE_EVERY)
            if self.run is not None and self.run.state.finished and self.plotted:
                return

    @work(exclusive=True, group="log", exit_on_error=False)
    async def follow_log(self) -> None:
        try:
            async for line in self.client.logs(self.run_name, tail=200, follow=True):
                self.pending.append(line.rstrip("\n"))
                self.post_message(self.LogArrived())
            try:  # it ends when the run finishes, or when the daemon stops
                await self.client.status()
                self.pending.append("── end of output: the run has finished ──")
            except ApiError:
                self.pending.append("── output stopped: the daemon stopped ──")
        except ApiError as e:
            self.pending.append(f"── no output: {e} ──")
        except Exception as e:
            self.pending.append(f"── output stopped: {e or type(e).__name__} ──")
        self.post_message(self.LogArrived())

    # ------------------------------------------------------------ data in

    def on_run_detail_screen_log_arrived(self) -> None:
        lines, self.pending = self.pending, []
        self.query_one(Log).write_lines(lines)

    def on_run_detail_screen_sampled(self, message: Sampled) -> None:
        t = message.telemetry
        box = self.query_one("#usage-box", Vertical)
        box.display = self.plotted = bool(t.history)
        if not t.history:
            return
        for plot_id, _, field, as_bytes in PLOTS:
            plot = self.query_one(f"#{plot_id}", LevelSparkline)
            plot.data = plot_values(t.history, field)
            plot.top = plot_top(t, field, self.run)
            label = plot_label(t, field, as_bytes)
            self.query_one(f"#{plot_id}-value", Static).update(label)

    def on_run_detail_screen_failed(self, message: Failed) -> None:
        self.query_one("#headline", Static).update(Text(message.error, style="bold red"))

    def on_run_detail_screen_loaded(self, message: Loaded) -> None:
        run = self.run = message.run
        title = Text.assemble(
            ("Run ", "dim"), (str(run.name), "bold"),
            (f" · {run.workspace} · priority {run.priority} · ", "dim"),
            (str(run.state), "bold"),
        )  # fmt: skip
        self.query_one("#title", Static).update(title)
        headline = Text(str(run.reason or _state_line(run)), style="yellow")
        if run.paused:
            headline = Text.assemble((str(run.paused), "bold magenta"), "  ", headline)
        self.query_one("#headline", Static).update(headline)
        self.query_one("#facts", Static).update(facts(run))
        why = self.query_one("#why", Static)
        why.display = message.why is not None
        if message.why is not None:
            why.update(why_text(message.why))
        spec = json.dumps(run.spec or {}, indent=2)
        for where in ("#spec", "#spec-below"):
            self.query_one(where, Static).update(
                Syntax(spec, "json", theme="ansi_dark", background_color="default", word_wrap=True)
            )
        self._history(run.workers_history or [])
        events = run.events or []
        self.query_one("#events", Static).update(events_text(events))
        if len(events) != self.events_seen:  # new events: show the latest
            self.events_seen = len(events)
            self.query_one("#events-box", VerticalScroll).scroll_end(animate=False)

    def _history(self, workers: list[Worker]) -> None:
        table: DataTable[Text] = self.query_one("#history", DataTable)
        table.clear()  # a handful of rows: the queue's in-place merge is for thousands
        for w in workers:
            why = worker_why(w)
            table.add_row(
                *(
                    plain(c)
                    for c in (
                        str(w.attempt),
                        str(w.worker),
                        str(w.state),
                        ",".join(map(str, w.gpus or [])) or "-",
                        _time(w.started_at),
                        _time(w.finished_at),
                        "-" if w.exit_code is None else str(w.exit_code),
                        why,
                    )
                )
            )  # fmt: skip  (an error's "[...]" is not markup)

    # ------------------------------------------------------------ actions

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_follow(self) -> None:
        log = self.query_one(Log)
        log.auto_scroll = not log.auto_scroll
        state = "following" if log.auto_scroll else "paused"
        log.border_title = f"Output (last 200 lines, {state})"
        if log.auto_scroll:
            log.scroll_end(animate=False)

    def action_priority(self) -> None:
        from astraeus_tui.screens.dialogs import PriorityScreen

        if self.run is not None:
            self.app.push_screen(PriorityScreen(self.client, self.run))

    def action_edit(self) -> None:
        from astraeus_tui.screens.edit import EditRunScreen

        if self.run is not None and self.run.state in RunState.ACTIVE:
            self.app.push_screen(EditRunScreen(self.client, self.run))

    def action_delete(self) -> None:
        from astraeus_tui.screens.dialogs import ConfirmScreen

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.delete()

        question = f"Delete run {self.run_name}?"
        detail = "A queued run is cancelled at once; a live one is stopped with the grace."
        self.app.push_screen(ConfirmScreen(question, detail, "Delete"), confirmed)

    def action_hold(self) -> None:
        """Hold this run, or release it when it is held (``held`` decides)."""
        if self.run is not None:
            self.hold("release" if self.run.held else "hold")

    @work(exclusive=True, group="hold", exit_on_error=False)
    async def hold(self, action: str) -> None:
        try:
            result = await self.client.control(self.run_name, action)
            self.app.notify(f"{self.run_name}: {result.get('outcome')}")
        except ApiError as e:
            self.app.notify(str(e), severity="error")

    @work(exclusive=True, group="delete", exit_on_error=False)
    async def delete(self) -> None:
        try:
            result = await self.client.delete(self.run_name)
            self.app.notify(f"{self.run_name}: {result.get('outcome')}")
        except ApiError as e:
            self.app.notify(str(e), severity="error")
