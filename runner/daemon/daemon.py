"""The daemon: config, state, GPUs and a back end (runner/engine/backend.py) in a thread.

``Daemon(home).start()`` is the in-process handle tests use; ``astra serve``
runs it in the foreground with the API on the socket.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from runner.clock import Clock
from runner.config.files import ensure_config
from runner.config.load import Config, ConfigError, load_config
from runner.config.slurm import SlurmConfig
from runner.engine.backend import Backend
from runner.engine.backoff import Backoff
from runner.engine.groups import GroupControl
from runner.engine.idle import IdleSettings
from runner.engine.loop import Loop
from runner.engine.settings import LoopSettings
from runner.executors.base import Executor, ExecutorError
from runner.gpus import SIM_DEVICES_ENV, Inventory, read_inventory
from runner.model import RunState
from runner.notify.sender import Sender
from runner.planner.plan import Machine
from runner.service.explain import Explainer
from runner.service.groups import GroupService
from runner.service.loopview import LoopView
from runner.service.runs import LOCAL_IMAGE, Service, start_refusal
from runner.service.telemetry import Telemetry
from runner.store.db import RunRow, Store
from runner.telemetry.history import Recorder
from runner.telemetry.idle import IdleTracker
from runner.telemetry.sampler import Sampler
from runner.telemetry.workers import live_workers

log = logging.getLogger("astraeus.daemon")


class DaemonError(Exception):
    """The daemon cannot start; one line saying why."""


@dataclass(frozen=True)
class ExecutorChoice:
    executor: Executor
    why: str


def instance_id(home: Path) -> str:
    """Eight hex digits naming this ASTRAEUS_HOME's daemon in container names and labels."""
    return hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:8]


def pick_executor(config: Config, home: Path, devices: Path = Path("/dev")) -> ExecutorChoice:
    """``auto``: docker when the engine answers, else the local process executor."""
    wanted = config.machine.executor
    if wanted in ("auto", "docker"):
        try:
            from runner.executors.docker.executor import DockerExecutor  # lazy: optional stack

            docker = DockerExecutor.connect(instance=instance_id(home))
            return ExecutorChoice(docker, "docker: the engine answered")
        except (ExecutorError, ImportError) as e:
            if wanted == "docker":
                raise DaemonError(f'executor = "docker" but Docker is not reachable: {e}') from e
            why = f"process: Docker is not reachable ({e})"
    else:
        why = 'process: executor = "process" in the config'
    from runner.executors.process import ProcessExecutor  # lazy: optional stack

    workers = ProcessExecutor(
        home / "workers", instance=instance_id(home), pinning=config.machine.cpu_pinning,
        devices=devices,
    )  # fmt: skip
    workers.warm_up()
    return ExecutorChoice(workers, why)


def _refuse_to_orphan_containers(store: Store, why: str) -> None:
    """Docker is down but runs that live in containers are in the state: starting on
    local processes would lose them (and run their commands on the host). Refuse.

    Decided by the executor that started each live worker, as recorded on it; a worker
    from before that was recorded falls back to its run's image."""
    started_by: dict[str, set[str | None]] = {}
    for w in store.workers.live():
        started_by.setdefault(w.run, set()).add(w.executor)
    live = [r.name for r in store.runs.all(active_only=True) if _in_containers(r, started_by)]
    if live:
        raise DaemonError(
            f"{why}, but {len(live)} run(s) live in containers ({', '.join(live[:3])}): "
            'start Docker and try again (or set executor = "process" to give them up)'
        )


def _in_containers(run: RunRow, started_by: dict[str, set[str | None]]) -> bool:
    if run.state == RunState.QUEUED:
        return False
    executors = started_by.get(run.name, {None})
    if "docker" in executors:
        return True
    image = run.spec().get("spec", {}).get("task_template", {}).get("image")
    return None in executors and image != LOCAL_IMAGE


def _private_home(home: Path) -> None:
    """The state is the daemon's: others may reach the socket in it, not list or read it.

    Run specs (their env values) and logs are private; the API decides who sees what.
    """
    home.mkdir(parents=True, exist_ok=True)
    if home.stat().st_mode & 0o066:
        home.chmod(0o711)
    logs = home / "logs"
    logs.mkdir(exist_ok=True)
    logs.chmod(0o700)


