"""The real loop, store and service around a fake executor and a clock moved by hand.

``Engine`` builds a ``Loop`` as ``runner/daemon/daemon.py`` does (config file, simulated
GPUs, ``machine_for``, ``LoopSettings``, the service's ``start_refusal``), over a real
SQLite store in a temporary folder. Only what cannot exist here is fake: the executor
(workers are entries in a dict the test moves on) and the clock (``advance`` moves both
readings, ``step_wall`` only the wall reading, as NTP or ``date -s`` would). Nothing
sleeps: each ``tick`` is one call of ``Loop.tick``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.clock import Clock
from runner.config.load import load_config
from runner.daemon.daemon import machine_for
from runner.engine.backoff import NO_BACKOFF, Backoff
from runner.engine.loop import TICK, Loop, LoopSettings
from runner.executors.base import (
    Capabilities,
    ExecutorError,
    ListedWorker,
    Observed,
    WorkerLaunch,
    WorkerStatus,
)
from runner.gpus import read_inventory
from runner.service.runs import Service, caller_for, start_refusal
from runner.sessions import EnterRequest, Session
from runner.store.db import RunRow, Store, WorkerRow
from tests.support.harness import spec, write_config

WORKSPACES = """
[workspaces.team]
members = ["root"]
max_priority = 10
"""

PROGRAM = ["/bin/true"]  # never run: the fake executor only records it
SIGNALS: dict[int, str] = {signal.SIGTERM: "stop", signal.SIGKILL: "kill"}


class FakeClock(Clock):
    """Both readings held still until the test moves them."""

    def __init__(self, wall: float = 1_800_000_000.0, mono: float = 1_000.0) -> None:
        super().__init__()
        self.boot = "unit-test-boot"
        self._wall, self._mono = wall, mono

    def wall(self) -> float:
        return self._wall

    def mono(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        """Time passes: both clocks move on."""
        self._wall += seconds
        self._mono += seconds

    def step_wall(self, seconds: float) -> None:
        """The wall clock is stepped; the monotonic clock does not move."""
        self._wall += seconds


@dataclass(frozen=True)
class Call:
    """One call the loop made: ``launch``, ``stop`` (SIGTERM), ``kill`` (SIGKILL), ``cleanup``."""

    op: str
    run: str
    worker: int
    attempt: int


class Crash(BaseException):  # a kill -9: nothing in the daemon catches it
    """The daemon died (``kill -9``) right after the executor started a worker."""


class FakeExecutor:
    """Workers in memory: started running, they stay so until the test says otherwise."""

    name = "fake"
    capabilities = Capabilities()

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.launches: dict[str, WorkerLaunch] = {}
        self.states: dict[str, WorkerStatus] = {}
        self.on_start: Callable[[WorkerLaunch], None] = lambda launch: None
        self.crash_after_start = False  # the daemon dies once a worker runs, before noting it
        self.refuse_start: str | None = None  # start raises ExecutorError with this message
        self.up = True  # the engine answers (reachable(), as the docker executor has it)

    def _call(self, op: str, handle: str) -> None:
        launch = self.launches[handle]
        self.calls.append(Call(op, launch.run, launch.worker, launch.attempt))

    def remaining(self, handle: str) -> tuple[str, ...]:
        return ()

    def reachable(self) -> bool:
        return self.up

    def follow_logs(self, handle: str, log_path: Path | None = None) -> bool:
        return False

    def start(self, launch: WorkerLaunch) -> str:
        self.on_start(launch)
        handle = launch.key
        if self.refuse_start is not None:
            self.calls.append(Call("refused", launch.run, launch.worker, launch.attempt))
            raise ExecutorError(self.refuse_start)
        self.launches[handle] = launch
        self.states[handle] = WorkerStatus(Observed.RUNNING)
        self._call("launch", handle)
        if self.crash_after_start:
            raise Crash(handle)
        return handle

    def signal(self, handle: str, signum: int) -> None:
        self._call(SIGNALS.get(signum, f"signal {signum}"), handle)

    def status(self, handle: str) -> WorkerStatus:
        return self.states.get(handle, WorkerStatus(Observed.MISSING))

    def enter(self, handle: str, request: EnterRequest) -> Session:
        raise ExecutorError("the fake executor runs nothing inside its workers")

    def terminal(self, handle: str) -> Session:
        raise ExecutorError("the fake executor's workers have no terminal")

    def list_workers(self) -> list[ListedWorker]:
        if not self.up:
            raise ExecutorError("fake: cannot list workers: the engine does not answer")
        return [
            ListedWorker(h, launch.run, launch.attempt, launch.worker)
            for h, launch in self.launches.items()
            if h in self.states
        ]

    def cleanup(self, handle: str) -> None:
        self._call("cleanup", handle)

    def not_enforced(self) -> str | None:
        return None

    def close(self) -> None:
        """Nothing held."""

    # --------------------------------------------------- what the test says

    def handle(self, run: str, worker: int = 0) -> str:
        """The newest attempt's handle of a worker of ``run``."""
        found = [h for h, x in self.launches.items() if x.run == run and x.worker == worker]
        assert found, f"{run} worker {worker} was never launched"
        return max(found, key=lambda h: self.launches[h].attempt)

    def exit(self, run: str, code: int, worker: int = 0) -> None:
        self.states[self.handle(run, worker)] = WorkerStatus(Observed.EXITED, code)

    def vanish(self, run: str, worker: int = 0) -> None:
        del self.states[self.handle(run, worker)]

    def ops(self, run: str | None = None) -> list[str]:
        """The calls' names, in order (of one run's workers, or of all)."""
        return [c.op for c in self.calls if run is None or c.run == run]

    def visible(self, run: str, worker: int = 0) -> str:
        return self.launches[self.handle(run, worker)].env["CUDA_VISIBLE_DEVICES"]


