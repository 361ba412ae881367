from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.daemon.daemon import Daemon
from tests.support.harness import Harness, write_config
from tests.support.served import Served


@pytest.fixture
def make_daemon(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    started: list[Daemon] = []

    def make(config: str = "", **kwargs: object) -> Harness:
        home = tmp_path / "home"
        write_config(home, config, **kwargs)  # type: ignore[arg-type]
        daemon = Daemon(home).start()
        started.append(daemon)
        return Harness(daemon)

    yield make
    for daemon in started:
        daemon.stop()
        for w in daemon.store.workers.live():
            daemon.executor.signal(w.handle or "", 9)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    daemons: list[Served] = []
    folders: list[Path] = []

    def start(config: str = "", **kwargs: object) -> Served:
        # outside tmp_path (mode 0700), so that other users can reach the socket
        sock_dir = Path(tempfile.mkdtemp(prefix="astra-sock-"))
        sock_dir.chmod(0o755)
        folders.append(sock_dir)
        daemon = Served(tmp_path / "home", sock_dir / "astraeus.sock").start(config, **kwargs)
        daemons.append(daemon)
        return daemon

    yield start
    for daemon in daemons:
        daemon.stop()
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
