"""The process worker's supervisor starts light: every start pays for its imports.

It runs as ``python -S -P -m runner.executors.supervise`` (no site: only the standard
library and this package), and what only drives or a failure need is imported then.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
LATER = ("runner.executors.member", "runner.runspec.parse", "runner.model", "traceback")
# what the start path does without, each a few ms of every worker's start: dataclasses
# (inspect, ast, copy), json (runner/plainjson.py), tempfile (random, shutil, bz2)
HEAVY = ("dataclasses", "inspect", "ast", "json", "tempfile", "random", "shutil")


def test_the_supervisor_needs_no_site_and_leaves_drive_placement_for_drives() -> None:
    code = "import sys, runner.executors.supervise; print(' '.join(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run(
        [sys.executable, "-S", "-P", "-c", code], env=env, check=True, capture_output=True
    )
    loaded = set(out.stdout.decode().split())
    assert "site" not in loaded
    assert not loaded & set(LATER)
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    assert {m.split(".")[0] for m in loaded} <= {*sys.stdlib_module_names, "runner", "__main__"}


def test_placing_drives_imports_the_rule_before_the_drop_to_the_member() -> None:
    code = (
        "import sys, runner.executors.sandbox as s; s.load_rules(); "
        "print('runner.runspec.parse' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run(
        [sys.executable, "-S", "-P", "-c", code], env=env, check=True, capture_output=True
    )
    assert out.stdout.strip() == b"True"


def test_a_worker_s_supervisor_runs_without_site(tmp_path: Path) -> None:
    from runner.executors.base import Observed, WorkerLaunch
    from runner.executors.process import ProcessExecutor
    from runner.executors.workerfiles import read_json

    executor = ProcessExecutor(tmp_path / "workers")
    handle = executor.start(WorkerLaunch("light", 1, 0, None, ("sleep", "30")))
    try:
        meta = read_json(tmp_path / "workers" / handle / "meta.json")
        assert meta is not None
        cmdline = Path(f"/proc/{meta['supervisor_pid']}/cmdline").read_bytes().split(b"\0")
        assert cmdline[1:5] == [b"-S", b"-P", b"-m", b"runner.executors.supervise"]
        assert executor.status(handle).state is Observed.RUNNING
    finally:
        executor.signal(handle, 9)
        deadline = time.monotonic() + 15
        while executor.status(handle).state is Observed.RUNNING:
            assert time.monotonic() < deadline, "the worker did not end on SIGKILL"
            time.sleep(0.02)