class Engine:
    """A loop as the daemon wires it, on a fake executor and a fake clock."""

    def __init__(
        self, home: Path, *, gpus: int = 4, grace: float = 30, remaps_gpus: bool = False,
        backoff: Backoff = NO_BACKOFF,
    ) -> None:  # fmt: skip
        write_config(home, WORKSPACES, gpus=gpus, grace=grace)
        (home / "logs").mkdir()
        self.config = load_config(home / "config.toml")
        self.store = Store(home / "state.db")
        self.clock = FakeClock()
        self.executor = FakeExecutor()
        self.settings = LoopSettings(
            machine=machine_for(self.config, read_inventory(self.config.machine.gpus)),
            workspaces=self.config.workspaces,
            drives={},
            logs_dir=home / "logs",
            executor_remaps_gpus=remaps_gpus,
            instance="unit",
            authorise=lambda user, workspace: start_refusal(self.config, user, workspace),
            restart_backoff=backoff,
        )
        self.loop = Loop(self.store, self.executor, self.settings, self.clock)
        self.service = Service(
            self.store, self.config, self.loop.poke, "process", settings=self.settings
        )
        self.root = caller_for(0, 0, self.config)
        self.loop.reconcile()  # as run_forever does before its first tick

    def submit(self, name: str, **fields: Any) -> RunRow:
        """Submit through the service, at the fake wall clock's time."""
        document = spec(name, PROGRAM, workspace="team", **fields)
        return self.service.submit(document, self.root, now=self.clock.wall())

    def ran(self, name: str, seconds: float, **fields: Any) -> None:
        """Submit ``name``, let it start, run ``seconds`` and succeed (a finished run's
        usage record, as the learned lengths read it)."""
        self.submit(name, **fields)
        self.tick()
        self.tick(seconds)
        self.executor.exit(name, 0)
        self.tick()

    def tick(self, seconds: float = TICK) -> None:
        """Let ``seconds`` pass on both clocks, then run one tick."""
        self.clock.advance(seconds)
        self.loop.tick()

    def run(self, name: str) -> RunRow:
        row = self.store.runs.get(name)
        assert row is not None, name
        return row

    def state(self, name: str) -> str:
        return self.run(name).state

    def reason(self, name: str) -> str:
        reason = self.run(name).reason
        return "" if reason is None else reason.render()

    def workers(self, name: str) -> list[WorkerRow]:
        return self.store.workers.of(name)

    def worker_states(self, name: str) -> list[tuple[int, str]]:
        return [(w.attempt, w.state) for w in self.workers(name)]

    def events(self, name: str) -> list[str]:
        return [e.message.render() for e in self.store.events.all(name)]