def _memory_total() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def machine_for(config: Config, inventory: Inventory) -> Machine:
    cores = config.machine.cpu_cores or os.cpu_count() or 1
    memory = config.machine.memory or handed_memory(_memory_total(), config.machine.memory_reserve)
    return Machine(
        tuple(g.index for g in inventory.gpus),
        cores * 1000,
        memory,
        config.machine.stop_grace_seconds,
        gpu_memory=tuple(g.memory_total for g in inventory.gpus),
        gpu_shards=config.machine.gpu_shards,
    )


def handed_memory(total: int, reserve: int | None) -> int:
    """What runs may be given of ``total`` bytes: all but ``[machine] memory_reserve``
    (None: the larger of 1 GiB and 5 %), so a machine's last memory stays its own."""
    kept = max(1 << 30, total // 20) if reserve is None else reserve
    return max(0, total - kept)


def _idle_settings(config: Config) -> IdleSettings:
    idle = config.machine.idle
    return IdleSettings(idle.after, idle.threshold, idle.policy)


class Daemon:
    """Built whole by its constructor: the store, the service, then the back end (the
    engine's loop, or a front for Slurm by the config), each handed what it needs."""

    def __init__(
        self, home: Path, executor: Executor | None = None, clock: Clock | None = None
    ) -> None:
        self.home = home
        # [api] metrics_address's listener: "listening on …", or why not yet (serve.py);
        # empty when none is asked for
        self.metrics_state = ""
        _private_home(home)
        try:
            self.config = load_config(ensure_config(home))
        except ConfigError as e:
            raise DaemonError(str(e)) from e
        self.store = Store(home / "state.db")
        for name in ("state.db", "state.db-wal", "state.db-shm"):  # runs' specs: env values
            with contextlib.suppress(FileNotFoundError):
                (home / name).chmod(0o600)
        try:
            self.inventory = read_inventory(self.config.machine.gpus)
        except ValueError as e:  # a bad ASTRAEUS_SIM_GPUS
            raise DaemonError(str(e)) from e
        slurm = self.config.slurm if self.config.machine.executor == "slurm" else None
        self.executor: Executor | None = None
        if slurm is not None:
            source = "slurm: the cluster's GPUs, as squeue reports them"
            self.inventory = replace(self.inventory, source=source, simulated=False)
            self.executor_why = 'slurm: a front for the Slurm cluster (executor = "slurm")'
        elif executor is None:
            simulated = self.inventory.simulated and os.environ.get(SIM_DEVICES_ENV)
            devices = Path(simulated) if simulated else Path("/dev")
            choice = pick_executor(self.config, home, devices)
            if choice.executor.name == "process":
                _refuse_to_orphan_containers(self.store, choice.why)
            self.executor, self.executor_why = choice.executor, choice.why
        else:
            self.executor, self.executor_why = executor, f"{executor.name}: given"
        # what a run is not held to here (no cgroups to enforce memory and CPU), or None
        self.not_enforced = self.executor.not_enforced() if self.executor is not None else None
        if self.not_enforced:
            log.warning("%s", self.not_enforced)
        idle = self.config.machine.idle  # idle GPUs: the sampler measures, the loop acts
        self.idle_tracker = IdleTracker(idle.threshold) if self.executor is not None else None
        self.settings = self._settings()
        name = self.executor.name if self.executor is not None else "slurm"
        self.service = Service(self.store, self.config, executor=name, settings=self.settings)
        if slurm is None:
            self.service.shard_bytes = self.settings.machine.shard_bytes
        self.groups = GroupService(self.service)
        groups = GroupControl(self.store, self.groups).tick  # fires schedules, keeps replicas
        self.backend: Backend = self._backend(slurm, groups, clock)
        self.loop = LoopView(self.backend)  # the back end as the API reads it
        # the service's "something changed" and its check of a spec at submit: the back end's
        self.service.poke, self.service.backend_check = self.backend.poke, self.backend.check_spec
        forecaster = self.backend.forecaster if isinstance(self.backend, Loop) else None
        self.explainer = Explainer(self.service, self.backend, self.settings, forecaster)
        # notifications: the store queues them with their events, this thread sends them
        self.store.outbox.targets = self.config.notify
        self.notifier = Sender(self.store.outbox)
        self.store.outbox.listener = self.notifier.wake
        # telemetry: GPUs and live runs sampled on a thread; none in front of Slurm
        self.sampler: Sampler | None = None
        if self.executor is not None:
            self.sampler = Sampler(
                self.config.machine.telemetry_seconds,
                tuple(g.index for g in self.inventory.gpus),
                self.inventory.simulated,
                partial(live_workers, self.store, self.executor),
                recorder=Recorder(self.store),  # the history in the store
                idle=self.idle_tracker,
                monotonic=self.backend.clock.mono,
            )
        # what the API serves of them, for each caller
        self.telemetry = Telemetry(
            self.sampler, self.service, self.inventory.simulated, self.backend.clock
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _settings(self) -> LoopSettings:
        remaps = self.executor is not None and self.executor.capabilities.remaps_gpus
        return LoopSettings(
            machine=machine_for(self.config, self.inventory),
            workspaces=self.config.workspaces,
            drives={name: d.path for name, d in self.config.drives.items()},
            logs_dir=self.home / "logs",
            executor_remaps_gpus=remaps,
            gpu_devices=self.inventory.devices,
            gpu_minors=self.inventory.minors,
            gpu_numa=self.inventory.numa,
            instance=instance_id(self.home),
            finished_retention=self.config.machine.finished_retention,
            max_kept=_max_kept(self.config),
            log_limit=self.config.machine.log_limit,
            log_reserve=self.config.machine.log_reserve,
            authorise=self._start_refusal,
            idle=_idle_settings(self.config),
            idle_tracker=self.idle_tracker,
            mps=self.config.machine.mps,
            restart_backoff=Backoff(
                self.config.machine.restart_backoff, self.config.machine.restart_backoff_max
            ),
        )

    def _backend(
        self, slurm: SlurmConfig | None, groups: Callable[[float], bool], clock: Clock | None
    ) -> Backend:
        """The loop on this machine's executor; or, for a Slurm cluster, a front for it."""
        if slurm is not None:
            from runner.slurm.front import SlurmFront  # lazy: only a front needs it

            return SlurmFront(self.store, slurm, self.settings.machine.stop_grace, groups=groups)
        assert self.executor is not None
        return Loop(self.store, self.executor, self.settings, clock, groups)

    def _start_refusal(self, user: str, workspace: str) -> str | None:
        """Why ``user``'s run in ``workspace`` may not start now (the current config)."""
        return start_refusal(self.config, user, workspace)

    def apply_config(self, config: Config) -> None:
        """A changed config (admin commands): workspaces and drives take effect now."""
        self.config = config
        self.service.config = config
        self.settings.workspaces = config.workspaces
        self.settings.drives = {name: d.path for name, d in config.drives.items()}
        self.settings.finished_retention = config.machine.finished_retention
        self.settings.max_kept = _max_kept(config)
        if self.settings.idle is not None:  # the loop's IdleWatch holds this very object
            new = _idle_settings(config)
            self.settings.idle.after, self.settings.idle.threshold = new.after, new.threshold
            self.settings.idle.policy = new.policy
        self.store.outbox.targets = config.notify
        self.backend.poke()

    def start(self) -> Daemon:
        log.info("executor %s; GPUs: %s", self.executor_why, self.inventory.source)
        self._thread = threading.Thread(
            target=self.backend.run_forever, args=(self._stop,), name="astraeus-loop", daemon=True
        )
        self._thread.start()
        self.notifier.start()
        if self.sampler is not None:
            self.sampler.start()
        return self

    def halt(self) -> None:
        """The loop acts no more (starts, restarts, stops nothing); waits for its tick."""
        self._stop.set()
        self.backend.poke()  # wakes it from its wait
        if self._thread is not None:
            self._thread.join(timeout=10)

    def stop(self) -> None:
        """Stop the loop; running work goes on and is adopted at the next start."""
        self.halt()
        self.notifier.stop()
        if self.sampler is not None:
            self.sampler.stop()
        if self.executor is not None:
            self.executor.close()  # a warm launcher ends; the workers go on


def _max_kept(config: Config) -> tuple[int, int]:
    """What one user's finished runs may keep: how many, and their specs' bytes."""
    return config.machine.max_kept_per_user, config.machine.max_kept_bytes_per_user
