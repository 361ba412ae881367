"""The back end as the API reads it: what its loop published, its clock, the runs' specs as
shown, their log files, what it can do, the runs marked idle; and what the API asks of it
(estimates now, a call after each tick that changed something, a session in a worker).

The API never holds the back end itself (runner/engine/backend.py): the daemon gives it
one :class:`LoopView` of it, and the API's handlers read and ask through that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from runner.clock import Clock
from runner.engine.backend import Backend, BackendCapabilities
from runner.engine.plantimes import PlanTimesRead
from runner.model import RunSpec
from runner.rows import RunRow
from runner.sessions import EnterRequest, Session
from runner.shown import Shown

__all__ = ["LoopView"]


class LoopView:
    """One back end's loop, read-only but for the asks the API makes of it."""

    __slots__ = ("_backend", "capabilities")

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.capabilities: BackendCapabilities = backend.capabilities

    # ----------------------------------------------------------------- reads

    @property
    def shown(self) -> Shown:
        """What the faces show of the last plan and its estimates, as published."""
        return self._backend.status.published.shown

    @property
    def clock(self) -> Clock:
        """The back end's clock: calling it reads the wall clock (a test's stepped one)."""
        return self._backend.clock

    @property
    def idle(self) -> Mapping[str, float]:
        """The runs marked idle: run uid -> idle since, on the wall clock."""
        return self._backend.status.idle

    def spec_shown(self, run: RunRow) -> RunSpec:
        """``run``'s spec as people see it (a finished run's from its row)."""
        return self._backend.specs.shown(run)

    def spec(self, run: RunRow) -> RunSpec:
        """``run``'s spec as it runs."""
        return self._backend.specs.get(run)

    def log_files(self, run: RunRow) -> list[Path]:
        """The files that hold ``run``'s output, in order (by its id, never an earlier
        run's of that name)."""
        return self._backend.log_files(run)

    @property
    def ticks(self) -> int:
        return self._backend.status.ticks

    @property
    def last_plan_ms(self) -> float:
        return self._backend.status.last_plan_ms

    @property
    def errors(self) -> list[str]:
        """The loop's recent errors, as its status shows them."""
        return self._backend.status.errors

    def plan_times(self) -> PlanTimesRead:
        """Every plan's time so far, for GET /metrics."""
        return self._backend.status.plan_times.read()

    @property
    def estimating(self) -> bool:
        """A helper makes the estimates: a request may wait for those of the last plan."""
        return self._backend.status.estimating

    # ------------------------------------------------------------------ asks

    @contextmanager
    def asking(self) -> Iterator[None]:
        """A request waits for fresh estimates while this is open (the helper makes them
        while any does)."""
        status = self._backend.status
        status.asking += 1
        try:
            status.ask_estimates()
            yield
        finally:
            status.asking -= 1

    def watchers(self, count: int) -> None:
        """``count`` change streams are open: estimates are made after each plan while
        any is."""
        self._backend.status.watchers = count

    def ask_estimates(self) -> None:
        """Estimates of the last plan are wanted now (the helper looks)."""
        self._backend.status.ask_estimates()

    def watch(self, notify: Callable[[], None]) -> None:
        """Call ``notify`` (from the back end's thread) after a tick that changed something."""
        self._backend.watch(notify)

    def enter(self, handle: str, request: EnterRequest) -> Session:
        """Run a command inside the live worker ``handle`` (``astra exec``)."""
        return self._backend.enter(handle, request)

    def terminal(self, handle: str) -> Session:
        """Attach to the interactive worker ``handle``'s terminal."""
        return self._backend.terminal(handle)
