"""The Docker executor: one container per worker, started through the docker SDK.

What a container is made of is in :mod:`runner.executors.docker.containers`, the copy
of its output to the worker's log in :mod:`runner.executors.docker.logs`.

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
import threading
import time
from pathlib import Path
from typing import Any

from docker.errors import APIError, NotFound
from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import RequestException

from runner.executors.base import (
    Capabilities,
    ExecutorError,
    ListedWorker,
    Observed,
    WorkerLaunch,
    WorkerStatus,
)
from runner.executors.docker.containers import (
    LABEL_INSTANCE,
    LABEL_LOG,
    LABEL_SCHEMA,
    container_kwargs,
    listed_worker,
    log_bounds,
    status_from_state,
)
from runner.executors.docker.engine import (
    DEFAULT_TIMEOUT,
    QUICK_TIMEOUT,
    connect_client,
    quick_api,
)
from runner.executors.docker.errors import (
    DOCKER_ERRORS,
    describe,
    docker_errors,
    is_not_running,
    raise_error,
)
from runner.executors.docker.exec import DockerSession, docker_enter
from runner.executors.docker.logs import (
    LogFollower,
    make_log_folder,
    resume_point,
    split_timestamp,
)
from runner.sessions import EnterRequest

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 2.0  # seconds a ping of an engine that was down may take
PROBE_EVERY = 1.0  # seconds between pings of an engine that was down
STOPPED_OUTSIDE = (
    "was lost: something other than Astraeus stopped its container (the Docker engine's "
    "shutdown or restart, or docker stop/kill)"
)
LOG_DRAIN_SECONDS = 5.0  # cleanup waits this long for the last log lines


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
            client = connect_client(DEFAULT_TIMEOUT)
            quick = quick_api(client)
        self._client: Any = client
        self._api: Any = self._client.api
        self._quick: Any = quick if quick is not None else self._api  # inspect, kill, ping
        self.nvidia: bool = self._detect_nvidia() if nvidia is None else nvidia
        self._followers: dict[str, LogFollower] = {}
        self._lock = threading.Lock()
        self._last_answer = time.time()  # the engine's health, for reachable()
        self._down_since: float | None = None  # the last answer before it stopped answering
        self._gone = False  # ... and a connection was refused or cut: the engine itself stopped
        self._next_probe = 0.0
        self._back = 0.0  # the first answer after the engine's latest restart (it was gone)
        self._signalled: set[str] = set()  # containers this daemon sent a signal to
        self._born = time.time()  # ends after this, before an engine restart: events gone
        self._ends: dict[str, bool] = {}  # whether an ended container was stopped outside

    @classmethod
    def connect(
        cls, timeout: float = DEFAULT_TIMEOUT, *, nvidia: bool | None = None, instance: str = ""
    ) -> DockerExecutor:
        """Connect to the engine (DOCKER_HOST or the local socket).

        ExecutorError if it does not answer within ``timeout`` seconds; later
        calls wait up to CALL_TIMEOUT (or ``timeout`` if longer).
        """
        client = connect_client(timeout)
        return cls(client, nvidia=nvidia, instance=instance, quick=quick_api(client))

    @property
    def capabilities(self) -> Capabilities:
        """GPUs renumbered from 0 with the NVIDIA runtime; the log copy is this daemon's."""
        return Capabilities(remaps_gpus=self.nvidia, copies_logs=True, enters=True)

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
        make_log_folder(launch.key, launch.log_path)  # before anything runs
        with docker_errors(f"cannot create container {launch.key}"):
            container = self._client.containers.create(**kwargs)
        try:
            container.start()
        except DOCKER_ERRORS as err:
            with contextlib.suppress(*DOCKER_ERRORS):
                container.remove(force=True)
            raise_error(f"cannot start container {launch.key}", err)
        self._follow(launch.key, launch.log_path, None, (launch.log_limit, launch.log_reserve))
        return launch.key

    def remaining(self, handle: str) -> tuple[str, ...]:
        """Unknown here: a container's processes end with its first one (PID 1)."""
        return ()

    def signal(self, handle: str, signum: int) -> None:
        self._signalled.add(handle)
        try:
            self._quick.kill(handle, signal=int(signum))
        except NotFound:
            return
        except APIError as err:
            if not is_not_running(err):
                raise_error(f"cannot signal container {handle}", err)
        except RequestException as err:
            self._no_answer(err)
            raise_error(f"cannot signal container {handle}", err)

    def status(self, handle: str) -> WorkerStatus:
        """The container's state; one ended by something else is MISSING (a lost worker)."""
        state = self._state(handle)
        if state is None:
            return WorkerStatus(Observed.MISSING)
        status = status_from_state(state)
        if status.state is Observed.EXITED and self._ended_outside(handle, state):
            return WorkerStatus(
                Observed.MISSING, error=f"{STOPPED_OUTSIDE}; exit code {status.exit_code}"
            )
        return status

    def init_pid(self, handle: str) -> int | None:
        """The host pid of the running container's first process (telemetry measures its
        tree); None when it is not running or the engine does not answer."""
        try:
            state = self._state(handle)
        except ExecutorError:
            return None
        pid = None if state is None or not state.get("Running") else state.get("Pid")
        return pid if isinstance(pid, int) and pid > 0 else None

    def enter(self, handle: str, request: EnterRequest) -> DockerSession:
        """``docker exec`` in the worker's container as the user it runs as."""
        state = self._state(handle)
        if state is None or not state.get("Running"):
            raise ExecutorError("the worker is not running")
        with docker_errors(f"cannot inspect container {handle}"):
            user = self._api.inspect_container(handle)["Config"]["User"]
        return docker_enter(self._api, handle, user, request)

    def terminal(self, handle: str) -> DockerSession:
        raise ExecutorError("interactive runs need the process executor")

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
        except DOCKER_ERRORS as err:
            self._no_answer(err)
            return False
        if answer.status_code != 200:
            return False
        self._answered()
        return True

    def list_workers(self) -> list[ListedWorker]:
        labels = [LABEL_SCHEMA, f"{LABEL_INSTANCE}={self.instance}"]
        try:
            summaries = self._api.containers(all=True, filters={"label": labels})
        except DOCKER_ERRORS as err:
            self._no_answer(err)  # the engine gone before the first reconcile: waited for
            raise_error("cannot list containers", err)
        found = (listed_worker(s) for s in summaries)
        return [w for w in found if w is not None]

    def cleanup(self, handle: str) -> None:
        """Remove an exited worker's container, after its last log lines are written."""
        state = self._state(handle)
        if state is None:
            return
        if status_from_state(state).state is Observed.RUNNING:
            raise ExecutorError(f"container {handle} is still running: stop it before cleanup")
        self._signalled.discard(handle)
        self._ends.pop(handle, None)
        self.drain_logs(handle, LOG_DRAIN_SECONDS)
        try:
            self._api.remove_container(handle, v=True, force=False)
        except NotFound:
            return
        except DOCKER_ERRORS as err:
            raise_error(f"cannot remove container {handle}", err)

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
        except DOCKER_ERRORS as err:
            raise_error(f"cannot inspect container {handle}", err)
        labels = (attrs.get("Config") or {}).get("Labels") or {}
        if log_path is None:
            label = labels.get(LABEL_LOG)
            if not label:
                return False
            log_path = Path(label)
        return self._follow(handle, log_path, resume_point(log_path), log_bounds(labels))

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

    def not_enforced(self) -> str | None:
        """Nothing: the engine holds each container to its memory, CPUs and GPUs."""
        return None

    def close(self) -> None:
        """Stop every log follower and close the client; containers keep running."""
        self.stop_following()
        with contextlib.suppress(*DOCKER_ERRORS):
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
            make_log_folder(handle, log_path)
            follower = LogFollower(self._api, handle, log_path, since_ns, bounds)
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
        except DOCKER_ERRORS as err:
            self._no_answer(err)
            raise_error(f"cannot inspect container {handle}", err)
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
                self._back = now
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

    def _ended_outside(self, handle: str, state: dict[str, Any]) -> bool:
        """:meth:`_stopped_outside`, asked once for each end: the answer stays."""
        if (known := self._ends.get(handle)) is not None:
            return known
        outside = self._ends[handle] = self._stopped_outside(handle, state)
        return outside

    def _stopped_outside(self, handle: str, state: dict[str, Any]) -> bool:
        """Whether something other than this daemon ended the container.

        It has a kill event that this daemon did not send (the engine's shutdown, with a
        pooled connection still answering; ``docker stop``), or it ended, while this daemon
        ran, before an engine restart that this daemon saw, unasked (the events of before
        are gone: an end the engine's shutdown made is told from the program's own no
        more). When the engine goes as the events are asked, the question waits for it
        (an ExecutorError).
        """
        if handle in self._signalled:
            return False
        finished, _ = split_timestamp(str(state.get("FinishedAt") or "").encode())
        if finished is None or finished <= 0:  # never started: 0001-01-01
            return False
        if self._born * 1e9 < finished <= self._back * 1e9:
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
        except DOCKER_ERRORS as err:
            self._no_answer(err)
            raise_error(f"cannot read the events of container {handle}", err)
        return answer.status_code == 200 and bool(answer.text.strip())

    # -- helpers

    def _check_image(self, image: str) -> None:
        try:
            self._api.inspect_image(image)
        except NotFound as err:  # ImageNotFound is a NotFound
            msg = f"image {image} is not on this machine (docker pull it first)"
            raise ExecutorError(msg) from err
        except DOCKER_ERRORS as err:
            raise_error(f"cannot inspect image {image}", err)

    def _clear_leftover(self, key: str) -> None:
        """Remove an exited container that holds ``key``; refuse a live one."""
        try:
            attrs = self._api.inspect_container(key)
        except NotFound:
            return
        except DOCKER_ERRORS as err:
            raise_error(f"cannot inspect container {key}", err)
        if status_from_state(attrs.get("State") or {}).state is Observed.RUNNING:
            raise ExecutorError(f"a container named {key} is already running")
        self.drain_logs(key, LOG_DRAIN_SECONDS)
        with docker_errors(f"cannot remove the leftover container {key}"):
            self._api.remove_container(key, v=True, force=True)


def _docker_time(ns: int) -> str:
    """A time for the engine's ``since``/``until``: seconds.nanoseconds."""
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"
