"""The Docker executor: one container per worker, started through the docker SDK.

Security (docs/architecture.md, "Security"): the daemon holds the Docker socket,
so every container is built here, never from caller-supplied options. Containers
run as the submitter's ``uid:gid`` with ``no-new-privileges``, every capability
dropped, no privileged mode, no host namespaces, no devices but the GPUs the
planner gave the worker, and only the drives the loop resolved (bind mounts).
Images are never pulled: a missing image is an error the user fixes with
``docker pull``.

Logs: a daemon thread per worker follows ``docker logs --follow --timestamps``
and appends the output (timestamps stripped) to the worker's log file. After
each write the file's mtime is set to the Docker timestamp of the last line
written, so a restarted daemon that adopts the container resumes with
:meth:`DockerExecutor.follow_logs`: it asks Docker for the lines since that
mtime and skips any at or before it. Nothing is lost or repeated, except
output written in the instant between a write and the mtime update when the
daemon dies there. The log path is also kept in the ``io.astraeus.log`` label, and its
bounds (``log_limit``, ``log_reserve``: :mod:`runner.executors.logcap`) in
``io.astraeus.log-limit`` and ``io.astraeus.log-reserve``.
A container is named by its run's id (``io.astraeus.run-uid``), not by the run's name.

The engine may stop and start under the daemon (an upgrade, ``systemctl restart
docker``). Calls the loop makes every tick (inspect, kill) give up after
QUICK_TIMEOUT s; a call that gets no answer at all marks the engine down, and
:meth:`DockerExecutor.reachable` then says so (pinging it at most every
PROBE_EVERY s) until it answers again, when the logs of containers that still
run are followed again from where their files end. A container that something
else ended (the engine's shutdown or restart, ``docker stop``/``kill``) is a
lost worker whatever its exit code, so its run restarts instead of passing for
finished: it ended while the engine was down, or has a kill event that this
daemon did not send.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import docker
from docker.errors import APIError, DockerException, NotFound
from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import RequestException

from runner.executors.base import (
    LABEL_PREFIX,
    SCHEMA_VERSION,
    Capabilities,
    ExecutorError,
    ListedWorker,
    WorkerLaunch,
    WorkerState,
    WorkerStatus,
)
from runner.executors.logcap import CappedLog

log = logging.getLogger(__name__)

LABEL_RUN = f"{LABEL_PREFIX}.run"
LABEL_RUN_UID = f"{LABEL_PREFIX}.run-uid"
LABEL_ATTEMPT = f"{LABEL_PREFIX}.attempt"
LABEL_WORKER = f"{LABEL_PREFIX}.worker"
LABEL_SCHEMA = f"{LABEL_PREFIX}.schema"
LABEL_LOG = f"{LABEL_PREFIX}.log"
LABEL_INSTANCE = f"{LABEL_PREFIX}.instance"
LABEL_LOG_LIMIT = f"{LABEL_PREFIX}.log-limit"
LABEL_LOG_RESERVE = f"{LABEL_PREFIX}.log-reserve"

DEFAULT_TIMEOUT = 10.0  # seconds the engine has to answer when connecting
CALL_TIMEOUT = 60.0  # seconds for each later API call (log streams have none)
QUICK_TIMEOUT = 10.0  # seconds for the loop's inspect and kill: a hung engine must not hold it
PROBE_TIMEOUT = 2.0  # seconds a ping of an engine that was down may take
PROBE_EVERY = 1.0  # seconds between pings of an engine that was down
STOPPED_OUTSIDE = (
    "was lost: something other than Astraeus stopped its container (the Docker engine's "
    "shutdown or restart, or docker stop/kill)"
)
DEFAULT_SHM = 8 << 30  # /dev/shm for data loaders; capped by the memory limit
LOG_DRAIN_SECONDS = 5.0  # cleanup waits this long for the last log lines

_DOCKER_ERRORS = (DockerException, RequestException)
_TIMESTAMP = re.compile(
    rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) ?",
)
_RUNNING_STATES = frozenset({"running", "paused", "restarting"})


# ---------------------------------------------------------------- pure helpers


def container_kwargs(launch: WorkerLaunch, nvidia: bool) -> dict[str, Any]:
    """The keyword arguments of ``client.containers.create`` for ``launch``.

    Pure: no daemon needed. ``nvidia`` says the engine has the NVIDIA runtime,
    so GPUs are handed over as a device request; without it only the
    environment names them (a machine without GPUs, or simulated ones).
    """
    if launch.image is None:
        raise ExecutorError(f"run {launch.run} has no image: the docker executor needs one")
    kwargs: dict[str, Any] = {
        "image": launch.image,
        "name": launch.key,
        "labels": worker_labels(launch),
        "environment": gpu_environment(launch, nvidia),
        "mounts": [
            docker.types.Mount(m.target, m.source, type="bind", read_only=m.read_only)
            for m in launch.mounts
        ],
        "user": f"{launch.uid}:{launch.gid}",
        "security_opt": ["no-new-privileges"],
        "cap_drop": ["ALL"],
        "privileged": False,
        "auto_remove": False,
        "detach": True,
    }
    if launch.argv:
        kwargs["entrypoint"] = [launch.argv[0]]
        kwargs["command"] = list(launch.argv[1:])
    if launch.log_limit > 0:  # Docker's own copy, under /var/lib/docker, bounded too
        kwargs["log_config"] = engine_log_config(launch.log_limit)
    return kwargs | resource_kwargs(launch, nvidia)


ENGINE_LOG_FLOOR = 128 << 20  # bytes per file of the engine's own copy, at least


def engine_log_config(limit: int) -> docker.types.LogConfig:
    """The engine keeps at most two files of ``limit`` (at least 128 MiB) each: json-file
    rotates. More than the daemon's copy in ASTRAEUS_HOME/logs keeps, so that copy (which
    marks its cuts) sees every line of a burst while it catches up."""
    size = f"{max(limit, ENGINE_LOG_FLOOR) // 1024}k"
    return docker.types.LogConfig(type="json-file", config={"max-size": size, "max-file": "2"})


def resource_kwargs(launch: WorkerLaunch, nvidia: bool) -> dict[str, Any]:
    """GPUs (a device request with the NVIDIA runtime), CPU and memory limits, /dev/shm."""
    kwargs: dict[str, Any] = {
        "shm_size": min(DEFAULT_SHM, launch.memory) if launch.memory > 0 else DEFAULT_SHM,
    }
    if nvidia and launch.gpus:
        kwargs["device_requests"] = [
            docker.types.DeviceRequest(
                driver="nvidia",
                device_ids=[str(i) for i in launch.gpus],
                capabilities=[["gpu"]],
            )
        ]
    if launch.cpu_milli > 0:
        kwargs["nano_cpus"] = launch.cpu_milli * 1_000_000
    if launch.memory > 0:
        kwargs["mem_limit"] = launch.memory
        kwargs["memswap_limit"] = launch.memory  # no swap beyond the limit
    return kwargs


def worker_labels(launch: WorkerLaunch) -> dict[str, str]:
    return {
        LABEL_RUN: launch.run,
        LABEL_RUN_UID: launch.run_uid,
        LABEL_ATTEMPT: str(launch.attempt),
        LABEL_WORKER: str(launch.worker),
        LABEL_SCHEMA: SCHEMA_VERSION,
        LABEL_LOG: str(launch.log_path),
        LABEL_INSTANCE: launch.instance,
        LABEL_LOG_LIMIT: str(launch.log_limit),
        LABEL_LOG_RESERVE: str(launch.log_reserve),
    }


def log_bounds(labels: dict[str, Any]) -> tuple[int, int]:
    """(log_limit, log_reserve) from a container's labels; 0 for one it lacks."""

    def number(key: str) -> int:
        value = str(labels.get(key) or "0")
        return int(value) if value.isdigit() else 0

    return number(LABEL_LOG_LIMIT), number(LABEL_LOG_RESERVE)


