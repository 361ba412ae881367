"""The back-end seam: what the daemon and the API need of whatever runs the work.

Two back ends implement :class:`Backend`: the engine's own loop
(runner/engine/loop.py), which plans the queue and starts workers on this machine
through an executor, and the front for Slurm (runner/slurm/front.py), which hands
the runs to a Slurm cluster and shows Slurm's queue. The daemon builds one of them
by its config (runner/daemon/daemon.py); the API asks what differs between them of
the back end's declared :class:`BackendCapabilities`, never of its type.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from runner.clock import Clock
from runner.engine.plantimes import PlanTimes
from runner.engine.published import NOTHING, Published
from runner.engine.snapshot import SpecCache
from runner.model import RunSpec
from runner.planner.plan import Plan
from runner.sessions import EnterRequest, Session
from runner.store.db import RunRow

__all__ = ["Backend", "BackendCapabilities", "BackendKind", "LoopStatus"]

BackendKind = Literal["local", "slurm"]


@dataclass(frozen=True)
class BackendCapabilities:
    """What a back end is, declared by it: the API decides by these, never by probing."""

    kind: BackendKind
    executor: str  # the name shown for what runs the work: "process", "docker", "slurm"
    local_gpus: bool  # the GPUs are this machine's: read here, numbered as here
    plans_locally: bool  # the built-in planner orders the queue: levers, previews, estimates


@dataclass
class LoopStatus:
    """What the API shows about the back end's loop itself."""

    ticks: int = 0
    last_plan_at: float | None = None
    last_plan_ms: float = 0.0
    # the last plan and its start estimates, as the API and the stream read them
    published: Published = NOTHING
    estimating: bool = False  # a helper makes the estimates (runner/engine/published.py)
    watchers: int = 0  # change streams open: the helper makes estimates after each plan
    asking: int = 0  # requests waiting for fresh estimates (the API's thread counts them)
    # set when estimates are wanted now: a plan, a request (the helper waits on it)
    wake_estimates: threading.Event = field(default_factory=threading.Event, repr=False)
    plan_times: PlanTimes = field(default_factory=PlanTimes)  # every plan's, for GET /metrics
    errors: list[str] = field(default_factory=list)
    # runs marked idle (runner/engine/idle.py): run uid -> idle since, on the wall clock
    idle: dict[str, float] = field(default_factory=dict)

    def ask_estimates(self) -> None:
        """A request waits for fresh estimates (``asking`` counts it): the helper looks."""
        self.wake_estimates.set()

    @property
    def plan(self) -> Plan | None:
        """The last plan (its order, head and reasons): the published one."""
        return self.published.plan


class Backend(Protocol):
    """Whatever runs the work: ticks in a thread of the daemon, poked by the service."""

    capabilities: BackendCapabilities
    status: LoopStatus  # the last plan (its order, head and reasons), ticks, errors
    specs: SpecCache  # the runs' parsed specs, shared with the API
    clock: Clock

    def run_forever(self, stop: threading.Event) -> None:
        """Tick until ``stop`` is set; a failing tick is recorded, never fatal."""

    def tick(self) -> None:
        """One round: read what runs, carry it into the store, plan or follow the plan."""

    def poke(self) -> None:
        """Something changed (submit, delete, priority): look again at once."""

    def watch(self, notify: Callable[[], None]) -> None:
        """Call ``notify`` (from the back end's thread) after a tick that changed something."""

    def check_spec(self, spec: RunSpec, workspace: str) -> str | None:
        """Why this back end cannot run ``spec`` (refused at submit), or None."""

    def log_files(self, run: RunRow) -> list[Path]:
        """The files that hold ``run``'s output, in order."""

    def enter(self, handle: str, request: EnterRequest) -> Session:
        """Run a command inside the live worker ``handle`` (``astra exec``).

        Raises ExecutorError (one line) where it cannot, as on the Slurm front."""

    def terminal(self, handle: str) -> Session:
        """Attach to the interactive worker ``handle``'s terminal (``astra run -it``)."""
