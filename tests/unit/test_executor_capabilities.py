"""Every executor declares what it can do; nothing is probed with getattr."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config.slurm import SlurmConfig, SlurmSettings
from runner.engine.backend import Backend, BackendCapabilities
from runner.executors.base import Capabilities, Executor, ExecutorError
from runner.executors.process import ProcessExecutor
from runner.sessions import EnterRequest
from runner.slurm.front import SlurmFront
from runner.store.db import Store


def test_the_process_executor_declares_no_log_copy_host_gpu_numbers_and_exec(
    tmp_path: Path,
) -> None:
    executor: Executor = ProcessExecutor(tmp_path / "workers")
    assert executor.capabilities == Capabilities(
        remaps_gpus=False, copies_logs=False, enters=True, terminals=True
    )
    assert executor.reachable() is True
    log = tmp_path / "log"
    assert executor.follow_logs("astraeus-none-1-0", log) is False
    assert not log.exists()


def test_the_slurm_front_declares_nothing_to_copy_or_renumber(tmp_path: Path) -> None:
    front: Backend = SlurmFront(
        Store(tmp_path / "state.db"), SlurmConfig(SlurmSettings()), stop_grace=30
    )
    assert front.capabilities == BackendCapabilities(
        "slurm", "slurm", local_gpus=False, plans_locally=False
    )
    assert front.status.published.estimates == {} and not front.status.estimating


def test_the_slurm_front_runs_nothing_inside_a_job(tmp_path: Path) -> None:
    front = SlurmFront(Store(tmp_path / "state.db"), SlurmConfig(SlurmSettings()), stop_grace=30)
    with pytest.raises(ExecutorError, match=r"^exec is not available on the Slurm front"):
        front.enter("job-1", EnterRequest(("true",)))
