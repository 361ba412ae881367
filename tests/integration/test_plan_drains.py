"""`astra plan FILE` while the daemon drains: the file's plan says so, as a submit's does."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from astraeus_tui.client import Client
from tests.support.harness import spec as run_spec
from tests.support.served import Served

QUEUE = """
[machine]
gpus = 2
cpu_cores = 16
memory = "64GiB"

[[waiting]]
name = "pair"
gpus = 2

[[waiting]]
name = "single"
gpus = 1
"""


def _plan(d: Served, queue: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "astraeus_tui.cli.main", "plan", str(queue)],
        env={**d.env, "COLUMNS": "250"}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def _row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if f" {name} " in line)


def test_the_plan_of_a_file_says_the_machine_or_its_gpus_drain(
    served: Callable[..., Served], tmp_path: Path
) -> None:
    d = served(gpus=2)
    root = Client(d.socket, timeout=30)
    queue = tmp_path / "queue.toml"
    queue.write_text(QUEUE)
    before = _plan(d, queue)
    assert "draining" not in before and "start" in _row(before, "pair")

    assert d.astra("admin", "drain", "--gpus", "1", "--reason", "fan failing").returncode == 0
    submitted = root.preview(run_spec("pair-now", ["true"], gpus=2))["reason"]
    assert submitted == "Waits: the machine is draining (fan failing): GPU 1 kept out of every plan"
    out = _plan(d, queue)
    assert _row(out, "pair").rstrip(" │").endswith(submitted), out
    assert "start" in _row(out, "single") and "draining" not in _row(out, "single"), out

    assert d.astra("admin", "drain", "--reason", "kernel upgrade").returncode == 0
    submitted = root.preview(run_spec("pair-now", ["true"], gpus=2))["reason"]
    assert submitted == "Waits: the machine is draining (kernel upgrade)"
    out = _plan(d, queue)
    for name in ("pair", "single"):
        row = _row(out, name)
        assert row.rstrip(" │").endswith(submitted) and " wait " in row, out

    assert d.astra("admin", "resume").returncode == 0
    assert _plan(d, queue) == before
