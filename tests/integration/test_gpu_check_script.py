"""tests/gpu/check.sh on a machine without an NVIDIA GPU: a real daemon started on a
temporary home, each check one line (the NVML inventory FAILs, what needs a GPU is
skipped), exit 1, quickly, and nothing left behind: no daemon, no temporary home."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "gpu" / "check.sh"


def nvml_readable() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception:
        return False
    return True


@pytest.mark.skipif(nvml_readable(), reason="this machine has NVML: the no-GPU path needs none")
def test_without_a_gpu_it_fails_in_lines_and_leaves_nothing() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="gc-"))  # short: the socket's path lies under it
    try:
        result = subprocess.run(
            ["bash", str(SCRIPT), "--env", sys.executable, "--budget", "120"],
            capture_output=True, text=True, timeout=240, cwd=ROOT,  # never hangs
            env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp)},
        )  # fmt: skip
        lines = result.stdout.splitlines()
        assert result.returncode == 1, (result.stdout, result.stderr)
        assert (
            lines[0]
            == f"ok   python: {sys.executable} {sys.version.split()[0]}, astraeus importable"
        )
        assert lines[1].startswith("ok   daemon: pid ")
        pid = int(lines[1].split()[3])
        assert lines[2].startswith("FAIL nvml inventory: the daemon's GPUs are not NVML's: ")
        assert "simulated: NVML not available" in lines[2]
        skipped = "no NVML GPU (see nvml inventory)"
        assert lines[3:7] == [
            f"skip process run sees its GPU: {skipped}",
            f"skip process run sees no other GPU: {skipped}",
            f"skip shared runs: {skipped}",
            f"skip telemetry per process: {skipped}",
        ]
        assert lines[7].startswith("FAIL doctor --system: nvml warn: NVML not readable: ")
        assert lines[8:] == [f"skip docker gpu: {skipped}"]
        assert list(tmp.iterdir()) == []  # the temporary home is gone
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)  # the daemon too
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
