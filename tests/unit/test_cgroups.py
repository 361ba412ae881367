"""Workers' cgroups (runner/executors/cgroups.py) over folders laid out as cgroupfs v2 and
v1: what is made, what is written, and a stop that reaches the processes listed in the
group (real processes, listed in the fake folder's ``cgroup.procs``)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from runner.executors.cgroups import CPU_PERIOD, PIDS_MAX, Limits, detect

MIB = 1 << 20


def _v2(root: Path) -> Path:
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (root / "cgroup.subtree_control").write_text("")
    return root


def _v1(root: Path, controllers: tuple[str, ...] = ("memory", "cpu", "pids", "freezer")) -> Path:
    for controller in controllers:
        (root / controller).mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    return root


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "30"])


def test_v2_a_slice_for_the_daemon_and_a_group_per_worker(tmp_path: Path) -> None:
    root = _v2(tmp_path / "cg")
    found = detect("lab", root)
    assert found.cgroups is not None and found.cgroups.version == 2
    cgroups = found.cgroups
    for folder in (root, root / "astraeus.slice", root / "astraeus.slice" / "lab"):
        enabled = (folder / "cgroup.subtree_control").read_text().split()
        assert enabled == ["+memory", "+cpu", "+pids"], folder  # given to the children
    assert cgroups.describe() == "cgroup v2: memory, CPU, processes enforced"
    group = cgroups.make("w-1", Limits(memory=100 * MIB, cpu_milli=500))
    folder = root / "astraeus.slice" / "lab" / "w-1"
    assert group.folders == (folder,)
    assert (folder / "memory.max").read_text() == str(100 * MIB)
    assert (folder / "cpu.max").read_text() == f"50000 {CPU_PERIOD}"
    assert (folder / "pids.max").read_text() == str(PIDS_MAX)
    assert not (folder / "memory.swap.max").exists()  # written only where the kernel has it
    assert cgroups.find("w-1") == group and cgroups.find("w-2") is None


def test_v2_no_swap_where_the_kernel_counts_it_and_nothing_unasked(tmp_path: Path) -> None:
    cgroups = detect("lab", _v2(tmp_path / "cg")).cgroups
    assert cgroups is not None
    folder = tmp_path / "cg" / "astraeus.slice" / "lab" / "w-1"
    folder.mkdir()
    (folder / "memory.swap.max").write_text("max\n")
    cgroups._limit(cgroups.group("w-1"), Limits(memory=64 * MIB))
    assert (folder / "memory.swap.max").read_text() == "0"
    cgroups.make("w-2", Limits())  # nothing asked: no memory or CPU bound
    assert not (folder.parent / "w-2" / "memory.max").exists()
    assert not (folder.parent / "w-2" / "cpu.max").exists()


def test_v2_a_stop_signals_every_process_and_the_kill_is_cgroup_kill(tmp_path: Path) -> None:
    cgroups = detect("lab", _v2(tmp_path / "cg")).cgroups
    assert cgroups is not None
    group = cgroups.make("w-1", Limits())
    procs = [_sleeper(), _sleeper()]
    (group.folders[0] / "cgroup.procs").write_text("".join(f"{p.pid}\n" for p in procs))
    assert group.pids() == [p.pid for p in procs]
    assert group.signal(signal.SIGTERM) == []
    assert [p.wait(5) for p in procs] == [-signal.SIGTERM, -signal.SIGTERM]
    (group.folders[0] / "cgroup.kill").write_text("0")  # the kernel has it: written, no walk
    assert group.kill() == []
    assert (group.folders[0] / "cgroup.kill").read_text() == "1"
    (group.folders[0] / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.oom_kills() == 1


def test_v2_a_cgroupfs_that_cannot_be_written_is_said(tmp_path: Path) -> None:
    root = _v2(tmp_path / "cg")
    (root / "cgroup.subtree_control").unlink()
    (root / "cgroup.subtree_control").mkdir()  # a write refused, even to root
    found = detect("lab", root)
    assert found.cgroups is None
    assert found.why_not == f"cannot write cgroup v2 at {root}: Is a directory"


def test_v1_a_folder_in_each_hierarchy_and_the_limits_in_each(tmp_path: Path) -> None:
    root = _v1(tmp_path / "cg")
    found = detect("lab", root)
    assert found.cgroups is not None and found.cgroups.version == 1
    assert found.cgroups.describe() == "cgroup v1: memory, CPU, processes enforced"
    assert (root / "memory" / "astraeus" / "memory.use_hierarchy").read_text() == "1"
    memsw = root / "memory" / "astraeus" / "lab" / "w-1" / "memory.memsw.limit_in_bytes"
    memsw.parent.mkdir()
    memsw.write_text("9223372036854771712\n")  # swap accounting on: bounded with the memory
    group = found.cgroups.make("w-1", Limits(memory=100 * MIB, cpu_milli=1500, pids=64))
    assert [f.relative_to(root).parts[0] for f in group.folders] == [
        "memory", "cpu", "pids", "freezer"]  # fmt: skip
    memory, cpu, pids, _ = group.folders
    assert (memory / "memory.limit_in_bytes").read_text() == str(100 * MIB)
    assert memsw.read_text() == str(100 * MIB)
    assert (cpu / "cpu.cfs_quota_us").read_text() == "150000"
    assert (cpu / "cpu.cfs_period_us").read_text() == str(CPU_PERIOD)
    assert (pids / "pids.max").read_text() == "64"


def test_v1_the_kill_freezes_kills_and_thaws(tmp_path: Path) -> None:
    cgroups = detect("lab", _v1(tmp_path / "cg")).cgroups
    assert cgroups is not None
    group = cgroups.make("w-1", Limits())
    proc = _sleeper()
    memory, _, _, freezer = group.folders
    (memory / "cgroup.procs").write_text(f"{proc.pid}\n")
    (freezer / "freezer.state").write_text("THAWED\n")
    assert group.kill() == []  # the fake list never empties: each round kills what it lists
    assert proc.wait(5) == -signal.SIGKILL
    assert (freezer / "freezer.state").read_text() == "THAWED"  # thawed again at the end
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert group.oom_kills() == 2


def test_without_a_memory_hierarchy_nothing_is_made(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    (root / "cpu").mkdir(parents=True)
    found = detect("lab", root)
    assert found.cgroups is None and found.why_not == f"no cgroup v1 or v2 hierarchy at {root}"


def test_doctor_says_what_this_machine_s_cgroups_enforce(tmp_path: Path) -> None:
    from runner.executors.cgroups import probe

    v2 = _v2(tmp_path / "v2")
    assert probe(v2) == ("ok", "cgroup v2: memory, CPU, processes enforced for local runs")
    v1 = _v1(tmp_path / "v1", ("memory", "cpu"))
    assert probe(v1) == ("ok", "cgroup v1: memory, CPU enforced for local runs")
    none = tmp_path / "none"
    none.mkdir()
    assert probe(none) == (
        "warn", f"no cgroup v1 or v2 hierarchy at {none}: memory and CPU asks not enforced"
    )  # fmt: skip


def test_an_executor_without_cgroups_says_what_it_does_not_enforce(tmp_path: Path) -> None:
    from runner.executors.cgroups import Detected
    from runner.executors.process import ProcessExecutor

    none = ProcessExecutor(
        tmp_path / "w", cgroups=Detected(None, "the daemon does not run as root")
    )
    assert (
        none.not_enforced() == "memory and CPU asks not enforced: the daemon does not run as root"
    )
    cgroups = detect("lab", _v1(tmp_path / "v1", ("memory", "pids"))).cgroups
    assert ProcessExecutor(tmp_path / "w", cgroups=Detected(cgroups)).not_enforced() == (
        "CPU asks not enforced"
    )
    assert ProcessExecutor(tmp_path / "w", cgroups=detect("lab", _v2(tmp_path / "v2"))
                           ).not_enforced() is None  # fmt: skip


def test_a_worker_is_measured_from_its_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.telemetry import procs

    cgroups = detect("lab", _v2(tmp_path / "cg")).cgroups
    assert cgroups is not None
    group = cgroups.make("w-1", Limits())
    folder = group.folders[0]
    (folder / "cgroup.procs").write_text("4242\n4243\n")
    (folder / "memory.current").write_text(f"{100 * MIB}\n")
    (folder / "cpu.stat").write_text("usage_usec 5000000\nuser_usec 4000000\n")
    clock = iter([100.0, 102.0])
    monkeypatch.setattr(procs.time, "monotonic", lambda: next(clock))
    meter = procs.TreeMeter()
    first = meter.measure({"0": 1}, {"0": group})["0"]  # the cgroup, not the tree of pid 1
    assert first == procs.TreeUsage(0.0, 100 * MIB, frozenset({4242, 4243}))
    (folder / "cpu.stat").write_text("usage_usec 8000000\n")  # 3 s of CPU in 2 s
    assert meter.measure({}, {"0": group})["0"].cpu_percent == 150.0
    group.folders[0].joinpath("memory.current").unlink()  # removed: the worker ended
    assert meter.measure({}, {"0": group}) == {}


def test_core_lists_read_and_written_as_the_kernel_does() -> None:
    from runner.executors.cgroups import cpu_list, cpu_text

    assert cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert cpu_list("") == set()
    assert cpu_text([9, 4, 5, 6, 7, 11]) == "4-7,9,11"
    assert cpu_text([]) == ""


def test_v2_pinned_workers_get_cores_of_their_own(tmp_path: Path) -> None:
    root = _v2(tmp_path / "cg")
    (root / "cpuset.cpus.effective").write_text("0-7\n")
    cgroups = detect("lab", root, cpuset=True).cgroups
    assert cgroups is not None and cgroups.cpuset == root / "astraeus.slice" / "lab"
    assert "+cpuset" in (root / "cgroup.subtree_control").read_text()
    assert cgroups.cores() == set(range(8))
    pinned = cgroups.make("w-1", Limits(cpu_milli=2000, cpus="2-3"))
    assert (pinned.folders[0] / "cpuset.cpus").read_text() == "2-3"
    cgroups.make("w-2", Limits(cpu_milli=500))  # a share: no cpuset of its own
    (cgroups.group("w-2").folders[0] / "cpuset.cpus").write_text("\n")  # as the kernel shows
    assert cgroups.pinned() == {2, 3}
    assert detect("lab", root).cgroups.cpuset is None  # type: ignore[union-attr]  # not asked


def test_v1_a_pinned_worker_joins_a_cpuset_with_its_memory_nodes(tmp_path: Path) -> None:
    root = _v1(tmp_path / "cg", ("memory", "cpu", "pids", "freezer", "cpuset"))
    (root / "cpuset" / "cpuset.cpus").write_text("0-3\n")
    (root / "cpuset" / "cpuset.mems").write_text("0\n")
    cgroups = detect("lab", root, cpuset=True).cgroups
    assert cgroups is not None and cgroups.cpuset == root / "cpuset" / "astraeus" / "lab"
    assert (cgroups.cpuset / "cpuset.cpus").read_text() == "0-3"  # a v1 cpuset starts empty
    group = cgroups.make("w-1", Limits(cpus="1"))
    assert group.controllers[-1] == "cpuset" and group.folders[-1] == cgroups.cpuset / "w-1"
    assert (cgroups.cpuset / "w-1" / "cpuset.mems").read_text() == "0"
    assert (cgroups.cpuset / "w-1" / "cpuset.cpus").read_text() == "1"
    assert cgroups.pinned() == {1} and cgroups.cores() == {0, 1, 2, 3}
    unpinned = cgroups.make("w-2", Limits(cpu_milli=1000))
    assert "cpuset" not in unpinned.controllers


def test_pinned_cores_are_taken_on_the_gpus_numa_node_first(tmp_path: Path) -> None:
    from runner.executors.base import WorkerLaunch
    from runner.executors.process import ProcessExecutor
    from runner.gpus import numa_node

    sysfs = tmp_path / "pci" / "0000:3b:00.0"
    sysfs.mkdir(parents=True)
    (sysfs / "numa_node").write_text("1\n")
    assert numa_node("00000000:3B:00.0", str(tmp_path / "pci")) == 1
    assert numa_node("00000000:AF:00.0", str(tmp_path / "pci")) is None
    nodes = tmp_path / "nodes"
    for node, cpus in (("node0", "0-3"), ("node1", "4-7")):
        (nodes / node).mkdir(parents=True)
        (nodes / node / "cpulist").write_text(cpus + "\n")
    root = _v2(tmp_path / "cg")
    (root / "cpuset.cpus.effective").write_text("0-7\n")
    found = detect("lab", root, cpuset=True)
    executor = ProcessExecutor(tmp_path / "w", cgroups=found, pinning=True, nodes=nodes)
    assert found.cgroups is not None
    found.cgroups.make("other", Limits(cpus="4"))  # another worker holds core 4

    def cores(cpu_milli: int, numa: tuple[int, ...]) -> str:
        launch = WorkerLaunch(run="r", attempt=1, worker=0, image=None, argv=("true",),
                              cpu_milli=cpu_milli, gpu_numa=numa)  # fmt: skip
        assert found.cgroups is not None
        return executor._cores_for(found.cgroups, launch)

    assert cores(2500, (1,)) == "5-7"  # 3 cores, on node 1, not core 4
    assert cores(1000, ()) == "0"  # no GPU: the first free core
    assert cores(5000, (1,)) == "0-1,5-7"  # node 1's free cores first, then others
    assert cores(0, (1,)) == ""  # none asked: a share
    assert cores(8000, (1,)) == ""  # more than are free: a share
