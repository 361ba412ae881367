"""Telemetry of a worker in a real container: its tree is that of the container's first
process, as the engine reports its host pid."""

from __future__ import annotations

import signal

import pytest

from runner.executors.docker.executor import DockerExecutor
from runner.telemetry.procs import TreeMeter
from runner.telemetry.workers import root_pid
from tests.docker.helpers import SKIP_REASON, LaunchFactory, engine_client, wait_exited

if engine_client() is None:
    pytest.skip(SKIP_REASON, allow_module_level=True)


def test_a_running_container_is_measured_through_its_first_process(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    handle = executor.start(make_launch("sleep 60 & wait"))
    pid = root_pid(executor, "docker", handle)
    assert pid is not None and pid == executor.init_pid(handle)
    assert root_pid(executor, "process", handle) is None  # not started by this executor
    usage = TreeMeter().measure({"w": pid})["w"]
    assert len(usage.pids) == 2 and usage.memory_bytes > 0  # sh and its sleep
    executor.signal(handle, signal.SIGKILL)
    wait_exited(executor, handle)
    assert executor.init_pid(handle) is None
    assert executor.init_pid("astraeus-test-no-such-container") is None
