"""What callers may read: every read of the API, each with its visibility rule applied here.

A run of another workspace is listed (its object is anonymised when rendered,
``runner/api/views.py``), but its details, events and logs are private: 403. An event
is shown only to those who see its workspace. :class:`Reads` is a part of
:class:`runner.service.runs.Service`, which holds the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from runner.model import Quota, Resources
from runner.planner.plan import dominant_share
from runner.reasons import ReasonCode, Viewer
from runner.rows import DrainRow, UsageRecord
from runner.runspec.parse import parse_spec
from runner.service.caller import Caller, ServiceError
from runner.service.usage import UsageReport, history, usage_report
from runner.store.counts import event_counts_since
from runner.store.db import EventRow, RunRow, Store, WorkerRow

DETAILS_PRIVATE = "a job in another namespace: details are private"
LOGS_PRIVATE = "a job in another namespace: its logs are private"


def event_visible(e: EventRow, viewer: Viewer) -> bool:
    """Whether ``viewer`` is shown the event at all: an event tells who submitted a run,
    who changed it, its GPUs and how it ended, so a member reads only the events of its
    own workspaces' runs and groups (admins: all). Not even anonymised: the queue
    already shows that another workspace's run exists."""
    return viewer.sees(e.workspace)


class Reads:
    """The reads; the store is the service's."""

    store: Store

    # ------------------------------------------------------------------ runs

    def find_run(self, name: str) -> RunRow:
        """The run ``name``, whoever may see it (its object is rendered per viewer): 404
        when there is none."""
        run = self.store.runs.get(name)
        if run is None:
            raise ServiceError(404, "NOT_FOUND", f"no run {name}")
        return run

    def run_now(self, name: str) -> RunRow | None:
        """The run ``name`` as the store has it now; None once it is forgotten."""
        return self.store.runs.get(name)

    def get_run(self, caller: Caller, name: str, private: str = DETAILS_PRIVATE) -> RunRow:
        """The run whose details ``caller`` may read: 404 when there is none, 403 when it is
        another workspace's (its details, events and logs are private)."""
        run = self.find_run(name)
        if not caller.viewer.sees(run.workspace):
            raise ServiceError(403, "FORBIDDEN", private)
        return run

    def list_runs(
        self, caller: Caller, *, everything: bool = False, workspace: str | None = None,
        group: str | None = None, states: Iterable[str] | None = None,
    ) -> list[RunRow]:  # fmt: skip
        """The runs in the queue (``everything``: finished ones too), filtered. Listed for
        every caller: the views anonymise another workspace's (``caller`` for the rule)."""
        runs = self.store.runs.all(active_only=not everything)
        if workspace is not None:
            runs = [r for r in runs if r.workspace == workspace]
        if group is not None:
            runs = [r for r in runs if r.grp == group]
        if states is not None:
            wanted = {s.lower() for s in states}
            runs = [r for r in runs if r.state.lower() in wanted]
        return runs

    def runs_generation(self) -> int:
        """A number that moves whenever a committed write changed the store: what was
        rendered from it at the same number is still what it holds."""
        return self.store.generation

    def run_states(self, names: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Each named run's state and workspace (runs not known are left out)."""
        return self.store.runs.states(names)

    # --------------------------------------------------------------- workers

    def workers_of(self, name: str) -> list[WorkerRow]:
        """Every worker row of the run, for its object (rendered per viewer)."""
        return self.store.workers.of(name)

    def workers_history(self, caller: Caller, name: str) -> list[WorkerRow]:
        """Every worker of a run whose details ``caller`` may read (see get_run)."""
        return self.store.workers.of(self.get_run(caller, name).name)

    def live_by_run(self) -> dict[str, list[WorkerRow]]:
        """The live workers, by run."""
        live: dict[str, list[WorkerRow]] = {}
        for w in self.store.workers.live():
            live.setdefault(w.run, []).append(w)
        return live

    def gpu_holders(self, caller: Caller) -> list[tuple[WorkerRow, bool]]:
        """Each live worker, and whether ``caller`` may see whose it is."""
        holders = []
        for w in self.store.workers.live():
            run = self.store.runs.get(w.run)
            holders.append((w, run is not None and caller.viewer.sees(run.workspace)))
        return holders

    def gpu_shares(self, caller: Caller) -> list[tuple[WorkerRow, bool, int]]:
        """``gpu_holders`` with each worker's memory on each of its GPUs when its run
        shares them (0: whole GPUs)."""
        shares = []
        for w, visible in self.gpu_holders(caller):
            run = self.store.runs.get(w.run)
            share = 0 if run is None else parse_spec(run.spec(), stored=True).task.gpu_share
            shares.append((w, visible, share))
        return shares

    def live_workers(self) -> list[WorkerRow]:
        """Every live worker (what the metrics and the telemetry count; no run named)."""
        return self.store.workers.live()

    def active_runs(self) -> list[RunRow]:
        """The runs not finished (the metrics' counts by workspace and state)."""
        return self.store.runs.all(active_only=True)

    def drains(self) -> list[DrainRow]:
        """The machine's drains and its GPUs' (anyone may read them)."""
        return self.store.drains.all()

    def usage_report(
        self, caller: Caller, since: str | None, by: str | None, workspaces: Iterable[str],
        daily: bool = False,
    ) -> UsageReport:  # fmt: skip
        """The usage of runs finished since ``since`` (runner/service/usage.py)."""
        return usage_report(self.store, caller, since, by, workspaces, None, daily)

    def history(
        self, caller: Caller, since: str | None, workspace: str | None, limit: int | None
    ) -> tuple[float, list[UsageRecord]]:
        """The runs finished since ``since`` the caller may see (runner/service/usage.py)."""
        return history(self.store, caller, since, workspace, limit)

    def event_counts_since(
        self, after: int, codes: Iterable[ReasonCode]
    ) -> tuple[int, dict[tuple[ReasonCode, str], int]]:
        """The newest event's id, and the runs' events of ``codes`` after ``after``,
        counted by (code, workspace): the metrics' counters (runner/store/counts.py)."""
        return event_counts_since(self.store, after, codes)

    def shares_now(self, quotas: Mapping[str, Quota | None]) -> dict[str, tuple[Resources, float]]:
        """What each workspace of ``quotas`` holds now, and its dominant share of its quota
        (of the machine where it has none): the measure fair share orders by."""
        used = self.usage_now()
        return {
            name: (u, dominant_share(u, quota))
            for name, quota in quotas.items()
            for u in [used.get(name, Resources())]
        }

    def usage_now(self) -> dict[str, Resources]:
        """What each workspace's live workers hold now."""
        used: dict[str, Resources] = {}
        for w in self.store.workers.live():
            run = self.store.runs.get(w.run)
            if run is not None:
                share = parse_spec(run.spec(), stored=True).task.gpu_share  # shared: no whole GPU
                n = len(w.gpus)
                one = Resources(0 if share else n, w.cpu_milli, w.memory, 1, share * n, n)
                used[run.workspace] = used.get(run.workspace, Resources()) + one
        return used

    def usage_history(self) -> dict[str, tuple[float, float]]:
        """GPU and CPU seconds used so far, by workspace (forgotten runs' too)."""
        return self.store.usage.by_workspace()

    # ---------------------------------------------------------------- events

    def events_for(
        self, caller: Caller, run: str | None = None, after: int = 0
    ) -> tuple[list[EventRow], int]:
        """The events after id ``after`` (of ``run`` only, if named) that ``caller`` is
        shown, and the last id read, seen or not: where a follower goes on.

        The run itself is not looked up: its events go on being readable while it is
        followed (see get_run for who may ask)."""
        rows = self.store.events.all(run, after=after)
        last = rows[-1].id if rows else after
        return [e for e in rows if event_visible(e, caller.viewer)], last

    # ---------------------------------------------------------------- groups

    def runs_of_group(self, name: str) -> list[RunRow]:
        """The runs of the group ``name`` (a group the caller was allowed to read)."""
        return self.store.runs.of_group(name)

    def group_events(self, name: str) -> list[EventRow]:
        """The group's own events (a group the caller was allowed to read: all of them are
        of its workspace)."""
        return self.store.events.all(grp=name)
