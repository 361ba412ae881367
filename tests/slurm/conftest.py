"""Fixtures for the tests against the real Slurm: a client, a log folder, cleanup.

Every job a test submits is named ``slurmtest-…``; those still alive are
cancelled before the session and after each test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.slurm import SlurmClient
from tests.slurm.helpers import cancel_test_jobs, skip_reason


@pytest.fixture(scope="session")
def slurm() -> Iterator[SlurmClient]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    client = SlurmClient(timeout=20)
    cancel_test_jobs(client)
    yield client
    cancel_test_jobs(client)


@pytest.fixture
def client(slurm: SlurmClient) -> Iterator[SlurmClient]:
    """The client; the test's jobs are cancelled after it."""
    yield slurm
    cancel_test_jobs(slurm)


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the jobs write their output (sbatch --output), readable after they end."""
    path = tmp_path_factory.mktemp("slurm-logs")
    path.chmod(0o777)
    return path
