"""The queue as the dashboard holds it: runs by id, merged from the change stream.

No widgets here: ``QueueModel`` applies a snapshot or a batch of changes and
says which runs were added, changed or removed; ``view()`` is the visible
order under the current sort and filters; ``cells()`` renders one table row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from rich.text import Text

from astraeus_tui.widgets.fmt import ACTIVE_STATES, Run, compact, epoch, over_quota

SORTS = ("order", "priority", "age", "name", "workspace", "state")
STATES = ("Queued", "Starting", "Running", "Stopping")
FAR = 1 << 30
STATE_STYLE = {"Running": "green", "Starting": "cyan", "Stopping": "red", "Queued": ""}


@dataclass
class Batch:
    """What the stream brought since the screen last looked: merged, latest wins."""

    snapshot: list[Run] | None = None
    upsert: dict[str, Run] = field(default_factory=dict)
    remove: set[str] = field(default_factory=set)
    at: float = 0.0  # the dashboard's clock when the last piece arrived

    def add_change(self, upsert: Iterable[Run], remove: Iterable[str], at: float) -> None:
        for run in upsert:
            self.upsert[run["id"]] = run
            self.remove.discard(run["id"])
        for rid in remove:
            self.upsert.pop(rid, None)
            self.remove.add(rid)
        self.at = at


@dataclass
class Diff:
    added: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


@dataclass
class Filters:
    workspace: str | None = None
    state: str | None = None
    search: str = ""
    sort: str = "order"

    def keeps(self, run: Run) -> bool:
        if self.workspace is not None and run.get("workspace") != self.workspace:
            return False
        if self.state is not None and run.get("state") != self.state:
            return False
        if self.search:
            hay = " ".join(str(run.get(k) or "") for k in ("name", "workspace", "state", "reason"))
            return self.search.lower() in hay.lower()
        return True


class QueueModel:
    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.received: dict[str, float] = {}  # id -> clock time its object arrived
        self.backfilled: set[str] = set()
        self.checked: dict[str, str | None] = {}  # id -> the started_at looked up
        self.filters = Filters()
        self.loaded = False

    # ------------------------------------------------------------ merging

    def apply(self, batch: Batch) -> Diff:
        diff = Diff()
        if batch.snapshot is not None:
            fresh = {r["id"]: r for r in batch.snapshot}
            diff.removed = set(self.runs) - set(fresh)
            for rid in diff.removed:
                self._forget(rid)
            self._upsert(fresh.values(), batch.at, diff)
            self.loaded = True
        self._upsert(batch.upsert.values(), batch.at, diff)
        for rid in batch.remove:
            if rid in self.runs:
                self._forget(rid)
                diff.removed.add(rid)
                diff.added.discard(rid)
                diff.changed.discard(rid)
        return diff

    def _upsert(self, runs: Iterable[Run], at: float, diff: Diff) -> None:
        for run in runs:
            rid = run["id"]
            old = self.runs.get(rid)
            if old == run:
                continue
            (diff.changed if old is not None else diff.added).add(rid)
            if old is not None and old.get("started_at") != run.get("started_at"):
                self.backfilled.discard(rid)  # a new attempt: not known to be backfilled yet
            self.runs[rid] = run
            self.received[rid] = at

    def _forget(self, rid: str) -> None:
        self.runs.pop(rid, None)
        self.received.pop(rid, None)
        self.backfilled.discard(rid)
        self.checked.pop(rid, None)

    # ------------------------------------------------------------ reading

    @property
    def head(self) -> Run | None:
        return next((r for r in self.runs.values() if r.get("head")), None)

    def active(self) -> list[Run]:
        runs = [r for r in self.runs.values() if r.get("state") in ACTIVE_STATES]
        return sorted(runs, key=lambda r: (r.get("started_at") or "", r["id"]))

    def victims(self) -> list[Run]:
        return [r for r in self.active() if r.get("state") == "Stopping" and r.get("stopping_for")]

    def starts_to_check(self, diff: Diff) -> dict[str, str | None]:
        """Runs whose latest start is not yet known as planned or backfilled: id -> started_at."""
        out: dict[str, str | None] = {}
        for rid in sorted(diff.added | diff.changed):
            run = self.runs[rid]
            started = run.get("started_at")
            live = run.get("state") in ("Starting", "Running") and run.get("visible", True)
            if live and self.checked.get(rid, "?") != started:
                self.checked[rid] = out[rid] = started
        return out

    def mark_started(self, rid: str, started_at: str | None, backfilled: bool) -> bool:
        """Record how ``rid`` started; False when that start is no longer its latest."""
        run = self.runs.get(rid)
        if run is None or run.get("started_at") != started_at:
            return False
        if backfilled:
            self.backfilled.add(rid)
        else:
            self.backfilled.discard(rid)
        return True

    def view(self) -> list[str]:
        keep = self.filters.keeps
        ids = [rid for rid, run in self.runs.items() if keep(run)]
        sort = self.filters.sort
        runs = self.runs
        if sort == "priority":
            ids.sort(key=lambda i: (-runs[i]["priority"], _order(runs[i])))
        elif sort == "age":
            ids.sort(key=lambda i: (runs[i].get("submitted_at") or "", i))
        elif sort in ("name", "workspace", "state"):
            ids.sort(key=lambda i: (str(runs[i].get(sort) or ""), _order(runs[i])))
        else:
            ids.sort(key=lambda i: _order(runs[i]))
        return ids

    def workspaces(self) -> list[str]:
        return sorted({r.get("workspace") or "" for r in self.runs.values()})

    # ------------------------------------------------------------ rows

    def cells(self, rid: str, now: float) -> tuple[Text, ...]:
        run = self.runs[rid]
        dim = "dim" if over_quota(run) else ""
        held, asked = len(run.get("gpus") or []), run.get("gpus_requested", 0)
        limit = run.get("time_limit_seconds")
        values = (
            self._mark(run),
            Text(run.get("name") or rid, style="bold" if run.get("head") else ""),
            Text(run.get("workspace") or ""),
            Text(str(run.get("priority", 0)), justify="right"),
            Text(run.get("state") or "", style=STATE_STYLE.get(run.get("state") or "", "")),
            Text(f"{asked}/{held}", justify="right"),
            Text(compact(limit) if limit else "none", justify="right"),
            Text(age(run, now), justify="right"),
            Text(run.get("reason") or "", style="" if dim else "grey70"),
        )
        if dim:
            for cell in values:
                cell.stylize("dim")
        return values

    def _mark(self, run: Run) -> Text:
        position = run.get("position")
        pos = "" if position is None or run.get("state") != "Queued" else str(position)
        if run.get("head"):
            return Text(f"▶{pos:>3}", style="bold yellow")
        if run["id"] in self.backfilled and run.get("state") in ACTIVE_STATES:
            return Text("↪ bf", style="cyan")
        if run.get("paused"):
            return Text(f"⏸{pos:>3}", style="magenta")
        if run.get("state") == "Stopping":
            return Text("■", style="red")
        if run.get("state") in ACTIVE_STATES:
            return Text("●", style="green")
        return Text(f"{pos:>4}", style="grey50")


def _order(run: Run) -> tuple[int, int, str, str]:
    """Running work first (as the API lists it), then the planner's order."""
    active = run.get("state") in ACTIVE_STATES
    position = run.get("position")
    return (
        0 if active else 1,
        FAR if position is None else position,
        run.get("started_at") or run.get("submitted_at") or "",
        run["id"],
    )


def age(run: Run, now: float) -> str:
    submitted = epoch(run.get("submitted_at"))
    return compact(now - submitted) if submitted is not None else "-"
