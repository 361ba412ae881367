"""Helpers shared by the real-engine tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker

from runner.executors.base import Observed, WorkerLaunch, WorkerStatus
from runner.executors.docker.executor import DockerExecutor

IMAGE = os.environ.get("ASTRAEUS_TEST_IMAGE", "astraeus-test:busybox")
SKIP_REASON = "Docker engine not reachable: run tests/docker/setup.sh as root"

LaunchFactory = Callable[..., WorkerLaunch]


def engine_client() -> Any | None:
    """A client that answered a ping, or None."""
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception:
        return None
    return client


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def wait_exited(ex: DockerExecutor, handle: str, timeout: float = 15.0) -> WorkerStatus:
    """Poll until the worker is no longer running; its log follower has finished too."""
    assert wait_until(lambda: ex.status(handle).state is not Observed.RUNNING, timeout), (
        f"{handle} still running after {timeout}s"
    )
    # the follower copies what the container wrote: megabytes take a while on a busy machine
    assert ex.drain_logs(handle, 60), f"log follower of {handle} did not finish"
    return ex.status(handle)


def read_log(path: Path) -> str:
    return path.read_text() if path.exists() else ""
