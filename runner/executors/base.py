"""The one protocol every executor speaks: start, signal, kill, observe, list.

An executor runs *workers*: one container (docker) or one supervised process
group (process) per worker of a run's attempt. Executors never decide
anything; ``runner/engine/loop.py`` tells them what to do and reads what they saw.
Every call is synchronous and quick (no waiting for a worker to end).

What an executor can do beyond starting and stopping is declared, never probed:
each executor states its :class:`Capabilities` and answers :meth:`Executor.reachable`
and :meth:`Executor.follow_logs`, and callers read those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from runner.sessions import EnterRequest, Session

LABEL_PREFIX = "io.astraeus"
SCHEMA_VERSION = "1"


class ExecutorError(Exception):
    """A worker could not be started or reached; the message is for users, one line."""


@dataclass(frozen=True, slots=True)
class Mount:
    """A drive placed in a worker: ``source`` is the resolved host path."""

    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class WorkerLaunch:
    """Everything needed to start one worker; built by the loop."""

    run: str
    attempt: int
    worker: int
    image: str | None
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    gpus: tuple[int, ...] = ()
    gpu_devices: tuple[str, ...] = ()  # what CUDA and Docker call ``gpus``; (): their indexes
    gpu_minors: tuple[int, ...] | None = None  # their /dev/nvidia<n> nodes; None: their indexes
    gpu_numa: tuple[int, ...] = ()  # the NUMA nodes its GPUs are on, where known
    cpu_milli: int = 0  # 0: no limit
    memory: int = 0  # bytes; 0: no limit
    mounts: tuple[Mount, ...] = ()
    uid: int = 0
    gid: int = 0
    log_path: Path = Path("/dev/null")
    log_limit: int = 0  # bytes a worker's log may hold (the newest kept); 0: no limit
    log_reserve: int = 0  # bytes kept free on the log's disk: output beyond is dropped
    interactive: bool = False  # the command gets a terminal that a client attaches to
    instance: str = ""  # which daemon (ASTRAEUS_HOME) started it
    run_uid: str = ""  # the run's immutable id: the loop always gives it
    # the folder the command starts in, as asked (--chdir: a container's working
    # directory too), and the folder it was submitted from (the process executor's)
    working_dir: str | None = None
    submit_dir: str | None = None

    @property
    def gpu_names(self) -> tuple[str, ...]:
        """The GPUs as CUDA and Docker name them: UUIDs on a machine with MIG instances
        (``gpu_devices``), else their indexes."""
        return self.gpu_devices or tuple(str(i) for i in self.gpus)

    @property
    def key(self) -> str:
        """A stable name for this worker of this attempt (container name, folder name).

        Named by the run's id, not its name: a name used again by a later run never
        meets what an earlier run of that name left (a launch made without an id, as
        some tests make, falls back to the name)."""
        return worker_key(self.run_uid or self.run, self.attempt, self.worker, self.instance)


def worker_key(run_uid: str, attempt: int, worker: int, instance: str = "") -> str:
    """``astraeus-[instance-]run_uid-attempt-worker``: unique per daemon, run, attempt, worker."""
    prefix = f"astraeus-{instance}-" if instance else "astraeus-"
    return f"{prefix}{run_uid}-{attempt}-{worker}"


class Observed(StrEnum):
    """What the executor sees of a worker now (a worker row's recorded state is
    :class:`runner.model.WorkerState`)."""

    RUNNING = "running"
    EXITED = "exited"
    MISSING = "missing"  # the executor has no trace of it: a lost worker


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    state: Observed
    exit_code: int | None = None
    error: str | None = None  # why it exited, when the executor knows (OOM, image missing)


@dataclass(frozen=True, slots=True)
class ListedWorker:
    """A worker the executor found running (or exited, not yet collected)."""

    handle: str
    run: str
    attempt: int
    worker: int


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What an executor can do, declared by each executor.

    ``remaps_gpus``: a worker sees only its GPUs, numbered from 0 (Docker with the
    NVIDIA runtime), so ``CUDA_VISIBLE_DEVICES`` must name them from 0, not by host index.
    ``copies_logs``: the executor itself copies a worker's output to its log file, so a
    worker adopted after a restart needs :meth:`Executor.follow_logs` to resume the copy
    (the process executor's supervisor writes the log itself and outlives the daemon).
    ``enters``: :meth:`Executor.enter` runs a command inside a live worker (``astra exec``).
    ``terminals``: an interactive worker gets a terminal, :meth:`Executor.terminal` attaches.
    """

    remaps_gpus: bool = False
    copies_logs: bool = False
    enters: bool = False
    terminals: bool = False


class Executor(Protocol):
    """What the loop needs from an executor."""

    name: str

    @property
    def capabilities(self) -> Capabilities: ...

    def reachable(self) -> bool:
        """False while the executor's engine does not answer (docker: the engine is down)."""
        ...

    def follow_logs(self, handle: str, log_path: Path | None = None) -> bool:
        """Resume copying an adopted worker's output to ``log_path``; False when it cannot.

        Only an executor that declares ``copies_logs`` does anything here."""
        ...

    def start(self, launch: WorkerLaunch) -> str:
        """Start the worker and return its handle. Raises ExecutorError."""
        ...

    def signal(self, handle: str, signum: int) -> None:
        """Send ``signum`` to every process of the worker; a gone worker is fine."""
        ...

    def status(self, handle: str) -> WorkerStatus: ...

    def remaining(self, handle: str) -> tuple[str, ...]:
        """The names of the worker's processes still alive, where the executor can tell
        (a stop's SIGKILL names them); () where it cannot."""
        ...

    def list_workers(self) -> list[ListedWorker]:
        """Every worker this executor knows of, for reconciliation after a restart."""
        ...

    def cleanup(self, handle: str) -> None:
        """Forget an exited worker (remove its container or status files)."""
        ...

    def enter(self, handle: str, request: EnterRequest) -> Session:
        """Run a command inside the live worker, as its user, with its environment.

        Raises ExecutorError (one line) when it cannot; only an executor that declares
        ``enters`` does anything here."""
        ...

    def terminal(self, handle: str) -> Session:
        """Attach to an interactive worker's terminal (``astra run -it``); its ``kill``
        detaches. Only an executor that declares ``terminals`` does anything here."""
        ...

    def not_enforced(self) -> str | None:
        """What a run is not held to here (memory, CPU), and why; None when it is held to
        everything it asks (a container engine holds it; the process executor, its
        cgroups)."""
        ...

    def close(self) -> None:
        """Let go of what the executor holds (a warm launcher, the engine's client, log
        copies) as the daemon stops; its workers go on."""
        ...
