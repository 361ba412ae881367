"""A real daemon (``astra serve`` on a socket) shared by a module's hostile inputs."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import served  # noqa: F401  (a fresh daemon per test)
from tests.support.served import Served

LAB = """
[workspaces.vision]
members = ["root"]
max_priority = 10

[workspaces.nlp]
members = ["root"]

[drives.checkpoints]
path = "{checkpoints}"
workspaces = ["vision"]

[drives.secret]
path = "{secret}"
workspaces = ["nlp"]
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One daemon for a whole module: workspaces vision (max priority 10) and nlp, the
    drive checkpoints for vision and secret for nlp."""
    root = tmp_path_factory.mktemp("lab")
    drives = {name: root / "drives" / name for name in ("checkpoints", "secret")}
    for folder in drives.values():
        folder.mkdir(parents=True)
    sock_dir = Path(tempfile.mkdtemp(prefix="astra-sock-"))
    daemon = Served(root / "home", sock_dir / "astraeus.sock")
    daemon.start(LAB.format(**{k: str(v) for k, v in drives.items()}), gpus=2)
    yield daemon
    daemon.stop()
    shutil.rmtree(sock_dir, ignore_errors=True)
