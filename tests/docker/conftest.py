"""Fixtures for the real-engine tests: a client, the test image, executors, cleanup.

Every container a test makes is named ``astraeus-test-…`` (run names start
with ``test-``) and is removed after the test and at the start and end of the
session.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from runner.executors.base import WorkerLaunch
from runner.executors.docker.executor import DockerExecutor
from tests.docker.helpers import IMAGE, SKIP_REASON, LaunchFactory, engine_client

NAME_PREFIX = "astraeus-test"


def remove_test_containers(client: Any, run: str | None = None) -> None:
    """Remove the containers named astraeus-test… (only ``run``'s when given)."""
    prefix = f"astraeus-{run}-" if run else NAME_PREFIX
    for summary in client.api.containers(all=True, filters={"name": NAME_PREFIX}):
        names = [n.lstrip("/") for n in summary.get("Names") or []]
        if any(n.startswith(prefix) for n in names):
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(summary["Id"], v=True, force=True)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    client = engine_client()
    if client is None:
        pytest.skip(SKIP_REASON)
    remove_test_containers(client)
    yield client
    remove_test_containers(client)
    client.close()


@pytest.fixture(scope="session")
def test_image(docker_client: Any) -> str:
    try:
        docker_client.api.inspect_image(IMAGE)
    except docker.errors.NotFound:
        pytest.skip(f"test image {IMAGE} is missing: run tests/docker/setup.sh as root")
    return IMAGE


@pytest.fixture
def run_name(docker_client: Any) -> Iterator[str]:
    """A fresh run name; its containers are removed after the test."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    yield name
    remove_test_containers(docker_client, name)


@pytest.fixture
def executor(docker_client: Any) -> Iterator[DockerExecutor]:
    """An executor without the NVIDIA runtime (GPUs named in the environment only)."""
    ex = DockerExecutor(docker_client, nvidia=False)
    yield ex
    ex.stop_following()


@pytest.fixture
def make_launch(run_name: str, test_image: str, tmp_path: Path) -> LaunchFactory:
    """``make_launch("echo hi", worker=1, uid=…)``: a shell script as a worker."""

    def make(script: str | None, **fields: Any) -> WorkerLaunch:
        values: dict[str, Any] = {
            "run": run_name,
            "attempt": 1,
            "worker": 0,
            "image": test_image,
            "argv": ("sh", "-c", script) if script is not None else (),
            "uid": 65534,
            "gid": 65534,
            "log_path": tmp_path / "logs" / f"{run_name}.log",
        }
        values.update(fields)
        return WorkerLaunch(**values)

    return make