def gpu_environment(launch: WorkerLaunch, nvidia: bool) -> dict[str, str]:
    """``launch.env`` with the GPU variables the executor is responsible for.

    ``NVIDIA_VISIBLE_DEVICES`` is always overwritten (``void`` without GPUs): an
    image or a spec saying ``all`` must not reach GPUs the planner did not give.
    With the NVIDIA runtime the container sees only its GPUs, renumbered from 0,
    so ``CUDA_VISIBLE_DEVICES`` is overwritten with those numbers; without it,
    ``CUDA_VISIBLE_DEVICES`` names the host indices unless already set.
    """
    env = dict(launch.env)
    env["NVIDIA_VISIBLE_DEVICES"] = ",".join(str(i) for i in launch.gpus) or "void"
    if nvidia:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(launch.gpus)))
    else:
        env.setdefault("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in launch.gpus))
    return env


def status_from_state(state: dict[str, Any]) -> WorkerStatus:
    """Map Docker's ``State`` object (from inspect) to a WorkerStatus."""
    status = str(state.get("Status") or "")
    if state.get("Running") or status in _RUNNING_STATES:
        return WorkerStatus(WorkerState.RUNNING)
    if status == "created":
        return WorkerStatus(WorkerState.EXITED, None, "container was created but never started")
    exit_code = state.get("ExitCode")
    error: str | None = None
    if state.get("OOMKilled"):
        error = "out of memory"
    elif state.get("Error"):
        error = one_line(str(state["Error"]))
    elif status == "dead":
        error = "container is dead"
    return WorkerStatus(
        WorkerState.EXITED, int(exit_code) if exit_code is not None else None, error
    )


def listed_worker(summary: dict[str, Any]) -> ListedWorker | None:
    """A ListedWorker from a container summary (``GET /containers/json``); None if not ours."""
    labels = summary.get("Labels") or {}
    names = summary.get("Names") or []
    try:
        return ListedWorker(
            handle=str(names[0]).lstrip("/") if names else str(summary["Id"]),
            run=str(labels[LABEL_RUN]),
            attempt=int(labels[LABEL_ATTEMPT]),
            worker=int(labels[LABEL_WORKER]),
        )
    except (KeyError, ValueError):
        return None


def split_timestamp(chunk: bytes) -> tuple[int | None, bytes]:
    """Split a ``docker logs --timestamps`` frame into (unix time in ns, payload)."""
    match = _TIMESTAMP.match(chunk)
    if match is None:
        return None, chunk
    base, fraction, zone = (g.decode() if g else "" for g in match.groups())
    zone = "+00:00" if zone == "Z" else zone
    try:
        seconds = int(datetime.fromisoformat(base + zone).timestamp())
    except ValueError:
        return None, chunk
    return seconds * 1_000_000_000 + int(fraction.ljust(9, "0")), chunk[match.end() :]


def one_line(text: str) -> str:
    return " ".join(text.split())


def describe(err: BaseException) -> str:
    """One line saying what Docker answered."""
    explanation = getattr(err, "explanation", None)
    if isinstance(explanation, bytes):
        explanation = explanation.decode(errors="replace")
    return one_line(str(explanation or err)) or type(err).__name__


def _raise(what: str, err: BaseException) -> NoReturn:
    raise ExecutorError(f"docker: {what}: {describe(err)}") from err


@contextlib.contextmanager
def docker_errors(what: str) -> Iterator[None]:
    """Turn any Docker or connection error into a one-line ExecutorError."""
    try:
        yield
    except _DOCKER_ERRORS as err:
        _raise(what, err)


def _is_not_running(err: Any) -> bool:
    return getattr(err, "status_code", None) == 409 or "is not running" in describe(err)


# ---------------------------------------------------------------- log following


class _LogFollower:
    """A daemon thread appending one container's output to its log file.

    The thread never raises: a removed container, a stopped engine or
    :meth:`stop` just end the stream.
    """

    def __init__(
        self, api: Any, handle: str, log_path: Path, since_ns: int | None, bounds: tuple[int, int]
    ) -> None:
        self._api = api
        self.handle = handle
        self.log_path = log_path
        self.bounds = bounds  # (log_limit, log_reserve)
        self._since_ns = since_ns
        self._stream: Any = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"logs-{handle}", daemon=True)

    def stop(self) -> None:
        """Stop following (the container is not touched)."""
        self._stopped.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):  # closing a dying socket may fail any way
                stream.close()

    def _run(self) -> None:
        since_ns = self._since_ns
        since = max(since_ns / 1e9 - 1.0, 1.0) if since_ns else None
        try:
            stream = self._api.logs(
                self.handle, stream=True, follow=True, timestamps=True, since=since
            )
            with self._lock:
                self._stream = stream
            if self._stopped.is_set():
                stream.close()
                return
            out = CappedLog(self.log_path, *self.bounds)
            try:
                for chunk in stream:
                    if self._stopped.is_set():
                        break
                    _append(out, chunk, since_ns)
            finally:
                out.close()
        except OSError as err:
            log.warning("cannot write the log of %s to %s: %s", self.handle, self.log_path, err)
        except Exception as err:  # a daemon thread must end quietly, whatever happened
            log.debug("log stream of %s ended: %s", self.handle, describe(err))


