from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.daemon import Daemon
from tests.integration.harness import Harness, write_config


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
        for w in daemon.store.live_workers():
            daemon.executor.signal(w.handle or "", 9)
