"""ASTRAEUS_HOME on a 2 MiB tmpfs, filled up: submits are refused with ``507 DISK_FULL``,
nothing acknowledged is lost, the loop keeps going, and service resumes with space.

Needs root (mount); skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from astraeus_tui.client import ApiError
from tests.faults.conftest import MakeDaemon
from tests.faults.daemon import document, wait_for
from tests.faults.disk import fill

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(home)],
        capture_output=True, text=True,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield home
    finally:  # the daemon and its workers are gone by now (make_daemon is torn down first)
        if subprocess.run(["umount", str(home)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(home)], capture_output=True)


def test_a_full_disk_refuses_submits_clearly_and_loses_nothing(
    small_home: Path, make_daemon: MakeDaemon
) -> None:
    d = make_daemon(gpus=2, home=small_home).start()
    acked: list[str] = []
    for i in range(3):
        d.submit(document(f"before-{i}", ["true"], gpus=1))
        acked.append(f"before-{i}")
    d.submit(document("long", ["sleep", "300"], gpus=1))
    acked.append("long")
    d.wait_state("long", "Running")
    for name in acked[:3]:
        d.wait_state(name, "Succeeded")

    d.submit(document("ends-while-full", ["sleep", "2"], gpus=0))
    acked.append("ends-while-full")
    d.wait_state("ends-while-full", "Running")
    fill(small_home / "filler")
    refused: list[ApiError] = []
    for i in range(300):  # the WAL may still hold free pages for a few small writes
        try:
            d.submit(document(f"during-{i}", ["true"], gpus=1))
        except ApiError as e:
            refused.append(e)
            break
        acked.append(f"during-{i}")
    assert refused, "no submit was refused on a full disk"
    error = refused[0]
    assert (error.status, error.code) == (507, "DISK_FULL"), str(error)
    assert str(error).startswith("507 DISK_FULL: no space left for the state database")
    assert "\n" not in str(error)
    ticks = d.status()["ticks"]
    wait_for(lambda: d.status()["ticks"] > ticks + 8, 10, "the loop to go on")  # no crash
    assert {r["name"] for r in d.active()} >= {"long"}  # reads still answer
    with pytest.raises(ApiError) as again:
        d.client().request("DELETE", "/v1/runs/long")  # any write: refused, not half done
    assert again.value.code == "DISK_FULL"

    (small_home / "filler").unlink()
    d.submit(document("after", ["true"], gpus=1))
    acked.append("after")
    d.wait_state("after", "Succeeded", timeout=30)
    d.wait_state("ends-while-full", "Succeeded")  # its end, learned once there was room
    assert d.run("long")["state"] == "Running"
    d.client().request("DELETE", "/v1/runs/long")
    d.wait_state("long", "Cancelled")
    assert d.alive()
    names = {r["name"] for r in d.client().request("GET", "/v1/runs", query={"all": 1})["runs"]}
    assert set(acked) <= names  # nothing acknowledged was lost
    failures = d.log.read_text().count("tick failed")
    assert failures <= 3, f"{failures} tracebacks: the loop logs a repeated error once"
