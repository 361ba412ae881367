from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults.daemon import DaemonProcess, write_config

MakeDaemon = Callable[..., DaemonProcess]


@pytest.fixture
def make_daemon(tmp_path: Path) -> Iterator[MakeDaemon]:
    """``make_daemon(gpus=2, grace=1, env={...})``: a configured, not yet started daemon.

    Afterwards it is stopped and every process worker it left is killed.
    """
    made: list[DaemonProcess] = []

    def make(
        *, gpus: int = 2, grace: float = 1, executor: str = "process",
        env: dict[str, str] | None = None, home: Path | None = None,
    ) -> DaemonProcess:  # fmt: skip
        home = home or tmp_path / "home"
        write_config(home, gpus=gpus, grace=grace, executor=executor)
        daemon = DaemonProcess(home, tmp_path / "serve.log", env)
        made.append(daemon)
        return daemon

    yield make
    for daemon in made:
        daemon.stop_all_runs()  # containers would outlive a stopped daemon
        daemon.stop()
        if daemon.alive():
            daemon.kill9()
        daemon.kill_workers()
