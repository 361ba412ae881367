"""The connections to the Docker engine: one for most calls, one for the loop's quick ones."""

from __future__ import annotations

from typing import Any

import docker

from runner.executors.base import ExecutorError
from runner.executors.docker.errors import DOCKER_ERRORS, describe

DEFAULT_TIMEOUT = 10.0  # seconds the engine has to answer when connecting
CALL_TIMEOUT = 60.0  # seconds for each later API call (log streams have none)
QUICK_TIMEOUT = 10.0  # seconds for the loop's inspect and kill: a hung engine must not hold it


def quick_api(client: Any) -> Any:
    """A second connection to the same engine whose calls give up after QUICK_TIMEOUT s."""
    try:
        return docker.from_env(timeout=QUICK_TIMEOUT, version=client.api.api_version).api
    except DOCKER_ERRORS:
        return client.api


def connect_client(timeout: float) -> Any:
    """A docker client that has answered a ping within ``timeout`` s, or ExecutorError."""
    try:
        client = docker.from_env(timeout=timeout, max_pool_size=64)
        client.ping()
    except DOCKER_ERRORS as err:
        raise ExecutorError(f"Docker engine not reachable: {describe(err)}") from err
    client.api.timeout = max(timeout, CALL_TIMEOUT)  # read by every later request
    return client
