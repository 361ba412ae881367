"""MIG instances as GPUs of their own: the inventory through a stub pynvml with MIG calls,
the names CUDA and Docker are given, the doctor's line, and a plan over GPUs of
different sizes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runner.daemon.daemon import machine_for
from runner.daemon.doctor import check_nvml
from runner.engine.starts import gpu_names
from runner.executors.base import WorkerLaunch
from runner.executors.docker.containers import gpu_environment, resource_kwargs
from runner.gpus import GpuInfo, Inventory, read_inventory
from runner.model import GIB
from runner.telemetry.gpus import read_nvml
from tests.unit.engine_fakes import Engine
from tests.unit.nvml_fakes import FakeDevice, FakeNVML, FakeNVMLError, two_gpus


class FakeNotSupported(FakeNVMLError):
    """pynvml's NVMLError_NotSupported: a GPU that knows no MIG."""


@dataclass
class FakeGpu(FakeDevice):
    """A whole GPU; in MIG mode with ``instances`` (None in a slot: no instance there)."""

    mig_mode: int | None = 0  # None: nvmlDeviceGetMigMode raises NotSupported
    instances: list[FakeDevice | None] = field(default_factory=list)


@dataclass
class MigNVML(FakeNVML):
    """FakeNVML with the MIG calls of pynvml."""

    def nvmlDeviceGetMigMode(self, handle: FakeDevice) -> list[int]:
        self.calls.append(f"mig-mode {handle.uuid}")
        if not isinstance(handle, FakeGpu) or handle.mig_mode is None:
            raise FakeNotSupported("Not Supported")
        return [handle.mig_mode, handle.mig_mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeGpu) -> int:
        return len(handle.instances)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeGpu, slot: int) -> FakeDevice:
        instance = handle.instances[slot]
        if instance is None:
            raise FakeNVMLError("Not Found")
        return instance

    def nvmlDeviceGetPowerUsage(self, handle: FakeDevice) -> int:
        if handle.uuid.startswith("MIG-"):
            raise FakeNotSupported("Not Supported")
        return 250_000


def mig(uuid: str, profile: str, gib: int, compute: tuple[int, ...] = ()) -> FakeDevice:
    """A MIG instance as NVML reports it: no utilisation, no temperature of its own."""
    name = f"NVIDIA H100 80GB HBM3 MIG {profile}"
    return FakeDevice(uuid, name, gib * GIB, 0, None, None, compute)


def h100_in_mig_mode() -> MigNVML:
    """GPU 0 split into 3g.40gb + (a gap) + 2g.20gb; GPU 1 whole."""
    split = FakeGpu(
        "GPU-aaa", "NVIDIA H100 80GB HBM3", 80 * GIB, 0, None, 61, mig_mode=1,
        instances=[mig("MIG-one", "3g.40gb", 40, (4242,)), None, mig("MIG-two", "2g.20gb", 20)],
    )  # fmt: skip
    whole = FakeGpu("GPU-bbb", "NVIDIA H100 80GB HBM3", 80 * GIB, GIB, 12, 40, mig_mode=0)
    return MigNVML([split, whole])


def test_each_mig_instance_is_a_gpu_of_its_own_size() -> None:
    inventory = read_inventory(None, nvml=h100_in_mig_mode().module(), env={})
    assert not inventory.simulated
    assert [(g.index, g.label, g.uuid, g.memory_total) for g in inventory.gpus] == [
        (0, "0:0", "MIG-one", 40 * GIB),
        (1, "0:2", "MIG-two", 20 * GIB),
        (2, "2", "GPU-bbb", 80 * GIB),
    ]
    one, _, whole = inventory.gpus
    assert (one.mig, one.utilization, one.temperature, one.pids) == ("0:0", None, 61, (4242,))
    assert one.name == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
    assert (whole.mig, whole.utilization, whole.temperature) == (None, 12, 40)
    # indexes no longer are CUDA's: every GPU is named by its UUID
    assert inventory.devices == {0: "MIG-one", 1: "MIG-two", 2: "GPU-bbb"}
    assert [g.device_name for g in inventory.gpus] == ["MIG-one", "MIG-two", "GPU-bbb"]


def test_mig_off_or_not_supported_keeps_the_whole_gpus_as_they_were() -> None:
    """MIG mode off, a GPU raising NotSupported, and a pynvml without MIG calls all read
    as the inventory read before MIG was known: the same GpuInfo, named by index."""
    before = read_inventory(None, nvml=two_gpus().module(), env={})  # no MIG calls at all
    off = two_gpus()
    nvml = MigNVML(
        [FakeGpu(**vars(off.devices[0]), mig_mode=0),
         FakeGpu(**vars(off.devices[1]), mig_mode=None)],
    )  # fmt: skip
    after = read_inventory(None, nvml=nvml.module(), env={})
    assert after == before
    assert after.devices == {}
    assert [g.device_name for g in after.gpus] == ["0", "1"]
    assert [g.label for g in after.gpus] == ["0", "1"]
    assert "mig-mode GPU-bbb" in nvml.calls  # asked, and NotSupported was not fatal
    assert GpuInfo(0, "u", "n", 1, 0, None, None, (), False).mig is None