def _append(out: CappedLog, chunk: bytes, since_ns: int | None) -> None:
    ts_ns, payload = split_timestamp(chunk)
    if since_ns is not None and ts_ns is not None and ts_ns <= since_ns:
        return  # already in the file before a restart
    out.write(payload)
    if ts_ns is not None:
        os.utime(out.fileno(), ns=(ts_ns, ts_ns))


def _resume_point(log_path: Path) -> int | None:
    """The Docker timestamp of the last line in ``log_path`` (its mtime), if any."""
    try:
        stat = log_path.stat()
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns if stat.st_size > 0 else None


# ---------------------------------------------------------------- the executor


class DockerExecutor:
    """Runs each worker as a container on the local Docker engine."""

    name = "docker"

    def __init__(
        self,
        client: Any | None = None,
        *,
        nvidia: bool | None = None,
        instance: str = "",
        quick: Any | None = None,
    ) -> None:
        self.instance = instance  # only this daemon's containers are listed
        if client is None:
            client = _connect_client(DEFAULT_TIMEOUT)
            quick = _quick_api(client)
        self._client: Any = client
        self._api: Any = self._client.api
        self._quick: Any = quick if quick is not None else self._api  # inspect, kill, ping
        self.nvidia: bool = self._detect_nvidia() if nvidia is None else nvidia
        self._followers: dict[str, _LogFollower] = {}
        self._lock = threading.Lock()
        self._last_answer = time.time()  # the engine's health, for reachable()
        self._down_since: float | None = None  # the last answer before it stopped answering
        self._gone = False  # ... and a connection was refused or cut: the engine itself stopped
        self._next_probe = 0.0
        self._outages: list[tuple[float, float]] = []  # (last answer, first answer again)
        self._signalled: set[str] = set()  # containers this daemon sent a signal to

    @classmethod
    def connect(
        cls, timeout: float = DEFAULT_TIMEOUT, *, nvidia: bool | None = None, instance: str = ""
    ) -> DockerExecutor:
        """Connect to the engine (DOCKER_HOST or the local socket).

        ExecutorError if it does not answer within ``timeout`` seconds; later
        calls wait up to CALL_TIMEOUT (or ``timeout`` if longer).
        """
        client = _connect_client(timeout)
        return cls(client, nvidia=nvidia, instance=instance, quick=_quick_api(client))

    @property
    def capabilities(self) -> Capabilities:
        """GPUs renumbered from 0 with the NVIDIA runtime; the log copy is this daemon's."""
        return Capabilities(remaps_gpus=self.nvidia, copies_logs=True)

    def _detect_nvidia(self) -> bool:
        with docker_errors("cannot read the engine's runtimes"):
            info = self._client.info()
        return "nvidia" in (info.get("Runtimes") or {})

    # -- protocol

    def start(self, launch: WorkerLaunch) -> str:
        try:
            return self._start(launch)
        except ExecutorError as err:
            if err.__cause__ is not None:
                self._no_answer(err.__cause__)  # an engine gone is not the run's fault
            raise

    def _start(self, launch: WorkerLaunch) -> str:
        kwargs = container_kwargs(launch, self.nvidia)
        self._check_image(kwargs["image"])
        self._clear_leftover(launch.key)
        _make_log_folder(launch.key, launch.log_path)  # before anything runs
        with docker_errors(f"cannot create container {launch.key}"):
            container = self._client.containers.create(**kwargs)
        try:
            container.start()
        except _DOCKER_ERRORS as err:
            with contextlib.suppress(*_DOCKER_ERRORS):
                container.remove(force=True)
            _raise(f"cannot start container {launch.key}", err)
        self._follow(launch.key, launch.log_path, None, (launch.log_limit, launch.log_reserve))
        return launch.key

    def signal(self, handle: str, signum: int) -> None:
        self._signalled.add(handle)
        try:
            self._quick.kill(handle, signal=int(signum))
        except NotFound:
            return
        except APIError as err:
            if not _is_not_running(err):
                _raise(f"cannot signal container {handle}", err)
        except RequestException as err:
            self._no_answer(err)
            _raise(f"cannot signal container {handle}", err)

    def status(self, handle: str) -> WorkerStatus:
        """The container's state; one ended by something else is MISSING (a lost worker)."""
        state = self._state(handle)
        if state is None:
            return WorkerStatus(WorkerState.MISSING)
        status = status_from_state(state)
        if status.state is WorkerState.EXITED and self._stopped_outside(handle, state):
            return WorkerStatus(
                WorkerState.MISSING, error=f"{STOPPED_OUTSIDE}; exit code {status.exit_code}"
            )
        return status

    def reachable(self) -> bool:
        """False while the engine does not answer; then pinged at most every PROBE_EVERY s."""
        if self._down_since is None:
            return True
        now = time.monotonic()
        if now < self._next_probe:
            return False
        self._next_probe = now + PROBE_EVERY
        try:
            answer = self._quick.get(f"{self._quick.base_url}/_ping", timeout=PROBE_TIMEOUT)
        except _DOCKER_ERRORS as err:
            self._no_answer(err)
            return False
        if answer.status_code != 200:
            return False
        self._answered()
        return True

    def list_workers(self) -> list[ListedWorker]:
        with docker_errors("cannot list containers"):
            labels = [LABEL_SCHEMA, f"{LABEL_INSTANCE}={self.instance}"]
            summaries = self._api.containers(all=True, filters={"label": labels})
        found = (listed_worker(s) for s in summaries)
        return [w for w in found if w is not None]

    def cleanup(self, handle: str) -> None:
        """Remove an exited worker's container, after its last log lines are written."""
        state = self._state(handle)
        if state is None:
            return
        if status_from_state(state).state is WorkerState.RUNNING:
            raise ExecutorError(f"container {handle} is still running: stop it before cleanup")
        self._signalled.discard(handle)
        self.drain_logs(handle, LOG_DRAIN_SECONDS)
        try:
            self._api.remove_container(handle, v=True, force=False)
        except NotFound:
            return
        except _DOCKER_ERRORS as err:
            _raise(f"cannot remove container {handle}", err)

    # -- logs

    def follow_logs(self, handle: str, log_path: Path | None = None) -> bool:
        """Resume appending an adopted container's output to its log file.

        ``log_path`` defaults to the container's ``io.astraeus.log`` label; the log's
        bounds come from its labels too. Only output newer than the file's mtime (the
        timestamp of the last line written) is appended. False when the container or
        a log path is gone.
        """
        try:
            attrs = self._api.inspect_container(handle)
        except NotFound:
            return False
        except _DOCKER_ERRORS as err:
            _raise(f"cannot inspect container {handle}", err)
        labels = (attrs.get("Config") or {}).get("Labels") or {}
        if log_path is None:
            label = labels.get(LABEL_LOG)
            if not label:
                return False
            log_path = Path(label)
        return self._follow(handle, log_path, _resume_point(log_path), log_bounds(labels))

    def drain_logs(self, handle: str, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the log follower of ``handle`` to finish.

        True when no follower is left (the container's output is all written).
        """
        with self._lock:
            follower = self._followers.get(handle)
        if follower is None:
            return True
        follower.thread.join(timeout)
        if follower.thread.is_alive():
            return False
        with self._lock:
            if self._followers.get(handle) is follower:
                del self._followers[handle]
        return True

    def stop_following(self, handle: str | None = None) -> None:
        """Stop appending the logs of ``handle`` (None: of every worker).

        For a daemon shutting down; the containers keep running and a later
        :meth:`follow_logs` resumes where the files end.
        """
        with self._lock:
            handles = list(self._followers) if handle is None else [handle]
            followers = [f for h in handles if (f := self._followers.pop(h, None))]
        for follower in followers:
            follower.stop()
        for follower in followers:
            follower.thread.join(LOG_DRAIN_SECONDS)

    def close(self) -> None:
        """Stop every log follower and close the client; containers keep running."""
        self.stop_following()
        with contextlib.suppress(*_DOCKER_ERRORS):
            self._client.close()

    def _follow(
        self, handle: str, log_path: Path, since_ns: int | None, bounds: tuple[int, int]
    ) -> bool:
        if str(log_path) == os.devnull:
            return True
        with self._lock:
            current = self._followers.get(handle)
            if current is not None and current.thread.is_alive():
                return True
            _make_log_folder(handle, log_path)
            follower = _LogFollower(self._api, handle, log_path, since_ns, bounds)
            self._followers[handle] = follower
            follower.thread.start()
        return True

    # -- the engine's health

    def _state(self, handle: str) -> dict[str, Any] | None:
        """Docker's ``State`` of the container; None when there is no such container."""
        try:
            attrs = self._quick.inspect_container(handle)
        except NotFound:
            return None
        except _DOCKER_ERRORS as err:
            self._no_answer(err)
            _raise(f"cannot inspect container {handle}", err)
        self._answered()
        state: dict[str, Any] = attrs.get("State") or {}
        return state

    def _no_answer(self, err: BaseException) -> None:
        """A call got no answer at all (not an error answer): the engine is down or hung.

        Refused or cut connections (not mere timeouts) say the engine itself stopped, which
        stops its containers unless it runs with live-restore: see _stopped_outside.
        """
        if not isinstance(err, RequestException) or isinstance(err, APIError):
            return
        self._gone = self._gone or isinstance(err, RequestsConnectionError)
        if self._down_since is not None:
            return
        self._down_since = self._last_answer
        self._next_probe = time.monotonic() + PROBE_EVERY
        log.warning("the Docker engine does not answer (%s): waiting for it", describe(err))

    def _answered(self) -> None:
        now = time.time()
        if self._down_since is not None:
            if self._gone:
                self._outages = [*self._outages[-9:], (self._down_since, now)]
            self._down_since, self._gone = None, False
            log.warning("the Docker engine answers again")
            self._follow_again()
        self._last_answer = now

    def _follow_again(self) -> None:
        """Followers that the outage cut off resume from where their log files end."""
        with self._lock:
            ended = [(h, f.log_path) for h, f in self._followers.items() if not f.thread.is_alive()]
        for handle, log_path in ended:
            with contextlib.suppress(ExecutorError):
                self.follow_logs(handle, log_path)

    def _stopped_outside(self, handle: str, state: dict[str, Any]) -> bool:
        """Whether something other than this daemon ended the container.

        Its end falls in a span when the engine did not answer (the engine stopped or
        restarted: the events of before are gone), or it has a kill event that this
        daemon did not send (the engine's shutdown, with a pooled connection still
        answering; ``docker stop``).
        """
        if handle in self._signalled:
            return False
        finished, _ = split_timestamp(str(state.get("FinishedAt") or "").encode())
        if finished is None or finished <= 0:  # never started: 0001-01-01
            return False
        if any(a * 1e9 < finished <= b * 1e9 for a, b in self._outages):
            return True
        started, _ = split_timestamp(str(state.get("StartedAt") or "").encode())
        filters = {"container": [handle], "type": ["container"], "event": ["kill"]}
        params = {
            "since": _docker_time(started if started and started > 0 else finished),
            "until": _docker_time(finished),
            "filters": json.dumps(filters),
        }
        try:
            answer = self._quick.get(
                f"{self._quick.base_url}/events", params=params, timeout=QUICK_TIMEOUT
            )
        except _DOCKER_ERRORS:
            return False
        return answer.status_code == 200 and bool(answer.text.strip())

    # -- helpers

    def _check_image(self, image: str) -> None:
        try:
            self._api.inspect_image(image)
        except NotFound as err:  # ImageNotFound is a NotFound
            msg = f"image {image} is not on this machine (docker pull it first)"
            raise ExecutorError(msg) from err
        except _DOCKER_ERRORS as err:
            _raise(f"cannot inspect image {image}", err)

    def _clear_leftover(self, key: str) -> None:
        """Remove an exited container that holds ``key``; refuse a live one."""
        try:
            attrs = self._api.inspect_container(key)
        except NotFound:
            return
        except _DOCKER_ERRORS as err:
            _raise(f"cannot inspect container {key}", err)
        if status_from_state(attrs.get("State") or {}).state is WorkerState.RUNNING:
            raise ExecutorError(f"a container named {key} is already running")
        self.drain_logs(key, LOG_DRAIN_SECONDS)
        with docker_errors(f"cannot remove the leftover container {key}"):
            self._api.remove_container(key, v=True, force=True)


def _make_log_folder(handle: str, log_path: Path) -> None:
    if str(log_path) == os.devnull:
        return
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ExecutorError(f"cannot create the log folder of {handle}: {err}") from err


def _docker_time(ns: int) -> str:
    """A time for the engine's ``since``/``until``: seconds.nanoseconds."""
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def _quick_api(client: Any) -> Any:
    """A second connection to the same engine whose calls give up after QUICK_TIMEOUT s."""
    try:
        return docker.from_env(timeout=QUICK_TIMEOUT, version=client.api.api_version).api
    except _DOCKER_ERRORS:
        return client.api


def _connect_client(timeout: float) -> Any:
    """A docker client that has answered a ping within ``timeout`` s, or ExecutorError."""
    try:
        client = docker.from_env(timeout=timeout, max_pool_size=64)
        client.ping()
    except _DOCKER_ERRORS as err:
        raise ExecutorError(f"Docker engine not reachable: {describe(err)}") from err
    client.api.timeout = max(timeout, CALL_TIMEOUT)  # read by every later request
    return client
