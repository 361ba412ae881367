"""A local run sees only its own GPUs' device nodes: the process executor lays the devices
folder out again under bubblewrap without the other GPUs' ``nvidia<n>`` (all of them for a
run asking none), so no environment variable reaches another GPU. Fake device nodes (made
as tests/slurm/setup.sh makes them: character devices with /dev/null's numbers) in a
devices folder of the test's, a real member, real bubblewrap; tests/gpu/check.sh checks
the same on a machine with real GPUs."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.executors.base import Observed, WorkerLaunch
from runner.executors.process import ProcessExecutor
from tests.hostile.helpers import astra_as
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.users import unix_users

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="device nodes and Unix users need root"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]
GROUP, MEMBER = "astra-gi-g", "astra-gi-m"
NODES = ("nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm")


@pytest.fixture(scope="module")
def member() -> Iterator[pwd.struct_passwd]:
    with unix_users(GROUP, MEMBER, home=True, own_group=True, fresh=True) as made:
        yield made[MEMBER]


@pytest.fixture
def devices() -> Iterator[Path]:
    """A devices folder with four GPUs' nodes, the control nodes, and a null device."""
    folder = Path(tempfile.mkdtemp(prefix="astra-dev-"))
    folder.chmod(0o755)
    null = os.stat("/dev/null").st_rdev
    for name in (*NODES, "null"):
        os.mknod(folder / name, 0o666 | stat.S_IFCHR, null)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _seen(tmp_path: Path, member: pwd.struct_passwd, devices: Path, gpus: tuple[int, ...],
          minors: tuple[int, ...] | None = None) -> list[str]:  # fmt: skip
    """What the member's worker finds in the devices folder; and that it can open its own."""
    executor = ProcessExecutor(tmp_path / "workers", devices=devices)
    script = (f"ls {devices}; for n in {devices}/nvidia[0-9]*; do [ -e $n ] || continue;"
              " cat $n >/dev/null && echo open $n; done")  # fmt: skip
    log = tmp_path / "logs" / f"{len(gpus)}.log"
    launch = WorkerLaunch(run=f"iso{len(gpus)}", attempt=1, worker=0, image=None,
                          argv=("sh", "-c", script), gpus=gpus, gpu_minors=minors,
                          uid=member.pw_uid, gid=member.pw_gid, log_path=log)  # fmt: skip
    handle = executor.start(launch)
    deadline = time.monotonic() + 20
    while executor.status(handle).state is Observed.RUNNING:
        assert time.monotonic() < deadline, "the worker did not end"
        time.sleep(0.05)
    assert executor.status(handle).exit_code == 0, log.read_text()
    executor.cleanup(handle)
    return log.read_text().splitlines()


def test_a_worker_sees_only_its_own_gpus(
    tmp_path: Path, member: pwd.struct_passwd, devices: Path
) -> None:
    seen = _seen(tmp_path, member, devices, (1, 3))
    assert [line for line in seen if not line.startswith("open ")] == [
        "null", "nvidia-uvm", "nvidia1", "nvidia3", "nvidiactl"]  # fmt: skip
    assert [line for line in seen if line.startswith("open ")] == [
        f"open {devices}/nvidia1", f"open {devices}/nvidia3"]  # fmt: skip
    assert sorted(os.listdir(devices)) == sorted((*NODES, "null"))  # the host's: untouched


def test_a_gpu_is_its_device_node_by_nvml_s_minor_number(
    tmp_path: Path, member: pwd.struct_passwd, devices: Path
) -> None:
    seen = _seen(tmp_path, member, devices, (0,), minors=(2,))  # GPU 0 is /dev/nvidia2
    assert "nvidia2" in seen and "nvidia0" not in seen


def test_a_run_asking_no_gpu_sees_none(
    tmp_path: Path, member: pwd.struct_passwd, devices: Path
) -> None:
    seen = _seen(tmp_path, member, devices, ())
    assert seen == ["null", "nvidia-uvm", "nvidiactl"]


def test_through_the_daemon_a_members_run_sees_only_the_gpu_it_was_given(
    served: Callable[..., Served], member: pwd.struct_passwd, devices: Path
) -> None:
    lab = served(f'[api]\nsocket_group = "{GROUP}"\n[workspaces.gi]\nmembers = ["{MEMBER}"]\n',
                 gpus=4)  # fmt: skip
    lab.stop()  # again, with the simulated GPUs' device nodes in a folder of the test's
    lab.env = {**lab.env, "ASTRAEUS_SIM_DEVICES": str(devices)}
    lab.restart()
    folder = Path(tempfile.mkdtemp(prefix="astra-gi-"))
    folder.chmod(0o777)
    listing = f"ls {devices} | tr '\\n' ' '"
    for name, gpus in (("two", "2"), ("none", "0")):
        said = astra_as(lab, member, ["run", "--name", name, "--gpus", gpus, "--", "sh", "-c",
                                      listing], cwd=folder)  # fmt: skip
        assert said.startswith(b"Submitted run "), said
    for name in ("two", "none"):
        wait_for(lambda n=name: lab.json("show", n)["state"] == "Succeeded", 30, name)  # type: ignore[misc]
    given = lab.json("show", "two")["workers_history"][0]["gpus"]
    assert len(given) == 2
    seen = lab.astra("logs", "two").stdout.split()
    assert [n for n in seen if n.startswith("nvidia") and n[6:].isdigit()] == [
        f"nvidia{g}" for g in sorted(given)]  # fmt: skip
    assert lab.astra("logs", "none").stdout.split() == ["null", "nvidia-uvm", "nvidiactl"]
    shutil.rmtree(folder, ignore_errors=True)