def test_mig_mode_with_no_instances_offers_nothing_of_that_gpu() -> None:
    empty = FakeGpu("GPU-aaa", "NVIDIA A100", 40 * GIB, 0, mig_mode=1, instances=[])
    whole = FakeGpu("GPU-bbb", "NVIDIA A100", 40 * GIB, 0, mig_mode=0)
    inventory = read_inventory(None, nvml=MigNVML([empty, whole]).module(), env={})
    assert [(g.index, g.uuid, g.mig) for g in inventory.gpus] == [(0, "GPU-bbb", None)]
    assert inventory.devices == {0: "GPU-bbb"}  # GPU 0 is not CUDA's 0 any more


def test_telemetry_numbers_mig_instances_as_the_inventory_does() -> None:
    nvml = h100_in_mig_mode()
    readings, processes = read_nvml(nvml.module())
    assert [(r.index, r.uuid, r.memory_total, r.utilization) for r in readings] == [
        (0, "MIG-one", 40 * GIB, None),
        (1, "MIG-two", 20 * GIB, None),
        (2, "GPU-bbb", 80 * GIB, 12),
    ]
    assert [r.temperature for r in readings] == [61, 61, 40]  # an instance: its GPU's
    assert [r.power_watts for r in readings] == [None, None, 250.0]
    assert [(p.pid, p.gpu) for p in processes] == [(4242, 0)]


def test_a_run_on_a_mig_instance_is_given_its_uuid() -> None:
    devices = read_inventory(None, nvml=h100_in_mig_mode().module(), env={}).devices
    assert gpu_names((1,), devices) == ("MIG-two",)
    assert gpu_names((1,), {}) == ("1",)  # no MIG: the index, as before
    launch = WorkerLaunch("r", 1, 0, "img", ("true",), gpus=(1,), gpu_devices=("MIG-two",))
    request = resource_kwargs(launch, nvidia=True)["device_requests"][0]
    assert request["DeviceIDs"] == ["MIG-two"]
    assert gpu_environment(launch, nvidia=True)["NVIDIA_VISIBLE_DEVICES"] == "MIG-two"
    assert gpu_environment(launch, nvidia=True)["CUDA_VISIBLE_DEVICES"] == "0"  # remapped
    assert gpu_environment(launch, nvidia=False)["CUDA_VISIBLE_DEVICES"] == "MIG-two"
    plain = WorkerLaunch("r", 1, 0, "img", ("true",), gpus=(1, 3))
    assert resource_kwargs(plain, nvidia=True)["device_requests"][0]["DeviceIDs"] == ["1", "3"]


def test_doctor_names_the_mig_instances() -> None:
    inventory = read_inventory(None, nvml=h100_in_mig_mode().module(), env={})
    check, _ = check_nvml(None, lambda configured: inventory)
    assert check.status == "ok"
    assert check.message == (
        "NVML reads 3 GPU(s), driver 550.54.15; MIG instances, each a GPU of its own: "
        "0:0 MIG 3g.40gb, 0:2 MIG 2g.20gb"
    )
    whole = read_inventory(None, nvml=two_gpus().module(), env={})
    assert check_nvml(None, lambda configured: whole)[0].message == (
        "NVML reads 2 GPU(s), driver 550.54.15"
    )


def _mig_inventory() -> Inventory:
    return read_inventory(None, nvml=h100_in_mig_mode().module(), env={})


@pytest.mark.parametrize("remaps", [False, True], ids=["process", "docker-nvidia"])
def test_the_loop_plans_gpus_of_different_sizes_and_names_them(
    tmp_path: Path, remaps: bool
) -> None:
    """A machine of a 40 GiB and a 20 GiB MIG instance and an 80 GiB GPU: three GPUs to
    plan; each run started on one is given that one's UUID (or 0 where Docker remaps)."""
    inventory = _mig_inventory()
    engine = Engine(tmp_path, gpus=3, remaps_gpus=remaps)
    engine.settings.machine = machine_for(engine.config, inventory)
    engine.settings.gpu_devices = inventory.devices
    for name in ("a", "b", "c", "d"):
        engine.submit(name, gpus=1)
    engine.tick()
    started = {n: engine.executor.launches[engine.executor.handle(n)] for n in "abc"}
    given = sorted(launch.gpu_devices for launch in started.values())
    assert given == [("GPU-bbb",), ("MIG-one",), ("MIG-two",)]
    for launch in started.values():
        expected = "0" if remaps else launch.gpu_devices[0]
        assert launch.env["CUDA_VISIBLE_DEVICES"] == expected
        assert launch.env["NVIDIA_VISIBLE_DEVICES"] == launch.gpu_devices[0]
    assert engine.executor.ops("d") == []  # three GPUs, all given: the fourth waits


def test_without_mig_the_loop_names_gpus_by_index(tmp_path: Path) -> None:
    engine = Engine(tmp_path, gpus=2)
    engine.submit("a", gpus=2)
    engine.tick()
    launch = engine.executor.launches[engine.executor.handle("a")]
    assert (launch.gpu_devices, launch.gpu_names) == (("0", "1"), ("0", "1"))
    assert (launch.env["CUDA_VISIBLE_DEVICES"], launch.env["NVIDIA_VISIBLE_DEVICES"]) == (
        "0,1",
        "0,1",
    )


def test_astra_gpus_shows_a_mig_instance_by_index_and_place() -> None:
    from astraeus_tui.cli.machine import _label
    from runner.schema import Gpu

    assert _label(Gpu(index=1, mig="0:2")) == "1 (0:2)"
    assert _label(Gpu(index=1)) == "1"
