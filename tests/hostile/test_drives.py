"""Drive roots and symlinks: a drive is mounted from its configured folder, or not at all.

The rule (runner/engine/starts.py, ``drive_source``), checked at every start: the configured
path is walked from ``/`` with O_NOFOLLOW, so neither the drive nor a folder above it
may be a symlink; the drive must be a directory; and each folder above it must belong
to root (or the daemon's user) and not be writable by group or others (a sticky folder
is fine when the next one down is theirs), so that no one else can swap the drive for a
symlink after the check. Before, the root went through ``os.path.realpath``: a drive
swapped for a symlink to ``/etc`` was mounted as ``/etc``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.engine.starts import drive_source
from runner.executors.base import ExecutorError
from tests.support.harness import wait_for
from tests.support.served import Served

ROOT = os.geteuid() == 0


@pytest.fixture
def drive(tmp_path: Path) -> Path:
    folder = tmp_path / "srv" / "drives" / "ckpt"
    folder.mkdir(parents=True)
    return folder


def refused(path: Path | str, *words: str) -> str:
    with pytest.raises(ExecutorError) as caught:
        drive_source("ckpt", str(path))
    message = str(caught.value)
    assert message.startswith("drive ckpt: ") and "\n" not in message
    for word in words:
        assert word in message, message
    return message


def test_a_real_folder_is_mounted_as_configured(drive: Path) -> None:
    assert drive_source("ckpt", str(drive)) == str(drive)
    assert drive_source("ckpt", f"{drive}/") == str(drive)


def test_a_drive_that_is_a_symlink_is_refused(drive: Path, tmp_path: Path) -> None:
    link = tmp_path / "srv" / "drives" / "link"
    link.symlink_to(drive)
    refused(link, f"{link} is a symlink; refusing to mount it")
    etc = tmp_path / "srv" / "drives" / "etc"
    etc.symlink_to("/etc")
    refused(etc, "is a symlink")


def test_a_symlink_above_the_drive_is_refused(drive: Path, tmp_path: Path) -> None:
    (tmp_path / "alias").symlink_to(tmp_path / "srv")
    refused(tmp_path / "alias" / "drives" / "ckpt", f"{tmp_path / 'alias'} is a symlink")


def test_missing_files_and_relative_paths_are_refused(drive: Path) -> None:
    refused(drive / "missing", "cannot open", "No such file or directory")
    (drive / "file").write_text("x")
    refused(drive / "file", "is not a directory")
    refused("relative/ckpt", "is not an absolute path")


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_folder_above_that_others_may_write_is_refused(drive: Path, mode: int) -> None:
    drive.parent.chmod(mode)
    refused(drive, f"{drive.parent} is writable by group or others", "chmod go-w")


def test_a_sticky_folder_above_is_fine_when_the_drive_is_ours(drive: Path) -> None:
    drive.parent.chmod(0o1777)  # as /tmp
    assert drive_source("ckpt", str(drive)) == str(drive)


@pytest.mark.skipif(not ROOT, reason="giving folders to another user needs root")
def test_folders_above_that_another_user_owns_are_refused(drive: Path) -> None:
    os.chown(drive.parent, 65534, 65534)
    refused(drive, f"{drive.parent} belongs to uid 65534", "could swap")
    os.chown(drive.parent, 0, 0)
    drive.parent.chmod(0o1777)
    os.chown(drive, 65534, 65534)  # sticky, but the drive is someone else's to rename
    refused(drive, "is writable by group or others")
    drive.parent.chmod(0o755)
    assert drive_source("ckpt", str(drive)) == str(drive)  # the drive itself may be theirs


def test_a_drive_swapped_for_a_symlink_while_checked_is_never_followed(
    drive: Path, tmp_path: Path
) -> None:
    """A racer swaps the drive for a symlink to /etc and back, as fast as it can."""
    real = tmp_path / "srv" / "drives" / "ckpt.real"
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            drive.rename(real)
            drive.symlink_to("/etc")
            drive.unlink()
            real.rename(drive)

    racer = threading.Thread(target=swap)
    racer.start()
    outcomes: dict[str, int] = {}
    try:
        for _ in range(3000):
            try:
                result = drive_source("ckpt", str(drive))
            except ExecutorError as e:
                result = "symlink" if "is a symlink" in str(e) else "missing"
            outcomes[result] = outcomes.get(result, 0) + 1
    finally:
        stop.set()
        racer.join()
    assert set(outcomes) <= {str(drive), "symlink", "missing"}, outcomes
    assert outcomes.get(str(drive)) and outcomes.get("symlink"), outcomes
    assert os.path.realpath(drive) == str(drive)  # the racer put the folder back


def test_the_daemon_fails_a_run_whose_drive_was_swapped_before_it_started(
    served: Callable[..., Served], tmp_path: Path
) -> None:
    drive, elsewhere = tmp_path / "drive", tmp_path / "elsewhere"
    drive.mkdir()
    elsewhere.mkdir()
    (drive / "ok.txt").write_text("the drive\n")
    (elsewhere / "ok.txt").write_text("outside the drive\n")
    d = served(f'[drives.checkpoints]\npath = "{drive}"\n', gpus=1)
    leak = tmp_path / "leak.txt"
    read = f"cat /ckpt/ok.txt > {leak}"
    run = ["run", "--gpus", "1", "--drive", "checkpoints:/ckpt", "--"]
    assert d.astra(*run[:1], "--name", "first", *run[1:], "sh", "-c", read).returncode == 0
    assert d.astra("wait", "first").returncode == 0
    assert leak.read_text() == "the drive\n"  # a drive is mounted from its folder
    leak.unlink()
    blocker = ["run", "--name", "blocker", "--gpus", "1", "--", sys.executable, "-c"]
    assert d.astra(*blocker, "import time; time.sleep(600)").returncode == 0
    wait_for(lambda: d.json("show", "blocker")["state"] == "Running")
    assert d.astra(*run[:1], "--name", "victim", *run[1:], "sh", "-c", read).returncode == 0
    assert d.json("show", "victim")["state"] == "Queued"
    drive.rename(tmp_path / "drive.old")  # between submit and start: a symlink instead
    drive.symlink_to(elsewhere)
    assert d.astra("delete", "blocker").returncode == 0
    victim = wait_for(lambda: (v := d.json("show", "victim"))["state"] == "Failed" and v, 60)
    assert "drive checkpoints" in victim["reason"]
    assert f"{drive} is a symlink; refusing to mount it" in victim["reason"]
    assert not leak.exists()
