"""The queue as the dashboard holds it: runs by id, merged from the change stream.

No widgets here: ``QueueModel`` applies a snapshot or a batch of changes and
says which runs were added, changed or removed; ``view()`` is the visible
order under the current sort and filters; ``cells()`` renders one table row.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec
from rich.text import Text

from astraeus_tui.fmt import Run, over_quota
from astraeus_tui.when import DAY, epoch, idle_label, start_label
from runner.durations import compact
from runner.model import RunState

SORTS = ("order", "priority", "age", "name", "workspace", "state")
STATES = tuple(s for s in RunState if s.active)  # the state filter's choices, in order
FAR = 1 << 30
AGE = 7  # the age column: it moves with the clock
AGE_EVERY = 30.0  # seconds between two renderings of an age
# what the cells other than the mark show: when none of these changes, only the mark is redrawn
CELL_KEYS = ("name", "head", "workspace", "priority", "state", "gpus", "gpus_requested",
             "time_limit_seconds", "submitted_at", "starts_by", "likely_start", "reason",
             "idle_since", "restart_at")  # fmt: skip
REASON = 9  # the reason column: an idle run's mark in it moves with the clock
STATE_STYLE: dict[str, str] = {
    RunState.RUNNING: "green", RunState.STARTING: "cyan", RunState.STOPPING: "red",
    RunState.QUEUED: "",
}  # fmt: skip


@dataclass
class Batch:
    """What the stream brought since the screen last looked: merged, latest wins."""

    snapshot: list[Run] | None = None
    upsert: dict[str, Run] = field(default_factory=dict)
    remove: set[str] = field(default_factory=set)
    at: float = 0.0  # the dashboard's clock when the last piece arrived
    moved: dict[str, int | None] = field(default_factory=dict)  # id -> its new position

    def add_change(
        self, upsert: Iterable[Run], remove: Iterable[str], at: float,
        moved: Iterable[tuple[str, int | None]] = (),
    ) -> None:  # fmt: skip
        for run in upsert:
            self.upsert[run.id] = run
            self.remove.discard(run.id)
            self.moved.pop(run.id, None)
        for rid in remove:
            self.upsert.pop(rid, None)
            self.moved.pop(rid, None)
            self.remove.add(rid)
        for rid, position in moved:  # its place alone changed: onto what is held of it
            held = self.upsert.get(rid)
            if held is not None:
                self.upsert[rid] = msgspec.structs.replace(held, position=position)
            elif rid not in self.remove:
                self.moved[rid] = position  # onto the model's (or the snapshot's) object
        self.at = at


@dataclass
class Diff:
    added: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)  # ... also the runs in ``moved``
    removed: set[str] = field(default_factory=set)
    moved: set[str] = field(default_factory=set)  # changed in their position alone

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


@dataclass
class Filters:
    workspace: str | None = None
    state: str | None = None
    search: str = ""
    sort: str = "order"


class QueueModel:
    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.received: dict[str, float] = {}  # id -> clock time its object arrived
        self.backfilled: set[str] = set()
        self.checked: dict[str, str | None] = {}  # id -> the started_at looked up
        self._cells: dict[str, tuple[tuple[Text, ...], float]] = {}  # rows, and when rendered
        self._marks_only: set[str] = set()  # cached rows whose mark cell needs redrawing
        self._hay: dict[str, str] = {}  # what `/` searches, lower case
        self._keys: dict[str, tuple[int, int, str, str]] = {}  # planner-order sort keys
        self._active: set[str] = set()  # ids of runs in a live state
        self._queued: set[str] = set()  # ids of runs that wait
        self._head: str | None = None
        self._day: float | None = None  # the UTC day the start cells were last written for
        self.filters = Filters()
        self.loaded = False

    # ------------------------------------------------------------ merging

    def apply(self, batch: Batch) -> Diff:
        diff = Diff()
        if batch.snapshot is not None:
            fresh = {r.id: r for r in batch.snapshot}
            diff.removed = set(self.runs) - set(fresh)
            for rid in diff.removed:
                self._forget(rid)
            self._upsert(fresh.values(), batch.at, diff)
            self.loaded = True
        self._upsert(batch.upsert.values(), batch.at, diff)
        if batch.moved:
            self._move(batch.moved, batch.at, diff)
        for rid in batch.remove:
            if rid in self.runs:
                self._forget(rid)
                diff.removed.add(rid)
                diff.added.discard(rid)
                diff.changed.discard(rid)
        return diff

    def _upsert(self, runs: Iterable[Run], at: float, diff: Diff) -> None:
        for run in runs:
            rid = run.id
            old = self.runs.get(rid)
            if old == run:
                continue
            (diff.changed if old is not None else diff.added).add(rid)
            if old is not None and old.started_at != run.started_at:
                self.backfilled.discard(rid)  # a new attempt: not known to be backfilled yet
            self.runs[rid] = run
            self.received[rid] = at
            if old is not None and all(getattr(old, k) == getattr(run, k) for k in CELL_KEYS):
                self._marks_only.add(rid)  # only its mark may change: keep the other cells
            else:
                self._cells.pop(rid, None)
            self._hay.pop(rid, None)
            self._keys[rid] = _order(run)
            if run.state in RunState.LIVE:
                self._active.add(rid)
            else:
                self._active.discard(rid)
            if run.state == RunState.QUEUED:
                self._queued.add(rid)
            else:
                self._queued.discard(rid)
            if run.head:
                self._head = rid
            elif self._head == rid:
                self._head = None

    def _move(self, moved: dict[str, int | None], at: float, diff: Diff) -> None:
        """New positions alone (the stream's ``moved``): only the mark cell is drawn again."""
        runs, replace, keys = self.runs, msgspec.structs.replace, self._keys
        changed, shifted, received = diff.changed, diff.moved, self.received
        cells, marks_only = self._cells, self._marks_only
        for rid, position in moved.items():
            old = runs.get(rid)
            if old is None or old.position == position:
                continue
            runs[rid] = replace(old, position=position)
            if rid not in changed:  # not upserted in this batch too: its place alone
                shifted.add(rid)
                changed.add(rid)
            received[rid] = at
            if rid in cells:
                marks_only.add(rid)
            live, _, since, same = keys[rid]  # as _order, its position replaced
            keys[rid] = (live, FAR if position is None else position, since, same)

    def _forget(self, rid: str) -> None:
        self.runs.pop(rid, None)
        self.received.pop(rid, None)
        self.backfilled.discard(rid)
        self.checked.pop(rid, None)
        self._cells.pop(rid, None)
        self._marks_only.discard(rid)
        self._hay.pop(rid, None)
        self._keys.pop(rid, None)
        self._active.discard(rid)
        self._queued.discard(rid)
        if self._head == rid:
            self._head = None

    # ------------------------------------------------------------ reading

    @property
    def head(self) -> Run | None:
        return None if self._head is None else self.runs.get(self._head)

    def active(self) -> list[Run]:
        runs = [self.runs[rid] for rid in self._active]
        return sorted(runs, key=lambda r: (r.started_at or "", r.id))

    def victims(self) -> list[Run]:
        return [r for r in self.active() if r.state == RunState.STOPPING and r.stopping_for]

    def waiting(self, n: int, view: list[str] | None = None) -> list[Run]:
        """The first ``n`` queued runs, in the planner's order; ``view``, when given, is
        ``view()``'s answer, read from its start when it holds every run in that order."""
        f = self.filters
        if view is not None and f == Filters() and len(view) == len(self.runs):
            runs, queued = self.runs, self._queued
            return [runs[rid] for rid in itertools.islice(
                (rid for rid in view if rid in queued), n)]  # fmt: skip
        first = heapq.nsmallest(n, self._queued, key=self._keys.__getitem__)
        return [self.runs[rid] for rid in first]

    @property
    def queued(self) -> int:
        return len(self._queued)

    def starts_to_check(self, diff: Diff) -> dict[str, str | None]:
        """Runs whose latest start is not yet known as planned or backfilled: id -> started_at."""
        out: dict[str, str | None] = {}
        for rid in sorted((diff.added | diff.changed) - diff.moved):  # a place: no new start
            run = self.runs[rid]
            started = run.started_at
            live = run.state in (RunState.STARTING, RunState.RUNNING) and run.visible
            if live and self.checked.get(rid, "?") != started:
                self.checked[rid] = out[rid] = started
        return out

    def mark_started(self, rid: str, started_at: str | None, backfilled: bool) -> bool:
        """Record how ``rid`` started; False when that start is no longer its latest."""
        run = self.runs.get(rid)
        if run is None or run.started_at != started_at:
            return False
        self._cells.pop(rid, None)
        if backfilled:
            self.backfilled.add(rid)
        else:
            self.backfilled.discard(rid)
        return True

    def haystack(self, rid: str) -> str:
        found = self._hay.get(rid)
        if found is None:
            run = self.runs[rid]
            words = (str(getattr(run, k) or "") for k in ("name", "workspace", "state", "reason"))
            found = self._hay[rid] = " ".join(words).lower()
        return found

    def view(self) -> list[str]:
        f = self.filters
        ids: Iterable[str] = self.runs
        if f.workspace is not None or f.state is not None:
            ws, state, runs = f.workspace, f.state, self.runs
            ids = [i for i in ids if (ws is None or runs[i].workspace == ws)
                   and (state is None or runs[i].state == state)]  # fmt: skip
        if f.search:
            needle, hay = f.search.lower(), self.haystack
            ids = [i for i in ids if needle in hay(i)]
        ids = list(ids)
        sort = self.filters.sort
        runs, keys = self.runs, self._keys
        if sort == "priority":
            ids.sort(key=lambda i: (-runs[i].priority, keys[i]))
        elif sort == "age":
            ids.sort(key=lambda i: (runs[i].submitted_at or "", i))
        elif sort in ("name", "workspace", "state"):
            ids.sort(key=lambda i: (str(getattr(runs[i], sort) or ""), keys[i]))
        else:
            ids.sort(key=keys.__getitem__)
        return ids

    def workspaces(self) -> list[str]:
        return sorted({r.workspace or "" for r in self.runs.values()})

    # ------------------------------------------------------------ rows

    def cells(self, rid: str, now: float) -> tuple[Text, ...]:
        """The row of ``rid`` (cached until the run changes; ages move on their own)."""
        found = self._cells.get(rid)
        if found is None or found[1] // DAY != now // DAY:  # a start's date shows on other days
            row = self._render(rid, now)
        elif rid in self._marks_only:  # a new position, say: the rest is as it was
            self._marks_only.discard(rid)
            row = (self._mark(self.runs[rid]), *found[0][1:])
            now = found[1]
        elif now - found[1] >= AGE_EVERY:
            row = (*found[0][:AGE], self.age_cell(rid, now), *found[0][AGE + 1 :])
        else:
            return found[0]
        self._cells[rid] = (row, now)
        return row

    def _render(self, rid: str, now: float) -> tuple[Text, ...]:
        run = self.runs[rid]
        dim = "dim" if over_quota(run) else ""
        held, asked = len(run.gpus or []), run.gpus_requested
        limit = run.time_limit_seconds
        values = (
            self._mark(run),
            Text(run.name or rid, style="bold" if run.head else ""),
            Text(run.workspace or ""),
            Text(str(run.priority), justify="right"),
            Text(run.state or "", style=STATE_STYLE.get(run.state or "", "")),
            Text(f"{asked}/{held}", justify="right"),
            Text(compact(limit, cell=True) if limit else "none", justify="right"),
            self.age_cell(rid, now),
            self._start(run, now),
            self._reason(run, now),
        )
        if dim:
            for cell in values:
                cell.stylize("dim")
        return values

    def _reason(self, run: Run, now: float) -> Text:
        """The reason, after ``idle 25m ·`` when the run's GPUs are marked idle."""
        cell = Text(run.reason or "", style="" if over_quota(run) else "grey70")
        idle = idle_label(run, now)
        if not idle:
            return cell
        return Text.assemble((idle, "bold dark_orange"), " · " if run.reason else "", cell)

    def idle(self) -> bool:
        """Whether a run in the queue is marked idle (its reason cell then moves)."""
        return any(isinstance(self.runs[rid].idle_since, str) for rid in self._active)

    def reason_cell(self, rid: str, now: float) -> Text:
        run = self.runs[rid]
        return _dim_over_quota(run, self._reason(run, now))

    def new_day(self, now: float) -> bool:
        """Whether the UTC day turned since last asked: start cells then show other dates."""
        last, self._day = self._day, now // DAY
        return last is not None and last != self._day

    def age_cell(self, rid: str, now: float) -> Text:
        run = self.runs[rid]
        return Text(age(run, now), justify="right", style="dim" if over_quota(run) else "")

    def start_cell(self, rid: str, now: float) -> Text:
        run = self.runs[rid]
        return _dim_over_quota(run, self._start(run, now))

    def _start(self, run: Run, now: float) -> Text:
        """When a waiting run starts at the latest; ``?`` when no estimate exists."""
        label = start_label(run, now)
        style = "bold yellow" if run.head else "grey50" if label == "?" else ""
        return Text(label, justify="right", style=style)

    def _mark(self, run: Run) -> Text:
        position = run.position
        pos = "" if position is None or run.state != RunState.QUEUED else str(position)
        if run.head:
            return Text(f"▶{pos:>3}", style="bold yellow")
        if run.id in self.backfilled and run.state in RunState.LIVE:
            return Text("↪ bf", style="cyan")
        if run.paused:
            return Text(f"⏸{pos:>3}", style="magenta")
        if run.held and run.state == RunState.QUEUED:  # out of the order until released
            return Text("held", style="dark_orange")
        if run.state == RunState.STOPPING:
            return Text("■", style="red")
        if run.state in RunState.LIVE:
            return Text("●", style="green")
        return Text(f"{pos:>4}", style="grey50")


def _dim_over_quota(run: Run, cell: Text) -> Text:
    """``cell``, dimmed while its run waits only for its namespace's quota (as its row is)."""
    if over_quota(run):
        cell.stylize("dim")
    return cell


def _order(run: Run) -> tuple[int, int, str, str]:
    """Running work first (as the API lists it), then the planner's order."""
    active = run.state in RunState.LIVE
    position = run.position
    return (
        0 if active else 1,
        FAR if position is None else position,
        run.started_at or run.submitted_at or "",
        run.id,
    )


def age(run: Run, now: float) -> str:
    """Minutes at least: the column is refreshed every AGE_EVERY seconds, not every second."""
    submitted = epoch(run.submitted_at)
    if submitted is None:
        return "-"
    return "<1m" if now - submitted < 60 else compact(now - submitted, cell=True)
