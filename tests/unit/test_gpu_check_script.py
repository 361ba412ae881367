"""tests/gpu/check.sh, the checks for a real NVIDIA machine, without starting anything: its
arguments, its --dry-run, and its list of checks against tests/gpu/checks.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "gpu" / "check.sh"
CHECKS = ROOT / "tests" / "gpu" / "checks.py"


def check_sh(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )  # fmt: skip


def names_of(lines: list[str]) -> list[str]:
    """The checks' names in ``ok   name: …`` / ``FAIL name: …`` / ``skip name: …``."""
    return [line[5:].split(":", 1)[0] for line in lines]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--frobnicate"], "check.sh: unknown argument --frobnicate (see --help)"),
        (["--budget", "5"], "check.sh: --budget: a whole number of seconds, 30 to 540, got 5"),
        (["--budget", "1e3"], "check.sh: --budget: a whole number of seconds, 30 to 540, got 1e3"),
        (["--wheels"], "check.sh: --wheels needs a value"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(args: list[str], said: str) -> None:
    result = check_sh(*args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", said + "\n")


def test_help_says_how_to_run_it() -> None:
    result = check_sh("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("Astraeus on a real NVIDIA machine")
    for option in ("--python", "--wheels", "--env", "--budget", "--dry-run", "--keep"):
        assert option in result.stdout


def test_dry_run_without_wheels_fails_and_names_every_check(tmp_path: Path) -> None:
    result = check_sh("--dry-run", "--wheels", str(tmp_path))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"ok   python: {sys.executable} ")
    assert lines[1] == (
        f"FAIL wheels: no astraeus wheel in {tmp_path} (run tests/gpu/wheels.sh where a "
        "package registry is reachable, and carry the folder)"
    )
    listed = subprocess.run([sys.executable, str(CHECKS), "--list"], capture_output=True,
                            text=True, timeout=60, check=True).stdout.split("\n")[:-1]  # fmt: skip
    assert listed[0] == "nvml inventory" and len(listed) == 7
    assert lines[2:] == [f"skip {name}: --dry-run" for name in listed]
    assert names_of(lines[2:]) == listed  # check.sh's own list is checks.py's


def test_dry_run_with_wheels_passes(tmp_path: Path) -> None:
    (tmp_path / "astraeus-0.1.0-py3-none-any.whl").write_bytes(b"")
    result = check_sh("--dry-run", "--wheels", str(tmp_path))
    assert result.returncode == 0, result.stdout
    wheels = result.stdout.splitlines()[1]
    assert wheels.startswith(f"ok   wheels: 1 in {tmp_path}, ") and wheels.endswith(" MiB")


def test_a_python_that_cannot_run_stops_before_anything_starts(tmp_path: Path) -> None:
    result = check_sh("--python", str(tmp_path / "no-python"), "--wheels", str(tmp_path))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"FAIL python: {tmp_path / 'no-python'} does not run")
    assert lines[2:] == [f"skip {name}: nothing to run them with" for name in names_of(lines[2:])]
    assert len(lines[2:]) == 7
